"""One rank's forensics as a fixed-size vector, and the job's from every rank's.

Under a reduction across ranks the alert is raised on rank 0 (from the reduced values)
but the evidence lies in every rank's own flight recorder. When rank 0 asks (a word in
the next reduction's header: :mod:`mindwatch.aggregate.allreduce`), every rank analyses
its window at the alert's step and sends :data:`SLOT` floats in one all-gather: no cost
on the steps without an alert, and a size fixed per rank whatever the model.

The slot: a presence flag, the loss at the step, the first non-finite gradient (step,
parameter index, count), the loss's onset and its z there, the top :data:`MOVERS` layer
movers (parameter index, onset step, z at onset, peak z), and up to :data:`IDS` sample ids of the
step's batch and :data:`BAD_IDS` ids of its non-finite samples. Parameters travel as
indices into the recorder's layer names, which every rank of a data-parallel job shares
(the same model); sample ids travel only when they are numbers (a string id column is
named in each rank's own alerts only, see docs/forensics.md). The all-gather carries
float64 exactly (:class:`mindwatch.mindspore.MindSporeCollective` sends its words as
int32), so ids and steps up to 2^53 survive.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Optional

import numpy as np

from mindwatch.forensics.analysis import analyse
from mindwatch.forensics.recorder import FlightRecorder

__all__ = ["SLOT", "decode", "encode", "merge", "rank_slot"]

MOVERS = 8
IDS = 96
BAD_IDS = 16
# present, loss, nonfinite step, parameter, count, loss onset, loss z, n ids, n bad ids
_HEAD = 9
SLOT = _HEAD + 4 * MOVERS + IDS + BAD_IDS
_ID_FIELDS = (("sample_ids", IDS, 7), ("nonfinite_samples", BAD_IDS, 8))


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    return float(value)


def _zvalue(z: Any) -> float:
    if z == "inf":
        return math.inf
    return float(z) if z is not None else math.nan


def _zjson(z: float) -> Any:
    return "inf" if z == math.inf else float(f"{z:.6g}")


def encode(analysis: Optional[dict[str, Any]], layer_names: list[str]) -> np.ndarray[Any, Any]:
    """This rank's :func:`~mindwatch.forensics.analyse` result as a slot (zeros: none)."""
    out = np.zeros(SLOT)
    if analysis is None:
        return out
    out[0] = 1.0
    out[1] = analysis.get("loss", math.nan)
    index = {name: j for j, name in enumerate(layer_names)}
    out[2:5] = -1.0
    bad = analysis.get("nonfinite")
    if bad is not None:
        out[2:5] = (bad["step"], index.get(bad["parameter"], -1), bad["parameters"])
    onset = analysis.get("loss_onset")
    out[5] = -1.0 if onset is None else onset
    loss = next((m for m in analysis.get("movers", ()) if m["name"] == "loss"), None)
    out[6] = _zvalue(loss["z"]) if loss is not None else 0.0
    layers = [m for m in analysis.get("movers", ()) if m["kind"] == "layer"]
    layers = [m for m in layers if m["name"] in index][:MOVERS]
    pos = _HEAD
    for j in range(MOVERS):
        if j < len(layers):
            m = layers[j]
            peak = m["peak_z"] if m["peak_z"] is not None else math.inf
            out[pos : pos + 4] = (index[m["name"]], m["onset"], _zvalue(m["z"]), peak)
        else:
            out[pos : pos + 4] = (-1, -1, 0, 0)
        pos += 4
    batch = analysis.get("batch") or {}
    for key, room, at in _ID_FIELDS:
        numbers = [_number(v) for v in batch.get(key) or ()]
        kept = [v for v in numbers if v is not None][:room]
        out[at] = len(kept) if batch.get(key) is not None else -1
        out[pos : pos + len(kept)] = kept
        pos += room
    return out


