"""The cross-rank reduction in four all-reduces whose size does not grow with the world.

Every rank sends and receives vectors sized by rank 0's interval (its steps times its
communicated tags), never by the number of ranks, and rank 0's finishing work is the
same few numpy passes over those vectors whatever the world size (the all-gather of
every rank's slice it replaced cost rank 0 966 ms and every rank 73 MB per interval at
4,096 ranks).

Rounds (``C`` = rank 0's steps x tags, the *cells*):

1. *max*, :func:`layout_vector`: a check header (magic and round as ``x`` and ``-x``:
   one max shows whether every rank sent the same), the room rank 0 needs, the interval
   proposal, the stop and benchmark requests, the step whose forensics rank 0 asks every
   rank for (two 24-bit parts, -1 when none: :mod:`mindwatch.forensics.exchange`), then
   rank 0's layout (steps in two 24-bit
   parts, tag ids in three 18-bit parts, its finite values as the shift of each cell)
   that the others send as -1 (-inf for the shifts), so every rank learns where to put
   its values;
2. *sum*, :func:`sum_vector`: per cell the count of contributing ranks, of NaN, +inf and
   -inf, the sum and the sum of squares of the finite values about the shift, and for
   weighted means the count of positive weights, the weighted shifted sum and the weight;
3. *max*, :func:`max_vector`: per cell the maximum, minus the minimum (NaN left out: they
   are counted in round 2) and the outlier key
   (:func:`~mindwatch.aggregate.reductions.outlier_key`: +inf for a non-finite value,
   else the value rounded to float32, so every rank can compare its own with the
   maximum);
4. *max*, :func:`argmax_vector`: per cell minus the rank, for the ranks whose key is the
   maximum: minus the lowest such rank.

Why integers are split and values shifted: MindSpore's CPU collectives move float64
through float32 (``docs/dev/multicard-notes.md``). Every integer here stays below 2^24,
so it arrives exact, and the variance is the mean square about a value close to the
others (rank 0's) rather than a difference of two large float32 sums. The values
themselves arrive with float32 precision, which is what TensorBoard stores anyway.

Each round begins with its own check (magic and round: as ``x, -x`` in a max, as
``x, 1`` in a sum, which must come back as ``world * x, world``); a round whose check
fails raises :class:`~mindwatch.aggregate.collective.CorruptSliceError` on every rank alike
(all see the same reduced vector), and the aggregator falls back to local values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import numpy.typing as npt

from mindwatch.aggregate.collective import CorruptSliceError
from mindwatch.aggregate.reductions import ReductionTable, outlier_key, spread_tags

__all__ = [
    "SAMPLES",
    "TOKENS",
    "Layout",
    "Reduced",
    "finish",
    "reduce_all",
    "tag_id",
]

Floats = npt.NDArray[np.float64]
Values = list[tuple[str, float]]
AllReduce = Callable[[Floats, str], Floats]
TOKENS, SAMPLES = "_w/tokens", "_w/samples"

_CHECK = 2  # check words at the head of every round
# + round as (r, -r); needed, proposal, stop, bench, forensics (hi, lo), n_steps, n_tags
_HEAD = _CHECK + 2 + 8
_LOW = float(2**24)
_PART = 2**18
_SUMS = 9  # count, nan, +inf, -inf, sum, squares, weighted count, weighted sum, weight
MAGIC = 19799.125  # "MW", version 1 (an exact float, in float32 too)

_ids: dict[str, float] = {}


def tag_id(tag: str) -> float:
    """A stable 52-bit id for ``tag`` (the same in every process), as an exact float.

    Tags travel as ids, not names: rank 0, which writes the global run, knows the names
    from its own steps, so a metric that only other ranks log is written in their own
    folders (``per_rank``) but not globally."""
    found = _ids.get(tag)
    if found is None:
        digest = hashlib.blake2b(tag.encode("utf-8"), digest_size=8).digest()
        found = _ids[tag] = float(int.from_bytes(digest, "little") >> 12)
    return found


@dataclass
class Layout:
    """Rank 0's steps and tag ids, and the shift of every cell (all ranks know it)."""

    steps: list[int]
    ids: Floats
    shift: Floats  # (steps, tags)
    proposal: int
    stop: bool
    bench: bool  # some rank asked for the compute micro-benchmark at this reduction
    needed: int
    forensics: Optional[int] = None  # the step rank 0 asked every rank's forensics of


@dataclass
class Reduced:
    """The reduced vectors of one interval, as every rank received them."""

    layout: Layout
    sums: Floats  # (_SUMS, steps, tags)
    high: Floats
    low: Floats
    key: Floats
    argmax: Floats


