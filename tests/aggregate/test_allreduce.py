"""The all-reduce rounds give what a direct numpy computation over per-rank inputs gives."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import uuid
import warnings
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
import pytest

from mindwatch.aggregate.allreduce import TOKENS, finish, reduce_all, tag_id
from mindwatch.aggregate.collective import CorruptSliceError
from mindwatch.aggregate.reductions import Reduction, ReductionTable, reduce_values
from mindwatch.testing import LocalGroup

LOSS = [[1.0, 2.0], [3.0, math.nan], [5.0, 6.0]]  # rank x step
Floats = npt.NDArray[np.float64]
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


WORLDS = range(3, 9)


def reduce_on_ranks(
    columns: dict[str, list[list[float]]],
    table: ReductionTable,
    *,
    collective: Callable[[Any], Any] = lambda member: member,
    steps: Optional[list[int]] = None,
) -> tuple[Any, list[tuple[Any, ...]], list[str]]:
    """The four all-reduces over ``LocalGroup`` ranks; ``columns``: tag -> rank x step.

    Returns rank 0's ``Reduced``, its rows and tags, for :func:`finish` (called by the
    test, on its own thread)."""
    first = next(iter(columns.values()))
    world, n_steps = len(first), len(first[0])
    steps = steps if steps is not None else list(range(1, n_steps + 1))
    tags = list(columns)
    group = LocalGroup(world, timeout=30)
    out: dict[int, Any] = {}
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            rows = [
                (step, {tag: columns[tag][rank][i] for tag in tags}) for i, step in enumerate(steps)
            ]
            out[rank], _ = reduce_all(
                collective(group.member(rank)).all_reduce, rank=rank, world=world,
                round_no=1, capacity=8, proposal=0, stop=False, rows=rows, tags=tags,
                table=table,
            )  # fmt: skip
            if rank == 0:
                out["rows"] = [(s, 0.0, list(r.items()), None, None, None) for s, r in rows]
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a simulated rank hung"
    if errors:
        raise errors[0]
    return out[0], out["rows"], tags


@pytest.mark.parametrize("world", WORLDS)
def test_a_loss_rank_counted_from_either_end_takes_that_ranks_loss_on_both_paths(
    world: int,
) -> None:
    """``loss_ranks=(r,)`` for every r in -world..world-1 (-world is rank 0, -1 the last):
    the global loss is rank r's, by the all-reduces and by ``reduce_values``."""
    losses = [[10.0 + rank, 20.0 + rank] for rank in range(world)]
    for r in range(-world, world):
        table = ReductionTable(loss_ranks=(r,))
        reduced, rows, tags = reduce_on_ranks({"train/loss": losses}, table)
        got = [dict(values)["train/loss"] for _, values, _, _ in finish(reduced, rows, tags, table)]
        assert got == [10.0 + r % world, 20.0 + r % world]
        result, _, _ = reduce_values(
            np.array(losses), np.ones((world, 2), dtype=bool), table["train/loss"]
        )
        assert result.tolist() == got


