"""Stacked subplots sharing one x axis, for the interactive timeline (:mod:`.timeline`).

:class:`Subplots` collects traces row by row, each remembering its run and steps so the
x-axis menu (:mod:`.menus`) can map them onto samples, tokens or time; :func:`figure`
lays the rows out, one y axis each, top to bottom, with x axes that zoom together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mindwatch.common.i18n import _
from mindwatch.tools.report.menus import AXES, menus
from mindwatch.tools.report.plot import FONTS, SIDE_LEGEND, color, numbers, text
from mindwatch.tools.report.summary import RunSummary, Series, downsample

__all__ = ["ROW_HEIGHT", "Subplots", "figure", "overlay_axis"]

ROW_HEIGHT = 230  # pixels per subplot


class Subplots:
    """Traces on stacked subplots sharing one x axis; each trace remembers its steps so
    the x-axis menu can map them onto samples, tokens or time."""

    def __init__(self, runs: Sequence[RunSummary]) -> None:
        self.runs = runs
        self.multi = len(runs) > 1
        self.traces: list[dict[str, Any]] = []
        self.steps: list[tuple[int, np.ndarray[Any, Any]]] = []  # (run index, steps)
        self.rows: list[dict[str, Any]] = []  # one per subplot: title, log
        self.raw: list[int] = []  # trace indices of the faint raw loss
        self.marks: list[int] = []  # eval points and alerts
        self.legend_shown: set[int] = set()
        self.overlays: set[int] = set()  # rows with an overlay axis for alert markers

    def row(self, title: str, *, log: bool = False, tag: str = "") -> int:
        """A new subplot; ``log``: a log y axis for ``tag``'s values."""
        wide = False
        if log:  # a tick per decade when the values span several (no 2 and 5 labels)
            finite = [s.finite() for r in self.runs for s in [r.get(tag)] if s is not None]
            values = np.concatenate(finite) if finite else np.ones(1)
            values = values[values > 0]
            log = bool(len(values))
            wide = log and float(values.max()) > 20 * float(values.min())
        self.rows.append({"title": title, "log": log, "decades": wide})
        return len(self.rows)

    def add(self, run_index: int, row: int, steps: Any, trace: dict[str, Any]) -> int:
        run = self.runs[run_index]
        trace.setdefault("type", "scatter")
        trace["x"] = np.asarray(steps).tolist()
        trace["xaxis"] = "x" if row == 1 else f"x{row}"
        trace.setdefault("yaxis", "y" if row == 1 else f"y{row}")
        trace["legendgroup"] = f"run{run_index}"
        if "name" not in trace:
            trace["name"] = text(run.name) if self.multi else _("train")
        if self.multi and trace.get("showlegend") is not False:
            # one legend entry per run (its first shown trace): it toggles the run everywhere
            trace["showlegend"] = run_index not in self.legend_shown
            self.legend_shown.add(run_index)
        elif not self.multi:
            trace.setdefault("showlegend", False)
        self.traces.append(trace)
        self.steps.append((run_index, np.asarray(steps)))
        return len(self.traces) - 1

    def line(self, run_index: int, row: int, series: Series, unit: str, label: str) -> None:
        steps, values = downsample(series.steps, series.values)
        name = text(self.runs[run_index].name)
        self.add(
            run_index,
            row,
            steps,
            {
                "y": numbers(values),
                "mode": "lines",
                "line": {"color": color(run_index), "width": 1.6},
                "name": name if self.multi else label,
                "hovertemplate": f"{name}<br>{label} %{{y:.4~g}}{unit}<extra></extra>",
            },
        )


def overlay_axis(row: int) -> str:
    """The id of row ``row``'s overlay y axis (alert markers): past any row's own."""
    return f"y{100 + row}"


def figure(b: Subplots) -> dict[str, Any]:
    """The plotly figure of ``b``: its traces, a y axis per row stacked top to bottom
    (and each row's overlay for alert markers), x axes that zoom together, the menus."""
    n = len(b.rows)
    gap = 0.28 / n if n > 1 else 0.0
    height = (1.0 - gap * (n - 1)) / n
    layout: dict[str, Any] = {
        "height": ROW_HEIGHT * n + 140,
        "margin": {"l": 70, "r": 20, "t": 90, "b": 60},
        "hovermode": "closest",
        "plot_bgcolor": "#ffffff",
        "font": {"family": FONTS, "size": 12},
        # outside the plots, on the right beside the loss: never covers a curve
        "legend": SIDE_LEGEND,
        "showlegend": True,
        "annotations": [],
    }
    for r, row in enumerate(b.rows, start=1):
        top = 1.0 - (r - 1) * (height + gap)
        suffix = "" if r == 1 else str(r)
        layout[f"yaxis{suffix}"] = {
            "domain": [max(top - height, 0.0), top],
            "anchor": f"x{suffix}",
            "type": "log" if row["log"] else "linear",
            "gridcolor": "#e6e9ed",
            "zeroline": False,
            "exponentformat": "SI" if not row["log"] else "power",
            **({"dtick": 1} if row["decades"] else {}),
        }
        layout[f"xaxis{suffix}"] = {
            "anchor": f"y{suffix}",
            "gridcolor": "#e6e9ed",
            "showticklabels": True,
            **({} if r == 1 else {"matches": "x"}),
        }
        layout["annotations"].append(
            {
                "text": f"<b>{text(row['title'])}</b>",
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": top,
                "yanchor": "bottom",
                "xanchor": "left",
                "showarrow": False,
                "font": {"size": 13},
            }
        )
    for r in b.overlays:
        layout[f"yaxis{overlay_axis(r)[1:]}"] = {
            "overlaying": "y" if r == 1 else f"y{r}",
            "range": [0, 1],
            "fixedrange": True,
            "visible": False,
        }
    bottom = "" if n == 1 else str(n)
    layout[f"xaxis{bottom}"]["title"] = {"text": _(AXES["step"][1])}
    layout["updatemenus"] = menus(
        b.runs, b.steps, raw=b.raw, marks=b.marks, multi=b.multi, bottom=bottom
    )
    return {"data": b.traces, "layout": layout}
