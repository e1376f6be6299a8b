"""Both reduction paths name the same rank: ``reduce_values`` (numpy, what ``mindwatch
convert`` uses over per-rank logs) and the four all-reduces (what a job uses, here over
``mindwatch.testing.LocalGroup``), on 1 to 8 ranks, with ties, NaN and infinities on
some ranks, values closer than float32 precision, and ranks that lack the value.

The tie rule (docs/multicard.md, ``mindwatch.aggregate.reductions``): the argmax is the
lowest rank holding the largest value, a non-finite value counting as the largest and
values compared at float32 precision."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindwatch import Monitor
from mindwatch.aggregate.allreduce import TOKENS, finish, reduce_all
from mindwatch.aggregate.reductions import Reduction, ReductionTable, reduce_values
from mindwatch.testing import LocalGroup
from tests.aggregate.test_multirank import run_ranks
from tests.tbread import scalars

NAN, INF = math.nan, math.inf
Cell = Optional[float]  # None: the rank did not log the value at that step
KIND_TAG = {"mean": "train/loss", "max": "perf/step_time_ms", "sum": "perf/samples_per_s"}
WORLDS = range(3, 9)


def numpy_path(
    values: list[list[Cell]], kind: str, tokens: Optional[list[list[Cell]]] = None
) -> list[Optional[dict[str, float]]]:
    """Per step: the global value and spread ``reduce_values`` gives, None where no rank
    logged the value; ``tokens``: each rank's weight per step (None: not given)."""
    array = np.array([[NAN if v is None else v for v in row] for row in values])
    present = np.array([[v is not None for v in row] for row in values])
    weights = None
    if tokens is not None:
        weights = np.array([[0.0 if w is None else w for w in row] for row in tokens])
    result, spread, counted = reduce_values(array, present, Reduction(kind), weights)  # type: ignore[arg-type]
    assert spread is not None
    out: list[Optional[dict[str, float]]] = []
    for i in range(array.shape[1]):
        if not counted[i]:
            out.append(None)
            continue
        low, high, mean, std, argmax = (float(spread[k][i]) for k in range(5))
        out.append({"value": float(result[i]), "min": low, "max": high, "mean": mean, "std": std})
        out[-1]["argmax"] = argmax
    return out


def allreduce_path(
    values: list[list[Cell]], kind: str, tokens: Optional[list[list[Cell]]] = None
) -> list[Optional[dict[str, float]]]:
    """The same from the four all-reduces over simulated ranks, as rank 0 writes it."""
    world, n_steps = len(values), len(values[0])
    tag = KIND_TAG[kind]
    name = tag.split("/", 1)[1]
    table = ReductionTable()
    group = LocalGroup(world, timeout=60)
    out: dict[int, Any] = {}
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            rows: list[tuple[int, dict[str, float]]] = []
            for step in range(n_steps):
                row: dict[str, float] = {}
                if values[rank][step] is not None:
                    row[tag] = values[rank][step]  # type: ignore[assignment]
                if tokens is not None and tokens[rank][step] is not None:
                    row[TOKENS] = tokens[rank][step]  # type: ignore[assignment]
                rows.append((step, row))
            tags = [tag] if tokens is None else [tag, TOKENS]
            reduced, _ = reduce_all(
                group.member(rank).all_reduce, rank=rank, world=world, round_no=1,
                capacity=8, proposal=0, stop=False, rows=rows, tags=tags, table=table,
            )  # fmt: skip
            if rank == 0:
                rows0 = [(s, 0.0, list(r.items()), None, None, None) for s, r in rows]
                out[0] = finish(reduced, rows0, tags, table)
        except BaseException as exc:  # re-raised by the caller
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    by_step: list[Optional[dict[str, float]]] = [None] * n_steps
    for step, pairs, _, _ in out[0]:
        got = dict(pairs)
        if f"ranks/{name}_argmax" not in got:
            continue
        by_step[step] = {
            "value": got[tag],
            "min": got[f"ranks/{name}_min"],
            "max": got[f"ranks/{name}_max"],
            "mean": got[f"ranks/{name}_mean"],
            "std": got[f"ranks/{name}_std"],
            "argmax": got[f"ranks/{name}_argmax"],
        }
    return by_step