@pytest.mark.parametrize("world", [3, 8])
def test_values_beyond_float64s_range_overflow_to_inf_without_a_warning(world: int) -> None:
    """A sum over ranks of values near float64's largest is inf, as numpy's sum of
    them is, on both paths, and no RuntimeWarning reaches the user's console."""
    huge = [[1e308, -1e308, 5.0]] * world
    table = ReductionTable({"perf/samples_per_s": "sum", "train/loss": "mean"})
    reduced, rows, tags = reduce_on_ranks({"perf/samples_per_s": huge, "train/loss": huge}, table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        emitted = [dict(v) for _, v, _, _ in finish(reduced, rows, tags, table)]
        numpy_sum, _, _ = reduce_values(
            np.array(huge), np.ones((world, 3), dtype=bool), Reduction("sum"), None
        )
        weighted, _, _ = reduce_values(
            np.array(huge), np.ones((world, 3), dtype=bool), Reduction("mean"),
            np.full((world, 3), 1e300),
        )  # fmt: skip
    assert [v["perf/samples_per_s"] for v in emitted] == [math.inf, -math.inf, 5.0 * world]
    assert [v["train/loss"] for v in emitted] == [1e308, -1e308, 5.0]
    assert numpy_sum.tolist() == [math.inf, -math.inf, 5.0 * world]
    assert weighted[2] == pytest.approx(5.0)


class Float32Collective:
    """A ``LocalGroup`` member that moves and reduces float32, as MindSpore's CPU
    all-reduce does (``docs/dev/multicard-notes.md``)."""

    def __init__(self, member: Any) -> None:
        self._member = member
        self.rank, self.world_size = member.rank, member.world_size

    def all_reduce(self, vector: Floats, op: str) -> Floats:
        stacked = self._member.all_gather(np.asarray(vector, dtype=np.float32).astype(np.float64))
        as32 = stacked.astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            got = as32.sum(axis=0, dtype=np.float32) if op == "sum" else as32.max(axis=0)
        return got.astype(np.float64)


@pytest.mark.parametrize("world", [3, 5, 8])
def test_the_spread_of_close_large_values_survives_float32_collectives(world: int) -> None:
    """Values near 1e6 that differ by quarters: float32 sums of them and of their
    squares would lose the spread entirely; shifted by rank 0's value (read from the
    layout by every rank) the mean and the std come through exact."""
    values = [[1e6 + 0.25 * rank, 3e6 - 0.5 * rank] for rank in range(world)]
    table = ReductionTable()
    reduced, rows, tags = reduce_on_ranks(
        {"train/loss": values}, table, collective=Float32Collective
    )
    emitted = [dict(v) for _, v, _, _ in finish(reduced, rows, tags, table)]
    data = np.array(values)
    for i, got in enumerate(emitted):
        assert got["train/loss"] == pytest.approx(data[:, i].mean(), abs=1e-9)
        assert got["ranks/loss_std"] == pytest.approx(data[:, i].std(), rel=1e-6)


class Impostor:
    """A member whose ``nth`` all-reduce pairs with another collective: its answer is
    the right length but not mindwatch's."""

    def __init__(self, member: Any, nth: int) -> None:
        self._member, self._nth, self._calls = member, nth, 0
        self.rank, self.world_size = member.rank, member.world_size

    def all_reduce(self, vector: Floats, op: str) -> Floats:
        self._calls += 1
        got = self._member.all_reduce(vector, op)
        return np.full_like(got, 3.0) if self._calls == self._nth else got


# The rounds in order: the layout, again with room (the start capacity is too small for
# rank 0's layout), the sums, the maxima, the argmax.
ROUNDS = [(1, "layout"), (2, "layout"), (3, "sum"), (4, "max"), (5, "argmax")]


@pytest.mark.parametrize(("nth", "what"), ROUNDS)
def test_a_round_that_paired_with_another_collective_is_named(nth: int, what: str) -> None:
    with pytest.raises(CorruptSliceError, match=rf"^the {what} all-reduce is not mindwatch's"):
        reduce_on_ranks(
            {"train/loss": [[1.0], [2.0], [3.0]]},
            ReductionTable(),
            collective=lambda member: Impostor(member, nth),
        )


def test_tag_ids_are_the_same_in_another_process() -> None:
    """Fresh tags (never seen by this process, so not cached), ASCII and not: another
    Python process gives each the same id."""
    tags = [f"train/fresh_{uuid.uuid4().hex}", f"eval/损失_{uuid.uuid4().hex}/é"]
    ids = [tag_id(tag) for tag in tags]
    assert all(ident == float(int(ident)) and 0 <= ident < 2**52 for ident in ids)
    assert len(set(ids)) == 2
    code = (
        "import json, sys; from mindwatch.aggregate.allreduce import tag_id; "
        "print(json.dumps([tag_id(t) for t in json.loads(sys.argv[1])]))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, json.dumps(tags)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert json.loads(other.stdout) == ids
