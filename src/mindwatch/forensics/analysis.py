"""What moved first before an alert: robust z-scores over the flight recorder's window.

Every series of the window (each parameter's gradient norm, the loss, the global
gradient norm, the learning rate, the loss scale, max attention logits) is judged
against its own history: the steps of the window before the last ``lookback`` ones are
its baseline, their median its centre and 1.4826 x their median absolute deviation its
spread (a robust standard deviation: one earlier spike in the baseline does not widen
it). Positive series are judged in log, so "4x its usual size" scores the same for a
norm of 1e-4 and one of 30. A series *departed* at the first step of the last
``lookback`` whose score reaches ``z`` (or whose value is not finite: a value that is
there, NaN or infinite; a step where the series has no value at all, because it is
logged less often or the cell returned no norms that step, is no judgement); the
movers are ranked by that onset step, then by how far they departed at it (a fault in
one layer moves that layer most at the step it starts, and the others through the loss
only afterwards or less).

A series departs in one direction: *up* (the default: what grew before a spike, an
explosion, a divergence) or *down* (before a vanishing-gradient alert). A small
parameter's gradient (a one-element bias) crosses zero now and then, and in log that is a
deep dip of no meaning before a spike; a loss that falls is training, not a cause. Only
the learning rate and the loss scale (whose drop precedes an overflow) depart either
way. Movers that depart at the same step by the same score (layers that turned
non-finite together, scored +inf) are ranked in backward order.

Why these choices: the spread is floored (1 % in log) so a flat series (a constant
learning rate) does not make every wiggle infinite; the first departure, not the
largest, answers "what moved first"; and a ranking, not one winner, lets the reader see
that three layers of one block moved together.

For a non-finite alert the first parameter whose gradient was not finite is named in
*backward order*: the reverse of the cell's parameter order, which is the order the
network defined them in, so for a network whose layers are defined in forward order
(MindSpore's and MindFormers' models) the last of them is the first the backward pass
reached. A gradient whose square sum overflowed float32 counts as not finite too.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import asdict, dataclass
from typing import Any, Literal, Optional

import numpy as np

from mindwatch.forensics.recorder import Window

__all__ = ["Direction", "Mover", "analyse", "first_nonfinite", "movers"]

_MAD_TO_SIGMA = 1.4826
_FLOOR = 0.01  # the smallest spread (in log for positive series): 1 %
_MIN_BASELINE = 8  # fewer baseline points than this: half the window is the baseline
_TOP = 10  # movers kept in the alert; the file keeps them all


@dataclass(frozen=True)
class Mover:
    """One series that departed: ``name`` (a parameter's name for ``kind`` "layer", the
    scalar's otherwise), the step it departed at, its score there and at its peak, its
    value at the alert's step against its baseline's median."""

    name: str
    kind: str
    onset: int
    z: float
    peak_z: float
    value: Optional[float]
    baseline: Optional[float]
    rank: Optional[int] = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("z", "peak_z", "value", "baseline"):
            v = out[key]
            out[key] = None if v is None or not math.isfinite(v) else float(f"{v:.6g}")
        if out["z"] is None and self.z == math.inf:
            out["z"] = "inf"
        return out


def _scores(
    column: np.ndarray[Any, Any], cut: int, logged: np.ndarray[Any, Any]
) -> Optional[tuple[np.ndarray[Any, Any], float]]:
    """The robust scores of ``column[cut:]`` against ``column[:cut]`` (NaN where no value
    was ``logged``), and the baseline median (None when the baseline has no finite
    value)."""
    base = column[:cut]
    base = base[np.isfinite(base)]
    if base.size == 0:
        return None
    positive = bool((base > 0).all())
    if positive:
        with np.errstate(divide="ignore", invalid="ignore"):
            judged_base = np.log(base)
            judged = np.log(column[cut:])
    else:
        judged_base, judged = base, column[cut:]
    center = float(np.median(judged_base))
    spread = _MAD_TO_SIGMA * float(np.median(np.abs(judged_base - center)))
    floor = _FLOOR if positive else _FLOOR * max(abs(center), 1e-12)
    z = (judged - center) / max(spread, floor)
    # NaN, +-Inf values, and log of a non-positive norm: not finite, the largest departure.
    z = np.where(np.isfinite(column[cut:]), z, math.inf)
    if positive:
        z = np.where(column[cut:] > 0, z, math.inf)
    # A step without a value is no departure (nor a NaN value it would read as).
    z = np.where(logged[cut:], z, math.nan)
    return z, float(np.median(base))


@dataclass(frozen=True)
class _Scored:
    """One series judged over the window's span: its scores in the judged rows."""

    name: str
    kind: str
    column: np.ndarray[Any, Any]
    scores: np.ndarray[Any, Any]
    baseline: float


def _span(window: Window, step: int, lookback: int) -> Optional[tuple[int, int]]:
    """``(rows, cut)``: the rows up to ``step``, and the first judged one (the rows
    before it are the baseline); None when the window is too short to judge."""
    rows = bisect_right(window.steps, step)
    cut = max(rows - lookback, 0)
    if cut < _MIN_BASELINE:
        cut = rows // 2
    return (rows, cut) if cut >= 2 else None


def _scored(window: Window, step: int, lookback: int) -> tuple[list[_Scored], Optional[range]]:
    """Every series of ``window`` scored over the last ``lookback`` rows up to ``step``
    (scalars first, then layers in the cell's order), and the judged rows."""
    span = _span(window, step, lookback)
    if span is None:
        return [], None
    rows, cut = span
    everywhere = np.ones(rows, dtype=bool)
    columns: list[tuple[str, str, np.ndarray[Any, Any], np.ndarray[Any, Any]]] = [
        (name, "scalar", series[:rows], window.scalars_logged.get(name, everywhere)[:rows])
        for name, series in window.scalars.items()
    ]
    if window.layers is not None:
        logged = window.layers_logged
        columns += [
            (
                name,
                "layer",
                window.layers[:rows, j],
                logged[:rows, j] if logged is not None else everywhere,
            )
            for j, name in enumerate(window.layer_names)
        ]
    found = []
    for name, kind, column, was_logged in columns:
        if not was_logged[cut:].any():
            continue  # not logged in the judged steps
        got = _scores(column, cut, was_logged)
        if got is not None:
            found.append(_Scored(name, kind, column, got[0], got[1]))
    return found, range(cut, rows)


Direction = Literal["up", "down"]
_EITHER_WAY = frozenset({"lr", "loss_scale"})


def movers(
    window: Window,
    step: int,
    *,
    lookback: int,
    z: float,
    rank: Optional[int] = None,
    direction: Direction = "up",
) -> list[Mover]:
    """Every series of ``window`` that departed in the ``lookback`` steps up to ``step``,
    first movers first; layers in ``direction`` only (see the module docs)."""
    return _movers(window, _scored(window, step, lookback)[0], z, rank, direction)


def _departed(s: _Scored, z: float, direction: Direction) -> np.ndarray[Any, Any]:
    scores = np.asarray(s.scores, dtype=np.float64)
    if s.name in _EITHER_WAY:
        out: np.ndarray[Any, Any] = np.abs(scores) >= z
    elif direction == "up":
        out = scores >= z
    else:  # not finite (scored +inf) counts in either direction
        out = (scores <= -z) | (scores == math.inf)
    return out


def _movers(
    window: Window, scored: list[_Scored], z: float, rank: Optional[int], direction: Direction
) -> list[Mover]:
    found = []
    backward = {name: -j for j, name in enumerate(window.layer_names)}
    for s in scored:
        over = np.flatnonzero(_departed(s, z, direction))
        if over.size == 0:
            continue
        first = int(over[0])
        value = float(s.column[-1])
        found.append(
            Mover(
                s.name,
                s.kind,
                onset=window.steps[s.column.size - s.scores.size + first],
                z=float(abs(s.scores[first])),
                peak_z=float(np.nanmax(np.abs(s.scores))),
                value=value if not math.isnan(value) else None,
                baseline=s.baseline,
                rank=rank,
            )
        )
    found.sort(key=lambda m: (m.onset, -m.z, backward.get(m.name, 0), m.name))
    return found


def first_nonfinite(window: Window, step: int) -> Optional[dict[str, Any]]:
    """The first step of the window up to ``step`` with a non-finite gradient, and the
    first such parameter in backward order (see the module docs), or None."""
    broken = sorted(s for s in window.layers_nonfinite if s <= step)
    if not broken:
        return None
    at = broken[0]
    bad = window.layers_nonfinite[at]
    names = window.layer_names
    first = max(bad)  # backward order: the reverse of the cell's order
    return {
        "step": at,
        "parameter": names[first] if first < len(names) else f"#{first}",
        "parameters": len(bad),
        "of": len(names),
        "backward_order": [names[j] for j in sorted(bad, reverse=True)[:_TOP] if j < len(names)],
    }


def analyse(
    window: Window,
    step: int,
    *,
    lookback: int,
    z: float,
    rank: Optional[int] = None,
    batch: Optional[int] = None,
    direction: Direction = "up",
) -> dict[str, Any]:
    """The forensics of an alert at ``step``: first movers, the first non-finite
    gradient, the batch (rank, step, batch index, sample ids), and the heat of the
    layers around the alert (for the report's heatmap); ``layer_norms`` (``recorded``
    false, ``why``, ``cell``) when the window has no per-parameter norms because none
    were recorded (``Window.layers_missing``)."""
    scored, judged = _scored(window, step, lookback)
    ranked = _movers(window, scored, z, rank, direction)
    loss = next((m for m in ranked if m.name == "loss"), None)
    out: dict[str, Any] = {
        "step": step,
        "rank": rank,
        "recorded": [window.steps[0], window.steps[-1]] if window.steps else None,
        "lookback": lookback,
        "z": z,
        "layers": len(window.layer_names) if window.layers is not None else 0,
        "loss_onset": loss.onset if loss is not None else None,
        "movers": [m.to_json() for m in ranked],
    }
    if window.layers_missing is not None:  # "no layer departed" would not be true
        out["layer_norms"] = {"recorded": False, **window.layers_missing}
    first = next((m for m in ranked if m.kind == "layer"), None)
    if first is not None:
        lead = loss.onset if loss is not None else step
        out["first_mover"] = {**first.to_json(), "lead_steps": lead - first.onset}
    nonfinite = first_nonfinite(window, step)
    if nonfinite is not None:
        out["nonfinite"] = nonfinite
    samples = window.sample_ids.get(step)
    bad = window.nonfinite_samples.get(step)
    if samples is not None or bad is not None or batch is not None:
        out["batch"] = {
            "rank": rank,
            "step": step,
            "batch": batch,
            "sample_ids": samples,
            "nonfinite_samples": bad,
        }
    if window.layers is not None and judged is not None:
        out["heat"] = _heat(window, scored, ranked, judged)
    return out


_HEAT_LAYERS = 12


def _heat(
    window: Window, scored: list[_Scored], ranked: list[Mover], judged: range
) -> dict[str, Any]:
    """The per-layer scores of the judged steps up to the alert, for the layers that
    moved (first movers first) and then the largest others: the rows of the report's
    heatmap."""
    layers = {s.name: s.scores for s in scored if s.kind == "layer"}
    order = [m.name for m in ranked if m.kind == "layer"]
    peak = {n: float(np.nanmax(np.abs(z))) if z.size else 0.0 for n, z in layers.items()}
    rest = sorted((n for n in layers if n not in order), key=lambda n: -peak[n])
    chosen = ([n for n in order if n in layers] + rest)[:_HEAT_LAYERS]
    return {
        "steps": window.steps[judged.start : judged.stop],
        "layers": chosen,
        "z": [
            [None if not math.isfinite(v) else round(float(v), 2) for v in layers[n]]
            for n in chosen
        ],
    }
