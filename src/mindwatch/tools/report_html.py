"""The interactive charts of the HTML report: plotly.js, inlined, nothing fetched.

Why plotly: its Python package (MIT, maintained by Plotly) ships plotly.js and hands it
over as one string (``plotly.offline.get_plotlyjs``), so the report stays one file that
works offline; hover values, zoom/pan, legend toggles and linked axes are built in, and
its JavaScript API (``Plotly.relayout``, the ``plotly_*`` events) is documented. The cost
is about 4.8 MB of script per report (measured in docs/performance.md).

The figure is built here as plain JSON (``data``, ``layout``), not through
``plotly.graph_objects``: nothing to validate at run time, and ``tests`` check the
spec against the graph objects instead. Every text that comes from a run (names,
tags, alert messages) is HTML-escaped, as plotly renders a small HTML subset in
labels, and the JSON escapes ``<`` so no string can close the ``<script>``.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from mindwatch.tools.smoothing import DEFAULT_WEIGHT, ema
from mindwatch.tools.summary import RunSummary, Series, downsample

__all__ = ["PALETTE", "Plot", "interactive_plots", "plotly_js"]

# Tableau 10: ten colours told apart also by most colour-blind readers.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
ALERT_COLOR = "#d62728"
ROW_HEIGHT = 230  # pixels per subplot

# What the x axis can show, and how a run's steps map onto it (None: no data for it).
_AXES: dict[str, str] = {
    "step": "step",
    "samples": "samples seen",
    "tokens": "tokens seen",
    "time": "training time (s, sum of step times)",
}


@dataclass
class Plot:
    """One plotly figure: an element id, its caption, and the JSON the page draws."""

    key: str
    caption: str
    spec: dict[str, Any]

    def json(self) -> str:
        """The spec as JSON that is safe inside ``<script>``."""
        return json.dumps(self.spec, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def plotly_js() -> str:
    """plotly.js, minified, from the installed plotly package."""
    from plotly.offline import get_plotlyjs

    text: str = get_plotlyjs()
    return text.replace("</script", "<\\/script")


def _text(value: Any) -> str:
    return html.escape(str(value), quote=False)


def _numbers(values: np.ndarray[Any, Any]) -> list[Optional[float]]:
    """Floats for JSON; NaN and infinity become null (a gap in the line)."""
    return [v if math.isfinite(v) else None for v in values.astype(np.float64).tolist()]


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _cumulative(steps: np.ndarray[Any, Any], per_step: np.ndarray[Any, Any]) -> Any:
    """step -> running total of ``per_step`` (the amount one step adds at each logged
    point), counting the steps between logged points (every N-th step logged)."""
    gaps = np.maximum(np.diff(steps, prepend=0), 1)
    amounts = np.where(np.isfinite(per_step), per_step, 0.0) * gaps
    totals = np.cumsum(amounts)

    def to_axis(at: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = np.interp(at, steps, totals)
        return out

    return to_axis


def _axis_maps(run: RunSummary) -> dict[str, Optional[Callable[[Any], Any]]]:
    """For each x axis, how this run's steps map onto it, if its data allows."""
    maps: dict[str, Optional[Callable[[Any], Any]]] = {
        "step": lambda s: np.asarray(s, dtype=np.float64)
    }
    step_ms = run.get("perf/step_time_ms")
    for axis, tag in (("samples", "perf/samples_per_s"), ("tokens", "perf/tokens_per_s")):
        rate = run.get(tag)
        maps[axis] = None
        if rate is not None and step_ms is not None and len(rate) and len(step_ms):
            ms = np.interp(rate.steps, step_ms.steps, step_ms.values)
            maps[axis] = _cumulative(rate.steps, rate.values * ms / 1000.0)
    maps["time"] = None
    if step_ms is not None and len(step_ms):
        maps["time"] = _cumulative(step_ms.steps, step_ms.values / 1000.0)
    return maps


class _Builder:
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
        trace["yaxis"] = "y" if row == 1 else f"y{row}"
        trace["legendgroup"] = f"run{run_index}"
        if "name" not in trace:
            trace["name"] = _text(run.name) if self.multi else "train"
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
        name = _text(self.runs[run_index].name)
        self.add(
            run_index,
            row,
            steps,
            {
                "y": _numbers(values),
                "mode": "lines",
                "line": {"color": _color(run_index), "width": 1.6},
                "name": name if self.multi else label,
                "hovertemplate": f"{name}<br>{label} %{{y:.4~g}}{unit}<extra></extra>",
            },
        )


