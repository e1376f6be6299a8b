"""The interactive timeline's buttons: which x axis (steps, samples seen, tokens seen,
wall-clock time: how each run's steps map onto it) and the toggles for raw values,
eval points and alerts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np

from mindwatch.common.i18n import N_, _
from mindwatch.tools.report.summary import RunSummary, before_first_stamp

__all__ = ["AXES", "menus"]

# What the x axis can show (its button, its title); how a run's steps map onto it is
# :func:`_axis_maps`.
AXES: dict[str, tuple[str, str]] = {
    "step": (N_("step"), N_("step")),
    "samples": (N_("samples"), N_("samples seen")),
    "tokens": (N_("tokens"), N_("tokens seen")),
    "time": (N_("time"), N_("wall-clock time since the run started (s)")),
}


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
    maps["time"] = _elapsed(run)
    return maps


def _elapsed(run: RunSummary) -> Optional[Callable[[Any], Any]]:
    """step -> seconds since the run started, from the points' own wall times (pauses,
    evaluation and checkpoints included, as a clock on the wall saw them). The start is
    the first point's time less its step's own time (the first step compiles the graph
    before it is stamped)."""
    timed = [s for s in run.series.values() if s.walls is not None and len(s)]
    if not timed:
        return None
    source = max(timed, key=len)  # the tag logged most often: the finest clock
    walls = source.walls
    assert walls is not None
    start = float(walls[0]) - before_first_stamp(run)
    # a resumed run's later session may stamp steps again: keep the clock monotonic
    seconds = np.maximum.accumulate(walls - start)
    steps = source.steps

    def to_axis(at: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out: np.ndarray[Any, Any] = np.interp(at, steps, seconds)
        return out

    return to_axis


def menus(
    runs: Sequence[RunSummary],
    steps: Sequence[tuple[int, np.ndarray[Any, Any]]],
    *,
    raw: list[int],
    marks: list[int],
    multi: bool,
    bottom: str,
) -> list[dict[str, Any]]:
    """The buttons above the charts: the x axis (each trace's ``steps``, by run index,
    mapped onto it), and toggles for the ``raw`` traces and the ``marks`` (eval points
    and alerts). ``bottom``: the suffix of the lowest x axis, which has the title."""
    maps = [_axis_maps(run) for run in runs]
    buttons = []
    for axis, (short, title) in AXES.items():
        if any(m[axis] is None for m in maps):
            continue  # a run without the data for it: not offered
        xs = [maps[i][axis](at).tolist() for i, at in steps]  # type: ignore[misc]
        buttons.append(
            {
                "label": _("x: {axis}").format(axis=_(short)),
                "method": "update",
                "args": [
                    {"x": xs},
                    {"xaxis.autorange": True, f"xaxis{bottom}.title.text": _(title)},
                ],
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
        (_("raw values"), raw, not multi),
        (_("eval and alerts"), marks, True),
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