def layout_size(n_steps: int, n_tags: int) -> int:
    """Floats of round 1 for rank 0's ``n_steps`` x ``n_tags`` interval."""
    return _HEAD + 2 * n_steps + 3 * n_tags + n_steps * n_tags


def _check(got: Floats, expected: int, what: str, words: Sequence[float], world: int) -> None:
    if got.shape != (expected,):
        raise CorruptSliceError(
            f"all_reduce ({what}) returned shape {got.shape}, expected ({expected},)"
        )
    if not np.array_equal(got[: len(words)], np.asarray(words, dtype=np.float64)):
        raise CorruptSliceError(
            f"the {what} all-reduce is not mindwatch's (header {got[: len(words)].tolist()}, "
            f"expected {list(words)} from {world} ranks): another collective ran at the "
            "same time, or the ranks no longer reduce at the same steps"
        )


def _split_ids(ids: Floats) -> Floats:
    whole = ids.astype(np.int64)
    parts = np.stack([whole // _PART**2, (whole // _PART) % _PART, whole % _PART], axis=1)
    out: Floats = parts.astype(np.float64).ravel()
    return out


def layout_vector(
    rank: int,
    *,
    round_no: int,
    capacity: int,
    proposal: int,
    stop: bool,
    bench: bool = False,
    forensics: Optional[int] = None,
    steps: Sequence[int],
    ids: Floats,
    values: Floats,
) -> Floats:
    """Round 1 (max) of ``capacity`` floats: rank 0 fills the layout, others send -1."""
    n_steps, n_tags = (len(steps), len(ids)) if rank == 0 else (0, 0)
    need = layout_size(n_steps, n_tags) if rank == 0 else 0
    # -inf below every layout word (integers >= 0, finite shifts): max keeps rank 0's.
    out = np.full(capacity, -np.inf)
    asked = (-1, -1) if forensics is None else divmod(int(forensics), int(_LOW))
    out[:_HEAD] = (MAGIC, -MAGIC, round_no, -round_no, need, proposal, stop, bench, *asked, -1, -1)
    if rank != 0 or need > capacity:
        return out
    out[_HEAD - 2 : _HEAD] = (n_steps, n_tags)
    pos = _HEAD
    s = np.asarray(steps, dtype=np.int64)
    out[pos : pos + 2 * n_steps] = np.stack([s // int(_LOW), s % int(_LOW)], axis=1).ravel()
    pos += 2 * n_steps
    out[pos : pos + 3 * n_tags] = _split_ids(ids)
    pos += 3 * n_tags
    finite = np.where(np.isfinite(values), values, -np.inf)
    out[pos : pos + n_steps * n_tags] = finite.ravel()
    out[pos + n_steps * n_tags :] = -np.inf
    return out


def read_layout(got: Floats, capacity: int, round_no: int, world: int) -> Layout:
    """Round 1's result, checked; the layout only when rank 0's fitted."""
    _check(got, capacity, "layout", (MAGIC, -MAGIC, round_no, -round_no), world)
    need, proposal, stop, bench, f_hi, f_lo, n_steps, n_tags = (
        int(x) for x in got[_CHECK + 2 : _HEAD]
    )
    asked = f_hi * int(_LOW) + f_lo if f_hi >= 0 and f_lo >= 0 else None
    empty = Layout(
        [], np.zeros(0), np.zeros((0, 0)), proposal, bool(stop), bool(bench), need, asked
    )
    if need > capacity or n_steps < 0 or n_tags < 0:
        return empty
    if layout_size(n_steps, n_tags) != need:
        raise CorruptSliceError(f"rank 0's layout ({n_steps} steps, {n_tags} tags) is not {need}")
    pos = _HEAD
    pairs = got[pos : pos + 2 * n_steps].reshape(n_steps, 2).astype(np.int64)
    steps = (pairs[:, 0] * int(_LOW) + pairs[:, 1]).tolist()
    pos += 2 * n_steps
    parts = got[pos : pos + 3 * n_tags].reshape(n_tags, 3).astype(np.int64)
    ids = (parts[:, 0] * _PART**2 + parts[:, 1] * _PART + parts[:, 2]).astype(np.float64)
    pos += 3 * n_tags
    shift = got[pos : pos + n_steps * n_tags].reshape(n_steps, n_tags)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    return Layout(steps, ids, shift, proposal, bool(stop), bool(bench), need, asked)


def local_cells(
    layout: Layout,
    *,
    rows: Sequence[Any],
    tags: Sequence[str],
    table: ReductionTable,
    rank: int,
    world: int,
) -> tuple[Floats, npt.NDArray[np.bool_], Optional[Floats]]:
    """This rank's values at rank 0's cells: ``(values, use, weights)``.

    ``rows`` are ``(step, {tag: value})``; ``use`` is False where this rank lacks the
    value or is outside the tag's ``ranks``; ``weights`` are this rank's tokens (else
    samples) per step when rank 0 sends them (None otherwise)."""
    n_steps, n_tags = len(layout.steps), len(layout.ids)
    values = np.zeros((n_steps, n_tags))
    use = np.zeros((n_steps, n_tags), dtype=bool)
    column = {tag_id(t): t for t in tags}
    where = {s: i for i, s in enumerate(layout.steps)}
    cols: list[tuple[int, str]] = []
    for j, ident in enumerate(layout.ids.tolist()):
        tag = column.get(ident)
        if tag is None:
            continue
        ranks = table[tag].ranks if tag not in (TOKENS, SAMPLES) else None
        if ranks is not None and not any(r % world == rank for r in ranks if -world <= r < world):
            continue
        cols.append((j, tag))
    for step, row in rows:
        i = where.get(step)
        if i is None:
            continue
        for j, tag in cols:
            value = row.get(tag)
            if value is not None:
                values[i, j] = value
                use[i, j] = True
    weights = None
    ids = layout.ids.tolist()
    for name in (TOKENS, SAMPLES):
        if tag_id(name) in ids:
            j = ids.index(tag_id(name))
            weights = np.where(use[:, j], values[:, j], 0.0)
            break
    return values, use, weights


def sum_vector(
    round_no: int,
    layout: Layout,
    values: Floats,
    use: npt.NDArray[np.bool_],
    weights: Optional[Floats],
) -> Floats:
    """Round 2 (sum): the counts and shifted sums of every cell."""
    with np.errstate(invalid="ignore", over="ignore"):
        finite = use & np.isfinite(values)
        dev = np.where(finite, values - layout.shift, 0.0)
        w = np.zeros_like(values) if weights is None else weights[:, None] + 0.0 * values
        wuse = use & (w > 0)
        wfin = wuse & finite
        sums = np.stack(
            [
                use,
                use & np.isnan(values),
                use & (values == np.inf),
                use & (values == -np.inf),
                dev,
                dev * dev,
                wuse,
                np.where(wfin, dev * w, 0.0),
                np.where(wuse, w, 0.0),
            ]
        ).astype(np.float64)
    return np.concatenate([[MAGIC, 1.0, round_no], sums.ravel()])


def max_vector(round_no: int, values: Floats, use: npt.NDArray[np.bool_]) -> Floats:
    """Round 3 (max): maximum, minus minimum (NaN left out) and the outlier key."""
    ok = use & ~np.isnan(values)
    with np.errstate(invalid="ignore"):
        parts = np.stack(
            [
                np.where(ok, values, -np.inf),
                np.where(ok, -values, -np.inf),
                outlier_key(values, use),
            ]
        )
    return np.concatenate([[MAGIC, -MAGIC, round_no, -round_no], parts.ravel()])


def argmax_vector(
    round_no: int, rank: int, values: Floats, use: npt.NDArray[np.bool_], key: Floats
) -> Floats:
    """Round 4 (max): minus this rank where its key is the largest."""
    mine = use & (outlier_key(values, use) == key)
    cells = np.where(mine, -float(rank), -np.inf)
    return np.concatenate([[MAGIC, -MAGIC, round_no, -round_no], cells.ravel()])


def reduce_all(
    all_reduce: AllReduce,
    *,
    rank: int,
    world: int,
    round_no: int,
    capacity: int,
    proposal: int,
    stop: bool,
    bench: bool = False,
    forensics: Optional[int] = None,
    rows: Sequence[Any],
    tags: Sequence[str],
    table: ReductionTable,
) -> tuple[Reduced, int]:
    """The four rounds (round 1 twice if rank 0's layout needs more room).

    ``rows`` are ``(step, {tag: value})``. Returns the reduced vectors and the capacity
    for the next interval."""
    ids = np.array([tag_id(t) for t in tags], dtype=np.float64)
    steps = [r[0] for r in rows]
    mine = np.array([[row.get(t, np.nan) for t in tags] for _, row in rows]).reshape(
        len(rows), len(tags)
    )

    def round_one(room: int) -> Layout:
        vector = layout_vector(
            rank,
            round_no=round_no,
            capacity=room,
            proposal=proposal,
            stop=stop,
            bench=bench,
            forensics=forensics,
            steps=steps,
            ids=ids,
            values=mine,
        )
        got = np.asarray(all_reduce(vector, "max"), dtype=np.float64)
        return read_layout(got, room, round_no, world)

    capacity = max(capacity, _HEAD)  # the same on every rank
    layout = round_one(capacity)
    if layout.needed > capacity:  # rank 0 had more to say: everyone resends with room
        capacity = layout.needed + layout.needed // 2
        layout = round_one(capacity)
        if layout.needed > capacity:
            raise CorruptSliceError(f"rank 0's layout grew to {layout.needed} on the retry")
    n_steps, n_tags = len(layout.steps), len(layout.ids)
    cells = n_steps * n_tags
    empty = np.zeros((n_steps, n_tags))
    if cells == 0:
        return Reduced(
            layout, np.zeros((_SUMS, n_steps, n_tags)), empty, empty, empty, empty
        ), capacity
    values, use, weights = local_cells(
        layout, rows=rows, tags=tags, table=table, rank=rank, world=world
    )
    got = np.asarray(all_reduce(sum_vector(round_no, layout, values, use, weights), "sum"))
    _check(got, 3 + _SUMS * cells, "sum", (world * MAGIC, world, world * round_no), world)
    sums = got[3:].reshape(_SUMS, n_steps, n_tags)
    head = (MAGIC, -MAGIC, round_no, -round_no)
    got = np.asarray(all_reduce(max_vector(round_no, values, use), "max"))
    _check(got, 4 + 3 * cells, "max", head, world)
    high, neg_low, key = got[4:].reshape(3, n_steps, n_tags)
    got = np.asarray(all_reduce(argmax_vector(round_no, rank, values, use, key), "max"))
    _check(got, 4 + cells, "argmax", head, world)
    argmax = -got[4:].reshape(n_steps, n_tags)
    return Reduced(layout, sums, high, -neg_low, key, argmax), capacity


def _nonfinite(base: Floats, nan: Floats, pinf: Floats, ninf: Floats) -> Floats:
    """NaN and infinities propagate as numpy's sum does."""
    out = np.where(pinf > 0, np.inf, base)
    out = np.where(ninf > 0, -np.inf, out)
    return np.where((nan > 0) | ((pinf > 0) & (ninf > 0)), np.nan, out)


def finish(
    reduced: Reduced, rows: Sequence[Any], tags: Sequence[str], table: ReductionTable
) -> list[tuple[int, Values, float, Optional[float]]]:
    """Rank 0: ``(step, values, wall, samples)`` of its Row ``rows`` (``once`` values,
    then every communicated tag reduced, with its spread), from the reduced vectors."""
    if not rows:
        return []
    layout = reduced.layout
    count, nan, pinf, ninf, dsum, dsq, wcount, wdsum, wtot = reduced.sums
    shift = layout.shift
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        n = np.maximum(count, 1)
        total = _nonfinite(shift * count + dsum, nan, pinf, ninf)
        mean = _nonfinite(shift + dsum / n, nan, pinf, ninf)
        var = np.maximum(dsq / n - (dsum / n) ** 2, 0.0)
        std = np.where(nan + pinf + ninf > 0, np.nan, np.sqrt(var))
        low = np.where(nan > 0, np.nan, reduced.low)
        high = np.where(nan > 0, np.nan, reduced.high)
        weighted = (wcount == count) & (count > 0)
        wmean = _nonfinite(shift + wdsum / np.maximum(wtot, 1e-300), nan, pinf, ninf)
    counted = count > 0
    by_id = {tag_id(t): t for t in tags}
    index = {s: i for i, s in enumerate(layout.steps)}
    out: list[Values] = [[] for _ in layout.steps]
    for j, ident in enumerate(layout.ids.tolist()):
        tag = by_id.get(ident)
        if tag is None or tag in (TOKENS, SAMPLES):
            continue
        kind = table[tag].kind
        if kind == "mean":
            result = np.where(weighted[:, j], wmean[:, j], mean[:, j])
        elif kind == "sum":
            result = total[:, j]
        elif kind == "max":
            result = high[:, j]
        elif kind == "min":
            result = low[:, j]
        else:
            result = None
        keep = counted[:, j]
        steps_counted = np.flatnonzero(keep).tolist()
        columns: list[list[float]] = []
        names: list[str] = []
        if result is not None:
            columns.append(result[keep].tolist())
            names.append(tag)
        spread = (low[:, j], high[:, j], mean[:, j], std[:, j], reduced.argmax[:, j])
        columns.extend(c[keep].tolist() for c in spread)
        names.extend(spread_tags(tag))
        for i, row_values in zip(steps_counted, zip(*columns)):
            out[i].extend(zip(names, row_values))
    communicated = set(tags)
    emitted = []
    for step, wall, values, samples, _, _ in rows:
        once = [(t, v) for t, v in values if t not in communicated]
        i = index.get(step)
        reduced_values = out[i] if i is not None else []
        if once or reduced_values:
            emitted.append((step, once + reduced_values, wall, samples))
    return emitted