def _kept(series: Series) -> np.ndarray[Any, Any]:
    """Indices of ``series`` that :func:`downsample` keeps (min and max per bucket)."""
    kept_steps, _ = downsample(series.steps, series.values)
    index: np.ndarray[Any, Any] = np.searchsorted(series.steps, kept_steps)
    return index


def _smoothed(
    b: _Builder, i: int, row: int, series: Series, *, label: str, unit: str, weight: float
) -> np.ndarray[Any, Any]:
    """The smoothed line (hover: smoothed and raw value) and the raw one, faint behind
    it (hidden at first when several runs overlay). Returns the smoothed values."""
    name = _text(b.runs[i].name)
    smooth = ema(series.values, weight)
    keep = _kept(series)
    steps = series.steps[keep]
    b.raw.append(
        b.add(
            i,
            row,
            steps,
            {
                "y": _numbers(series.values[keep]),
                "mode": "lines",
                "line": {"color": _color(i), "width": 1},
                "opacity": 0.25,
                "hoverinfo": "skip",
                "showlegend": False,
                "visible": not b.multi,  # ten faint lines bury the smoothed ones
            },
        )
    )
    legend = {} if b.multi or row != 1 else {"name": f"{label}, smoothed", "showlegend": True}
    b.add(
        i,
        row,
        steps,
        {
            **legend,
            "y": _numbers(smooth[keep]),
            "customdata": _numbers(series.values[keep]),
            "mode": "lines",
            "line": {"color": _color(i), "width": 2 if row == 1 else 1.6},
            "hovertemplate": f"{name}<br>{label} %{{y:.4~g}}{unit} smoothed"
            f" (raw %{{customdata:.4~g}}{unit})<extra></extra>",
        },
    )
    return smooth


def _loss_row(b: _Builder, weight: float) -> None:
    row = b.row(f"loss (smoothed, EMA weight {weight:g})")
    for i, run in enumerate(b.runs):
        loss = run.get("train/loss")
        if loss is None or not len(loss):
            continue
        name = _text(run.name)
        smooth = _smoothed(b, i, row, loss, label="loss", unit="", weight=weight)
        evals = run.get("eval/loss")
        if evals is not None and len(evals):
            b.marks.append(
                b.add(
                    i,
                    row,
                    evals.steps,
                    {
                        "y": _numbers(evals.values),
                        "mode": "markers",
                        "marker": {"color": _color(i), "size": 8, "symbol": "circle-open"},
                        "name": "eval loss",
                        "showlegend": not b.multi,
                        "hovertemplate": f"{name}<br>eval loss %{{y:.4~g}}<extra></extra>",
                    },
                )
            )
        alerts = [a for a in run.alerts if isinstance(a.get("step"), int)]
        if alerts:
            at = np.array([a["step"] for a in alerts], dtype=np.int64)
            finite = np.isfinite(smooth)
            y = (
                np.interp(at, loss.steps[finite], smooth[finite])
                if finite.any()
                else np.zeros(len(at))
            )
            texts = [
                _text(
                    f"{a.get('severity', 'alert')} · {a.get('rule', '')}, step {a['step']}: "
                    f"{a.get('message', '')}"
                )
                for a in alerts
            ]
            b.marks.append(
                b.add(
                    i,
                    row,
                    at,
                    {
                        "y": _numbers(y),
                        "text": texts,
                        "mode": "markers",
                        "marker": {
                            "color": ALERT_COLOR,
                            "size": 11,
                            "symbol": "triangle-down",
                            "line": {"color": "#ffffff", "width": 1},
                        },
                        "name": "alerts",
                        "showlegend": not b.multi,
                        "hovertemplate": f"{name}<br>%{{text}}<extra></extra>",
                    },
                )
            )


def _series_row(
    b: _Builder,
    tag: str,
    title: str,
    unit: str = "",
    *,
    log: bool = False,
    weight: Optional[float] = None,
) -> None:
    """One tag of every run; smoothed like the loss when ``weight`` is given."""
    row = b.row(title if weight is None else f"{title}, smoothed", log=log, tag=tag)
    label = title.split(" (", maxsplit=1)[0]
    for i, run in enumerate(b.runs):
        series = run.get(tag)
        if series is None or not len(series):
            continue
        if weight is None:
            b.line(i, row, series, unit, label)
        else:
            _smoothed(b, i, row, series, label=label, unit=unit, weight=weight)