def argmaxes(values: list[list[Cell]], kind: str = "mean") -> tuple[list[Any], list[Any]]:
    """Each path's argmax per step (None: no rank logged the value)."""
    a = [None if s is None else s["argmax"] for s in numpy_path(values, kind)]
    b = [None if s is None else s["argmax"] for s in allreduce_path(values, kind)]
    return a, b


def columns(*steps: list[Cell]) -> list[list[Cell]]:
    """Rank x step values from one list per step (each list: one value per rank)."""
    return [list(row) for row in zip(*steps)]


@pytest.mark.parametrize("world", WORLDS)
def test_a_value_equal_on_every_rank_names_rank_0_on_both_paths(world: int) -> None:
    everyone = [2.5] * world
    nan_everywhere = [NAN] * world
    inf_everywhere = [INF] * world
    values = columns(everyone, nan_everywhere, inf_everywhere, [0.0] * world)
    for kind in KIND_TAG:
        a, b = argmaxes(values, kind)
        assert a == b == [0.0, 0.0, 0.0, 0.0], kind


@pytest.mark.parametrize("world", WORLDS)
def test_a_partial_tie_names_the_lowest_of_the_tied_ranks(world: int) -> None:
    steps: list[list[Cell]] = []
    expected: list[float] = []
    # The maximum held by two ranks, one of them the last; by every rank but rank 0; by
    # the last two; and a lower tie that must not count.
    for tied in ({1, world - 1}, set(range(1, world)), {world - 2, world - 1}):
        steps.append([7.0 if r in tied else 1.0 + 0.1 * r for r in range(world)])
        expected.append(float(min(tied)))
    steps.append([3.0, 3.0] + [9.0] + [3.0] * (world - 3))
    expected.append(2.0)
    a, b = argmaxes(columns(*steps))
    assert a == b == expected


@pytest.mark.parametrize("world", WORLDS)
def test_a_non_finite_value_on_some_ranks_names_the_lowest_of_them(world: int) -> None:
    last, middle = world - 1, world // 2
    steps: list[list[Cell]] = [
        [1e30 if r != last else NAN for r in range(world)],  # NaN beats any value
        [NAN if r in (middle, last) else 5.0 for r in range(world)],
        [INF if r == last else (NAN if r == middle else 5.0) for r in range(world)],
        [-INF if r == last else 5.0 for r in range(world)],  # -inf is not finite either
        [1e39 if r == 0 else (NAN if r == last else 1.0) for r in range(world)],
    ]
    a, b = argmaxes(columns(*steps))
    # A finite value beyond float32's range (1e39) is still below a NaN.
    assert a == b == [float(last), float(middle), float(middle), float(last), float(last)]


@pytest.mark.parametrize("world", WORLDS)
def test_ranks_without_the_value_are_left_out_of_the_tie(world: int) -> None:
    steps: list[list[Cell]] = [
        [None] + [4.0] * (world - 1),  # rank 0 did not log it: rank 1 of the tie
        [None if r % 2 == 0 else 4.0 for r in range(world)],
        [4.0 if r == world - 1 else None for r in range(world)],
        [None] * world,  # nobody: no value at all
        [None if r < world - 2 else NAN for r in range(world)],
    ]
    a, b = argmaxes(columns(*steps))
    assert a == b == [1.0, 1.0, float(world - 1), None, float(world - 2)]


@pytest.mark.parametrize("world", WORLDS)
def test_values_closer_than_float32_tie_and_farther_ones_do_not(world: int) -> None:
    one = 1.0
    below = one + 2.0**-30  # rounds to 1.0 in float32: a tie with 1.0
    above = one + 2.0**-20  # a float32 step above 1.0
    steps: list[list[Cell]] = [
        [one if r == 0 else below for r in range(world)],
        [one if r < world - 1 else above for r in range(world)],
    ]
    a, b = argmaxes(columns(*steps))
    assert a == b == [0.0, float(world - 1)]


