"""The interactive report's timeline: stacked charts sharing one x axis.

The loss (smoothed as TensorBoard smooths it, the raw values faint behind, eval points,
alerts as markers along the top whose hover is their message), learning rate, gradient
norm, throughput with the band across ranks, step time and the eval metrics; a menu
puts steps, samples seen, tokens seen or wall-clock time on the x axis, and buttons show
or hide the raw values, eval points and alerts. The rows are stacked by
:mod:`.subplots`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from mindwatch.common.i18n import _
from mindwatch.metrics.smoothing import ema
from mindwatch.tools.report.plot import Plot, color, numbers, text
from mindwatch.tools.report.subplots import Subplots, figure, overlay_axis
from mindwatch.tools.report.summary import RunSummary, Series, downsample, throughput_band

__all__ = ["timeline"]

ALERT_COLOR = "#d62728"


def _kept(series: Series) -> np.ndarray[Any, Any]:
    """Indices of ``series`` that :func:`downsample` keeps (min and max per bucket)."""
    kept_steps, _ = downsample(series.steps, series.values)
    index: np.ndarray[Any, Any] = np.searchsorted(series.steps, kept_steps)
    return index


def _smoothed(
    b: Subplots, i: int, row: int, series: Series, *, label: str, unit: str, weight: float
) -> np.ndarray[Any, Any]:
    """The smoothed line (hover: smoothed and raw value) and the raw one, faint behind
    it (hidden at first when several runs overlay). Returns the smoothed values."""
    name = text(b.runs[i].name)
    smooth = ema(series.values, weight)
    keep = _kept(series)
    steps = series.steps[keep]
    b.raw.append(
        b.add(
            i,
            row,
            steps,
            {
                "y": numbers(series.values[keep]),
                "mode": "lines",
                "line": {"color": color(i), "width": 1},
                "opacity": 0.25,
                "hoverinfo": "skip",
                "showlegend": False,
                "visible": not b.multi,  # ten faint lines bury the smoothed ones
            },
        )
    )
    legend = {}
    if not b.multi and row == 1:
        legend = {"name": _("{label}, smoothed").format(label=label), "showlegend": True}
    smoothed, raw = _("smoothed"), _("raw")
    b.add(
        i,
        row,
        steps,
        {
            **legend,
            "y": numbers(smooth[keep]),
            "customdata": numbers(series.values[keep]),
            "mode": "lines",
            "line": {"color": color(i), "width": 2 if row == 1 else 1.6},
            "hovertemplate": f"{name}<br>{label} %{{y:.4~g}}{unit} {smoothed}"
            f" ({raw} %{{customdata:.4~g}}{unit})<extra></extra>",
        },
    )
    return smooth


def _loss_row(b: Subplots, weight: float) -> None:
    row = b.row(_("loss (smoothed, EMA weight {weight})").format(weight=f"{weight:g}"))
    loss_label, eval_label = _("loss"), _("eval loss")
    for i, run in enumerate(b.runs):
        loss = run.get("train/loss")
        if loss is None or not len(loss):
            continue
        name = text(run.name)
        _smoothed(b, i, row, loss, label=loss_label, unit="", weight=weight)
        evals = run.get("eval/loss")
        if evals is not None and len(evals):
            b.marks.append(
                b.add(
                    i,
                    row,
                    evals.steps,
                    {
                        "y": numbers(evals.values),
                        "mode": "markers",
                        "marker": {"color": color(i), "size": 8, "symbol": "circle-open"},
                        "name": eval_label,
                        "showlegend": not b.multi,
                        "hovertemplate": f"{name}<br>{eval_label} %{{y:.4~g}}<extra></extra>",
                    },
                )
            )
        _alert_marks(b, i, row)


def _alert_marks(b: Subplots, i: int, row: int) -> None:
    """Run ``i``'s alerts as markers along the top of the loss chart, on an axis of
    their own (0..1, fixed): on the curve, the line's points would win the hover and
    hide the message; up there the marker wins, and zooming keeps them in view."""
    alerts = b.runs[i].alerts  # each with an int step: mindwatch.alerts.reading
    if not alerts:
        return
    template = _("{severity} · {rule}, step {step}: {message}")
    texts = [
        "<br>".join(
            text(line)
            for line in textwrap.wrap(
                template.format(
                    severity=a.get("severity", "alert"),
                    rule=a.get("rule", ""),
                    step=a["step"],
                    message=a.get("message", ""),
                ),
                70,
            )
        )
        for a in alerts
    ]
    b.overlays.add(row)
    b.marks.append(
        b.add(
            i,
            row,
            np.array([a["step"] for a in alerts], dtype=np.int64),
            {
                "y": [0.95 - 0.06 * (i % 8)] * len(alerts),
                "yaxis": overlay_axis(row),
                "text": texts,
                "mode": "markers",
                "marker": {
                    "color": ALERT_COLOR,
                    "size": 12,
                    "symbol": "triangle-down",
                    "line": {"color": color(i) if b.multi else "#ffffff", "width": 1.5},
                },
                "name": _("alerts"),
                "showlegend": not b.multi,
                "hovertemplate": f"{text(b.runs[i].name)}<br>%{{text}}<extra></extra>",
            },
        )
    )


def _series_row(
    b: Subplots,
    tag: str,
    title: str,
    unit: str = "",
    *,
    label: Optional[str] = None,
    log: bool = False,
    weight: Optional[float] = None,
) -> None:
    """One tag of every run (``label``: its name in the hover, default ``title``);
    smoothed like the loss when ``weight`` is given."""
    if weight is not None:
        title = _("{title}, smoothed").format(title=title)
    row = b.row(title, log=log, tag=tag)
    label = label or title
    for i, run in enumerate(b.runs):
        series = run.get(tag)
        if series is None or not len(series):
            continue
        if weight is None:
            b.line(i, row, series, unit, label)
        else:
            _smoothed(b, i, row, series, label=label, unit=unit, weight=weight)


def _throughput_row(b: Subplots, tag: str, weight: float) -> None:
    name = tag[len("perf/") :]
    unit = " " + (_("samples/s") if name == "samples_per_s" else _("tokens/s"))
    row = b.row(_("throughput ({unit}), smoothed").format(unit=unit.strip()))
    for i, run in enumerate(b.runs):
        band = throughput_band(run, name)
        if band is not None:
            steps, low, high, ranks = band
            keep = _kept(Series(steps, high))
            common = {"mode": "lines", "line": {"width": 0, "color": color(i)}}
            b.add(
                i,
                row,
                steps[keep],
                {
                    **common,
                    "y": numbers(low[keep]),
                    "hoverinfo": "skip",
                    "showlegend": False,
                },
            )
            b.add(
                i,
                row,
                steps[keep],
                {
                    **common,
                    "y": numbers(high[keep]),
                    "fill": "tonexty",
                    "fillcolor": color(i) + "33",
                    "name": _("slowest to fastest rank, × {ranks} ranks").format(ranks=ranks),
                    "showlegend": not b.multi,
                    "hoverinfo": "skip",
                },
            )
        series = run.get(tag)
        if series is not None and len(series):
            _smoothed(b, i, row, series, label=_("throughput"), unit=unit, weight=weight)


def timeline(runs: Sequence[RunSummary], weight: float) -> Optional[Plot]:
    b = Subplots(runs)

    def has(tag: str) -> bool:
        return any(r.get(tag) is not None for r in runs)

    if has("train/loss"):
        _loss_row(b, weight)
    if has("train/lr"):
        _series_row(b, "train/lr", _("learning rate"))
    if has("train/grad_norm"):
        _series_row(
            b,
            "train/grad_norm",
            _("gradient norm (global L2)"),
            label=_("gradient norm"),
            weight=weight,
        )
    for tag in ("perf/samples_per_s", "perf/tokens_per_s"):
        if has(tag):
            _throughput_row(b, tag, weight)
            break
    if has("perf/step_time_ms"):
        _series_row(
            b,
            "perf/step_time_ms",
            _("step time (ms, log scale)"),
            " ms",
            label=_("step time"),
            log=True,
            weight=weight,
        )
    evals = sorted(
        {t for r in runs for t in r.series if t.startswith("eval/") and t != "eval/loss"}
    )
    for tag in evals:
        _series_row(b, tag, tag)
    if not b.traces:
        return None
    return Plot("timeline", _caption(b, weight), figure(b))


def _caption(b: Subplots, weight: float) -> str:
    parts = [
        _(
            "Loss, gradient norm, throughput and step time smoothed as TensorBoard does "
            "(exponential moving average, weight {weight}); hover shows the raw value too."
        ).format(weight=f"{weight:g}")
    ]
    if b.raw and not b.multi:
        parts.append(_("The faint lines are the raw values."))
    if b.overlays:
        parts.append(_("Red triangles along the top of the loss chart are alerts: hover one."))
    if b.multi:
        parts.append(_("Click a run in the legend to hide it, double-click to show it alone."))
    parts.append(
        _(
            "Drag to zoom (all charts follow), double-click to reset; the buttons above pick "
            "the x axis and show or hide the raw values, eval points and alerts."
        )
    )
    return " ".join(parts)