def _throughput_row(b: _Builder, tag: str, weight: float) -> None:
    name = tag[len("perf/") :]
    unit = " samples/s" if name == "samples_per_s" else " tokens/s"
    row = b.row(f"throughput ({unit.strip()}), smoothed")
    for i, run in enumerate(b.runs):
        low, high = run.get(f"ranks/{name}_min"), run.get(f"ranks/{name}_max")
        if low is not None and high is not None and len(low) == len(high) and len(low):
            keep = _kept(high)
            common = {"mode": "lines", "line": {"width": 0, "color": _color(i)}}
            b.add(
                i,
                row,
                low.steps[keep],
                {
                    **common,
                    "y": _numbers(low.values[keep]),
                    "hoverinfo": "skip",
                    "showlegend": False,
                },
            )
            b.add(
                i,
                row,
                high.steps[keep],
                {
                    **common,
                    "y": _numbers(high.values[keep]),
                    "fill": "tonexty",
                    "fillcolor": _color(i) + "33",
                    "name": "min-max across ranks",
                    "showlegend": not b.multi,
                    "hoverinfo": "skip",
                },
            )
        series = run.get(tag)
        if series is not None and len(series):
            _smoothed(b, i, row, series, label="throughput", unit=unit, weight=weight)


def _timeline(runs: Sequence[RunSummary], weight: float) -> Optional[Plot]:
    b = _Builder(runs)

    def has(tag: str) -> bool:
        return any(r.get(tag) is not None for r in runs)

    if has("train/loss"):
        _loss_row(b, weight)
    if has("train/lr"):
        _series_row(b, "train/lr", "learning rate")
    if has("train/grad_norm"):
        _series_row(b, "train/grad_norm", "gradient norm (global L2)", weight=weight)
    for tag in ("perf/samples_per_s", "perf/tokens_per_s"):
        if has(tag):
            _throughput_row(b, tag, weight)
            break
    if has("perf/step_time_ms"):
        _series_row(
            b, "perf/step_time_ms", "step time (ms, log scale)", " ms", log=True, weight=weight
        )
    evals = sorted(
        {t for r in runs for t in r.series if t.startswith("eval/") and t != "eval/loss"}
    )
    for tag in evals:
        _series_row(b, tag, tag)
    if not b.traces:
        return None
    return Plot("timeline", _caption(b, weight), _layout(b))


def _caption(b: _Builder, weight: float) -> str:
    parts = [
        f"Loss, gradient norm, throughput and step time smoothed as TensorBoard does "
        f"(exponential moving average, weight {weight:g}); hover shows the raw value too."
    ]
    if b.raw and not b.multi:
        parts.append("The faint lines are the raw values.")
    if b.multi:
        parts.append("Click a run in the legend to hide it, double-click to show it alone.")
    parts.append(
        "Drag to zoom (all charts follow), double-click to reset; the buttons above pick "
        "the x axis and show or hide the raw values, eval points and alerts."
    )
    return " ".join(parts)


def _layout(b: _Builder) -> dict[str, Any]:
    n = len(b.rows)
    gap = 0.28 / n if n > 1 else 0.0
    height = (1.0 - gap * (n - 1)) / n
    layout: dict[str, Any] = {
        "height": ROW_HEIGHT * n + 140,
        "margin": {"l": 70, "r": 20, "t": 90, "b": 60},
        "hovermode": "closest",
        "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, sans-serif", "size": 12},
        # outside the plots, on the right beside the loss: never covers a curve
        "legend": _SIDE_LEGEND,
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
                "text": f"<b>{_text(row['title'])}</b>",
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
    bottom = "" if n == 1 else str(n)
    layout[f"xaxis{bottom}"]["title"] = {"text": _AXES["step"]}
    layout["updatemenus"] = _menus(b, bottom)
    return {"data": b.traces, "layout": layout}


