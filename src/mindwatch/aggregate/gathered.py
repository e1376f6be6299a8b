"""What rank 0 writes from one all-gather: every communicated metric reduced as it
declares (:mod:`mindwatch.aggregate.reductions`), plus its spread across the ranks.

The gathered matrix holds one packed slice per rank (:mod:`mindwatch.aggregate.packing`);
:func:`reduce_gathered` lays them out as a (rank, step, tag) cube and reduces it a whole
tag column at a time. Values that are the same on every rank (``once``) never travel:
rank 0's own are kept as they are.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from mindwatch.aggregate.packing import MISSING, is_missing, tag_id, unpack
from mindwatch.aggregate.reductions import ReductionTable, reduce_values, spread_tags

__all__ = ["SAMPLES", "TOKENS", "reduce_gathered"]

Values = list[tuple[str, float]]
# Per-rank weights of 'mean' metrics, packed with each step's values.
TOKENS, SAMPLES = "_w/tokens", "_w/samples"


def reduce_gathered(
    gathered: npt.NDArray[np.float64], rows: list[Any], tags: list[str], table: ReductionTable
) -> list[tuple[int, Values, float, Optional[float]]]:
    """``(step, values, wall, samples)`` for each of rank 0's ``rows`` that has any:
    its ``once`` values, then every tag of ``tags`` reduced across the ranks' slices of
    ``gathered`` (one row per rank), with the spread tags."""
    if not rows:
        return []
    world = gathered.shape[0]
    step_index = {row[0]: i for i, row in enumerate(rows)}
    columns = {tag_id(t): j for j, t in enumerate(tags)}
    cube = np.full((world, len(rows), len(tags)), MISSING)
    for rank in range(world):
        part = unpack(gathered, rank)
        if not part.complete or part.values.size == 0:
            continue
        cols = np.array([columns.get(i, -1) for i in part.ids], dtype=np.int64)
        idx = np.array([step_index.get(int(s), -1) for s in part.steps], dtype=np.int64)
        keep_c, keep_r = cols >= 0, idx >= 0
        if keep_c.any() and keep_r.any():
            block = part.values[np.ix_(keep_r, keep_c)]
            cube[rank][np.ix_(idx[keep_r], cols[keep_c])] = block
    present = ~is_missing(cube)
    weights = None
    for name in (TOKENS, SAMPLES):
        if name in tags:
            j = tags.index(name)
            weights = np.where(present[:, :, j], cube[:, :, j], 0.0)
            break
    # Per tag, whole columns at once; per step, only list concatenation (this runs on
    # the collective thread, and every Python instruction here competes with the
    # training thread for the GIL).
    out: list[Values] = [[] for _ in rows]
    for j, tag in enumerate(tags):
        if tag in (TOKENS, SAMPLES):
            continue
        reduction = table[tag]
        result, spread, counted = reduce_values(cube[:, :, j], present[:, :, j], reduction, weights)
        steps_counted = np.flatnonzero(counted).tolist()
        columns_out: list[list[float]] = []
        names: list[str] = []
        if reduction.kind != "per_rank":
            columns_out.append(result[counted].tolist())
            names.append(tag)
        if spread is not None:
            columns_out.extend(spread[:, counted].tolist())
            names.extend(spread_tags(tag))
        for i, row_values in zip(steps_counted, zip(*columns_out)):
            out[i].extend(zip(names, row_values))
    communicated = set(tags)
    emitted = []
    for k, (step, wall, values, samples, _, _) in enumerate(rows):
        once = [(t, v) for t, v in values if t not in communicated]
        if once or out[k]:
            emitted.append((step, once + out[k], wall, samples))
    return emitted