def decode(
    slot: np.ndarray[Any, Any], rank: int, layer_names: list[str]
) -> Optional[dict[str, Any]]:
    """One rank's slot back as a (shorter) analysis: movers, non-finite, batch."""
    if slot.shape != (SLOT,) or slot[0] != 1.0:
        return None

    def name(j: float) -> str:
        k = int(j)
        return layer_names[k] if 0 <= k < len(layer_names) else f"#{k}"

    out: dict[str, Any] = {"rank": rank}
    if slot[2] >= 0:
        out["nonfinite"] = {
            "step": int(slot[2]),
            "parameter": name(slot[3]),
            "parameters": int(slot[4]),
            "of": len(layer_names),
        }
    out["loss_onset"] = None if slot[5] < 0 else int(slot[5])
    movers: list[dict[str, Any]] = []
    if out["loss_onset"] is not None:
        loss = float(slot[1])
        movers.append(
            {
                "name": "loss",
                "kind": "scalar",
                "onset": out["loss_onset"],
                "z": _zjson(float(slot[6])),
                "peak_z": None,
                "value": loss if math.isfinite(loss) else None,
                "baseline": None,
                "rank": rank,
            }
        )
    pos = _HEAD
    for _ in range(MOVERS):
        j, onset, z, peak = (float(v) for v in slot[pos : pos + 4])
        pos += 4
        if j < 0:
            continue
        movers.append(
            {
                "name": name(j),
                "kind": "layer",
                "onset": int(onset),
                "z": _zjson(z),
                "peak_z": _zjson(peak) if math.isfinite(peak) else None,
                "value": None,
                "baseline": None,
                "rank": rank,
            }
        )
    out["movers"] = movers
    batch: dict[str, Any] = {"rank": rank}
    for key, room, at in _ID_FIELDS:
        n = int(slot[at])
        values = slot[pos : pos + max(n, 0)].tolist()
        batch[key] = None if n < 0 else [int(v) if float(v).is_integer() else v for v in values]
        pos += room
    out["batch"] = batch
    return out


def _z(mover: dict[str, Any]) -> float:
    z = mover.get("z")
    return math.inf if z == "inf" else float(z or 0.0)


def order(mover: dict[str, Any]) -> tuple[Any, ...]:
    """First movers first: by onset, then size; a layer before a scalar at a tie, then
    by name, then by rank (a layer every rank saw, rank None, before any one rank's; then
    the lowest rank), so a tie between ranks never depends on the order they arrived in."""
    rank = mover.get("rank")
    return (
        mover["onset"],
        -_z(mover),
        mover["kind"] != "layer",
        mover["name"],
        -1 if rank is None else rank,
    )


def _same(movers: list[dict[str, Any]]) -> bool:
    """Whether these are one series seen alike by every rank (the norms of the
    all-reduced gradient, which every rank applies)."""
    first = movers[0]
    return all(
        m["onset"] == first["onset"] and math.isclose(_z(m), _z(first), rel_tol=1e-3)
        for m in movers[1:]
    )


def merge(step: int, analyses: list[dict[str, Any]]) -> dict[str, Any]:
    """The job's forensics at ``step`` from every rank's (decoded) analysis.

    Movers of all ranks are ranked together (:func:`order`). A layer *every* rank of
    ``analyses`` saw depart alike (the same onset, z within 0.1 %) is one mover with
    ``rank`` None: the train cell's norms are of the all-reduced gradient, the same on
    every rank, so only the ranks' own losses tell them apart. A layer only some ranks
    saw, or saw differently, stays one mover per rank, each with its rank (on 3 ranks,
    two that agree keep their names). ``loss_onset`` is the earliest rank's; ``blame``
    the rank whose loss departed first and most (None: no rank's did); ``nonfinite``
    the earliest rank's. Ties between ranks go to the lowest rank, whatever the order
    of ``analyses``."""
    ranks = sorted(a["rank"] for a in analyses)
    by_name: dict[str, list[dict[str, Any]]] = {}
    movers: list[dict[str, Any]] = []
    for a in analyses:
        for m in a.get("movers", ()):
            if m["kind"] == "layer":
                by_name.setdefault(m["name"], []).append(dict(m))
            elif m["name"] == "loss":
                movers.append(dict(m))
    for seen in by_name.values():
        if len(seen) == len(ranks) > 1 and _same(seen):
            movers.append({**seen[0], "rank": None})
        else:
            movers.extend(seen)
    movers.sort(key=order)
    out: dict[str, Any] = {"step": step, "ranks": ranks, "movers": movers}
    losses = [m for m in movers if m["name"] == "loss"]
    out["loss_onset"] = losses[0]["onset"] if losses else None
    out["blame"] = losses[0]["rank"] if losses else None
    layers = [m for m in movers if m["kind"] == "layer"]
    if layers:
        lead = out["loss_onset"] if out["loss_onset"] is not None else step
        out["first_mover"] = {**layers[0], "lead_steps": lead - layers[0]["onset"]}
    broken = [a for a in analyses if "nonfinite" in a]
    if broken:
        first = min(broken, key=lambda a: (a["nonfinite"]["step"], a["rank"]))
        out["nonfinite"] = {**first["nonfinite"], "rank": first["rank"]}
    return out


def rank_slot(
    recorder: FlightRecorder, step: int, *, lookback: int, z: float, rank: int
) -> np.ndarray[Any, Any]:
    """This rank's analysis of ``step`` from its recorder, as its slot (the collective
    thread calls it on every rank when rank 0 asks)."""
    window = recorder.window(step)
    analysis = analyse(window, step, lookback=lookback, z=z, rank=rank)
    row, loss = window.index(step), window.scalars.get("loss")
    analysis["loss"] = float(loss[row]) if row is not None and loss is not None else math.nan
    return encode(analysis, recorder.layer_names)
