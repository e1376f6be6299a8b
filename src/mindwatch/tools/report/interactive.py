"""The interactive charts of the HTML report (plotly, :mod:`.plot`): the linked
timeline (:mod:`.timeline`), the gradient norm's spread, per-layer norms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from mindwatch.common.i18n import _
from mindwatch.metrics.smoothing import DEFAULT_WEIGHT
from mindwatch.tools.report.plot import SIDE_LEGEND, Plot, color, numbers, text
from mindwatch.tools.report.summary import RunSummary
from mindwatch.tools.report.timeline import timeline

__all__ = ["interactive_plots"]


def _gradient_spread(runs: Sequence[RunSummary]) -> Optional[Plot]:
    """One run: a histogram of the gradient norm. Several: a box per run (overlaid
    histograms of ten runs are a brown smear)."""
    multi = len(runs) > 1
    data = []
    for i, run in enumerate(runs):
        series = run.get("train/grad_norm")
        if series is None or not len(series.finite()):
            continue
        values = series.finite()
        name = text(run.name)
        # statistics computed here, not in the page: a million points stay out of the file
        if multi:
            q1, median, q3 = np.percentile(values, [25, 50, 75])
            low = values[values >= q1 - 1.5 * (q3 - q1)].min()
            high = values[values <= q3 + 1.5 * (q3 - q1)].max()
            trace: dict[str, Any] = {
                "type": "box",
                "orientation": "h",
                "y": [name],
                "q1": [q1],
                "median": [median],
                "q3": [q3],
                "lowerfence": [low],
                "upperfence": [high],
                "name": name,
                "marker": {"color": color(i)},
            }
        else:
            counts, edges = np.histogram(values, bins=50)
            trace = {
                "type": "bar",
                "x": numbers((edges[:-1] + edges[1:]) / 2),
                "y": counts.tolist(),
                "width": float(edges[1] - edges[0]),
                "name": name,
                "marker": {"color": color(i)},
                "hovertemplate": _("gradient norm {x}: {y} steps").format(x="%{x:.4~g}", y="%{y}")
                + "<extra></extra>",
            }
        data.append(trace)
    if not data:
        return None
    layout = {
        "height": 300 if not multi else 120 + 34 * len(data),
        "margin": {"l": 20, "r": 20, "t": 30, "b": 50},
        "showlegend": False,
        "xaxis": {"title": {"text": _("global gradient norm")}, "gridcolor": "#e6e9ed"},
        "yaxis": {"automargin": True, "autorange": "reversed", "type": "category"}
        if multi
        else {"title": {"text": _("steps")}, "gridcolor": "#e6e9ed", "automargin": True},
        "plot_bgcolor": "#ffffff",
    }
    caption = (
        _("The gradient norm over all steps per run: median, quartiles, whiskers to 1.5 IQR.")
        if multi
        else _("Distribution of the gradient norm over all steps.")
    )
    return Plot("grad_spread", caption, {"data": data, "layout": layout})


def _layers(runs: Sequence[RunSummary]) -> Optional[Plot]:
    """Per-layer parameter norms: one run's first and last value, or several runs'
    last values side by side (hover shows the first too)."""
    have: list[tuple[int, RunSummary, dict[str, Any]]] = [
        (i, r, r.facts["param_norms"]) for i, r in enumerate(runs) if r.facts.get("param_norms")
    ]
    if not have:
        return None
    data: list[dict[str, Any]] = []
    if len(runs) == 1:
        norms = have[0][2]
        for when, fill, shown in (("start", "#9ecae1", _("first")), ("end", "#3182bd", _("last"))):
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "y": [text(n) for n in norms],
                    "x": [float(norms[n][when]) for n in norms],
                    "name": shown,
                    "marker": {"color": fill},
                    "hovertemplate": f"%{{y}}<br>{shown}: %{{x:.4~g}}<extra></extra>",
                }
            )
        caption = _("Per-layer parameter L2 norms: first and last recorded value.")
    else:
        for i, run, norms in have:
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "y": [text(n) for n in norms],
                    "x": [float(norms[n]["end"]) for n in norms],
                    "customdata": [float(norms[n]["start"]) for n in norms],
                    "name": text(run.name),
                    "marker": {"color": color(i)},
                    "hovertemplate": f"{text(run.name)}<br>%{{y}}: %{{x:.4~g}} ("
                    + _("first {value}").format(value="%{customdata:.4~g}")
                    + ")<extra></extra>",
                }
            )
        caption = _("Per-layer parameter L2 norms at the end of each run (hover: the first value).")
    layers = len({n for _, _, norms in have for n in norms})
    bars = 2 if len(runs) == 1 else len(have)
    layout = {
        "height": 110 + layers * max(12 * bars, 24),
        "barmode": "group",
        "margin": {"l": 20, "r": 20, "t": 20, "b": 50},
        "yaxis": {"autorange": "reversed", "automargin": True},
        "xaxis": {"title": {"text": _("parameter L2 norm")}, "gridcolor": "#e6e9ed"},
        "legend": SIDE_LEGEND,
        "plot_bgcolor": "#ffffff",
    }
    return Plot("layers", caption, {"data": data, "layout": layout})


def interactive_plots(runs: Sequence[RunSummary], weight: float = DEFAULT_WEIGHT) -> list[Plot]:
    """The report's figures: the linked timeline, the gradient norm's spread, the
    per-layer parameter norms."""
    plots = [timeline(runs, weight), _gradient_spread(runs), _layers(runs)]
    return [p for p in plots if p is not None]
