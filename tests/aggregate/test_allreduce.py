"""The all-reduce rounds give what a direct numpy computation over per-rank inputs gives."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from mindwatch.aggregate.allreduce import TOKENS, finish, reduce_all, tag_id
from mindwatch.aggregate.reductions import ReductionTable
from mindwatch.testing import LocalGroup

LOSS = [[1.0, 2.0], [3.0, math.nan], [5.0, 6.0]]  # rank x step
TIME = [[10.0, 20.0], [30.0, math.inf], [50.0, 5.0]]


def run(world: int, table: ReductionTable) -> list[Any]:
    group = LocalGroup(world)
    out: dict[int, Any] = {}

    def rank_main(rank: int) -> None:
        rows = []
        for i, step in enumerate((4, 5)):
            row = {"train/loss": LOSS[rank][i], TOKENS: float(rank + 1)}
            if rank != 1 or step == 4:  # rank 1 lacks the time at step 5
                row["perf/step_time_ms"] = TIME[rank][i]
            rows.append((step, row))
        tags = ["train/loss", "perf/step_time_ms", TOKENS]
        reduced, _ = reduce_all(
            group.member(rank).all_reduce, rank=rank, world=world, round_no=3,
            capacity=10, proposal=rank, stop=rank == 2, bench=rank == 1, rows=rows, tags=tags,
            table=table,
        )  # fmt: skip
        if rank == 0:
            rows0 = [(s, 0.0, list(r.items()), None, None, None) for s, r in rows]
            out[0] = (finish(reduced, rows0, tags, table), reduced.layout)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return list(out[0])


def test_every_kind_matches_numpy_with_nan_inf_missing_and_weights() -> None:
    emitted, layout = run(3, ReductionTable())
    assert layout.proposal == 2
    assert layout.stop  # rank 2 asked
    assert layout.bench  # rank 1 asked
    first = dict(emitted[0][1])
    w = np.array([1.0, 2.0, 3.0])
    loss = np.array([1.0, 3.0, 5.0])
    assert math.isclose(first["train/loss"], float((loss * w).sum() / w.sum()), rel_tol=1e-6)
    assert math.isclose(first["ranks/loss_std"], float(loss.std()), rel_tol=1e-6)
    assert first["perf/step_time_ms"] == 50.0
    assert first["ranks/step_time_ms_argmax"] == 2.0
    second = dict(emitted[1][1])
    assert math.isnan(second["train/loss"])
    assert second["ranks/loss_argmax"] == 1.0
    assert second["perf/step_time_ms"] == 20.0  # rank 1 did not log it at step 5
    assert second["ranks/step_time_ms_min"] == 5.0
    assert second["ranks/step_time_ms_argmax"] == 0.0


def test_a_ranks_restriction_counts_only_those_ranks() -> None:
    emitted, _ = run(3, ReductionTable(loss_ranks=(-1,)))
    first = dict(emitted[0][1])
    assert first["train/loss"] == 5.0
    assert first["ranks/loss_std"] == 0.0


def test_tag_ids_are_stable_exact_52_bit_integers() -> None:
    ident = tag_id("train/loss")
    assert ident == float(int(ident))
    assert 0 <= ident < 2**52
    assert ident == 4032855540105964.0  # the same in every process, every run