# Values drawn so that ties are the rule: a handful of levels, the non-finite ones, a
# level and its float32 neighbours, and a few arbitrary floats.
_LEVELS = [0.0, 1.0, 2.5, -3.0, 1e6, 1.0 + 2.0**-30, 1.0 + 2.0**-20, NAN, INF, -INF]
_CELL = st.one_of(
    st.none(),
    st.sampled_from(_LEVELS),
    st.floats(min_value=-1e3, max_value=1e3, allow_nan=False),
)


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(
    data=st.integers(1, 8).flatmap(
        lambda world: st.integers(1, 4).flatmap(
            lambda n: st.lists(
                st.lists(_CELL, min_size=n, max_size=n), min_size=world, max_size=world
            )
        )
    ),
    kind=st.sampled_from(sorted(KIND_TAG)),
)
def test_both_paths_agree_on_random_ranks_with_many_ties(data: list[list[Cell]], kind: str) -> None:
    a = numpy_path(data, kind)
    b = allreduce_path(data, kind)
    assert [s is None for s in a] == [s is None for s in b]
    for step, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None:
            continue
        assert x["argmax"] == y["argmax"], (step, data)
        # The argmax holds the largest key: lowest rank among them (an independent check).
        ranks = [r for r in range(len(data)) if data[r][step] is not None]
        keys = {r: _key(data[r][step]) for r in ranks}
        top = max(keys.values())
        assert x["argmax"] == min(r for r in ranks if keys[r] == top)
        for field in ("value", "min", "max", "mean", "std"):
            assert _same(x[field], y[field]), (field, step, x, y, data)


_WEIGHT = st.one_of(st.none(), st.sampled_from([0.0, 1.0, 3.0, 512.0]), st.floats(0.5, 1e4))


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    data=st.integers(1, 8).flatmap(
        lambda world: st.integers(1, 4).flatmap(
            lambda n: st.tuples(
                st.lists(st.lists(_CELL, min_size=n, max_size=n), min_size=world, max_size=world),
                st.lists(st.lists(_WEIGHT, min_size=n, max_size=n), min_size=world, max_size=world),
            )
        )
    )
)
def test_both_paths_weigh_the_mean_alike(
    data: tuple[list[list[Cell]], list[list[Cell]]],
) -> None:
    # Weighted by tokens where every contributing rank gave a positive weight, plain
    # otherwise (a rank without a weight, or with 0).
    values, tokens = data
    a = numpy_path(values, "mean", tokens)
    b = allreduce_path(values, "mean", tokens)
    assert [s is None for s in a] == [s is None for s in b]
    for x, y in zip(a, b):
        if x is not None and y is not None:
            assert _same(x["value"], y["value"]), (x, y, data)
            assert x["argmax"] == y["argmax"], (x, y, data)


def _key(value: Cell) -> float:
    assert value is not None
    if not math.isfinite(value):
        return math.inf
    return float(np.float32(max(min(value, 3.4028234663852886e38), -3.4028234663852886e38)))


@pytest.mark.parametrize("world", [3, 8])
def test_a_monitored_job_names_the_lowest_tied_rank(tmp_path: Path, world: int) -> None:
    # Through Monitor and the aggregator: the loss equal on every rank, a metric whose
    # maximum two ranks share (the last one and one in the middle), NaN on two ranks.
    middle, last = world // 2, world - 1

    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 21):
                acc = 0.9 if rank in (middle, last) else 0.5 + 0.01 * rank
                bad = math.nan if rank in (middle, last) and step == 20 else 1.0
                mon.log_step(step, loss=2.0, accuracy=acc, bad=bad, samples=8)

    run_ranks(world, tmp_path, body, config={"aggregate_every": 10})
    curves = scalars(tmp_path)
    assert [v for _, v in curves["ranks/loss_argmax"]] == [0.0] * 20
    assert [v for _, v in curves["ranks/accuracy_argmax"]] == [float(middle)] * 20
    assert [v for _, v in curves["ranks/bad_argmax"]] == [0.0] * 19 + [float(middle)]