def _menus(b: _Builder, bottom: str) -> list[dict[str, Any]]:
    maps = [_axis_maps(run) for run in b.runs]
    buttons = []
    for axis, title in _AXES.items():
        if any(m[axis] is None for m in maps):
            continue  # a run without the data for it: not offered
        xs = [maps[i][axis](steps).tolist() for i, steps in b.steps]  # type: ignore[misc]
        buttons.append(
            {
                "label": f"x: {axis}",
                "method": "update",
                "args": [{"x": xs}, {"xaxis.autorange": True, f"xaxis{bottom}.title.text": title}],
            }
        )
    menus: list[dict[str, Any]] = []
    placement = {"yanchor": "bottom", "y": 1.0, "pad": {"b": 46}, "xanchor": "left"}
    if len(buttons) > 1:
        menus.append(
            {"type": "buttons", "direction": "right", "x": 0, "showactive": True, **placement}
            | {"buttons": buttons}
        )
    toggles = []
    for label, indices, shown in (
        ("raw values", b.raw, not b.multi),
        ("eval and alerts", b.marks, True),
    ):
        if indices:
            on, off = {"visible": True}, {"visible": False}
            toggles.append(
                {
                    "label": label,
                    "method": "restyle",
                    "args": [off if shown else on, indices],
                    "args2": [on if shown else off, indices],
                }
            )
    if toggles:
        menus.append(
            {"type": "buttons", "direction": "right", "x": 0.55, "showactive": False, **placement}
            | {"buttons": toggles}
        )
    return menus


_SIDE_LEGEND = {"x": 1.02, "y": 1.0, "xanchor": "left", "yanchor": "top"}


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
        name = _text(run.name)
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
                "marker": {"color": _color(i)},
            }
        else:
            counts, edges = np.histogram(values, bins=50)
            trace = {
                "type": "bar",
                "x": _numbers((edges[:-1] + edges[1:]) / 2),
                "y": counts.tolist(),
                "width": float(edges[1] - edges[0]),
                "name": name,
                "marker": {"color": _color(i)},
                "hovertemplate": "gradient norm %{x:.4~g}: %{y} steps<extra></extra>",
            }
        data.append(trace)
    if not data:
        return None
    layout = {
        "height": 300 if not multi else 120 + 34 * len(data),
        "margin": {"l": 20, "r": 20, "t": 30, "b": 50},
        "showlegend": False,
        "xaxis": {"title": {"text": "global gradient norm"}, "gridcolor": "#e6e9ed"},
        "yaxis": {"automargin": True, "autorange": "reversed", "type": "category"}
        if multi
        else {"title": {"text": "steps"}, "gridcolor": "#e6e9ed", "automargin": True},
        "plot_bgcolor": "#ffffff",
    }
    caption = (
        "The gradient norm over all steps per run: median, quartiles, whiskers to 1.5 IQR."
        if multi
        else "Distribution of the gradient norm over all steps."
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
        for when, color in (("start", "#9ecae1"), ("end", "#3182bd")):
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "y": [_text(n) for n in norms],
                    "x": [float(norms[n][when]) for n in norms],
                    "name": when,
                    "marker": {"color": color},
                    "hovertemplate": f"%{{y}}<br>{when}: %{{x:.4~g}}<extra></extra>",
                }
            )
        caption = "Per-layer parameter L2 norms: first and last recorded value."
    else:
        for i, run, norms in have:
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "y": [_text(n) for n in norms],
                    "x": [float(norms[n]["end"]) for n in norms],
                    "customdata": [float(norms[n]["start"]) for n in norms],
                    "name": _text(run.name),
                    "marker": {"color": _color(i)},
                    "hovertemplate": f"{_text(run.name)}<br>%{{y}}: %{{x:.4~g}}"
                    " (first %{customdata:.4~g})<extra></extra>",
                }
            )
        caption = "Per-layer parameter L2 norms at the end of each run (hover: the first value)."
    layers = len({n for _, _, norms in have for n in norms})
    bars = 2 if len(runs) == 1 else len(have)
    layout = {
        "height": 110 + layers * max(12 * bars, 24),
        "barmode": "group",
        "margin": {"l": 20, "r": 20, "t": 20, "b": 50},
        "yaxis": {"autorange": "reversed", "automargin": True},
        "xaxis": {"title": {"text": "parameter L2 norm"}, "gridcolor": "#e6e9ed"},
        "legend": _SIDE_LEGEND,
        "plot_bgcolor": "#ffffff",
    }
    return Plot("layers", caption, {"data": data, "layout": layout})


def interactive_plots(runs: Sequence[RunSummary], weight: float = DEFAULT_WEIGHT) -> list[Plot]:
    """The report's figures: the linked timeline, the gradient norm's spread, the
    per-layer parameter norms."""
    plots = [_timeline(runs, weight), _gradient_spread(runs), _layers(runs)]
    return [p for p in plots if p is not None]
