"""The ``Aggregator`` itself on 3 to 8 simulated ranks (``mindwatch.testing.LocalGroup``),
with a :class:`~mindwatch.aggregate.aggregator.ReducedOutput` that keeps what it is
given: forensics requests, telemetry, local writes, failures and their messages, the
auto interval's measurements and the settings it refuses.

These are the behaviours the mutants that survived ``tests/aggregate`` showed untested
(docs/dev/mutation/aggregate.md)."""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
import pytest

from mindwatch.aggregate import aggregator as aggregator_module
from mindwatch.aggregate.aggregator import MAIN, RANK, Aggregator
from mindwatch.aggregate.collective import AggregationError
from mindwatch.aggregate.reductions import ReductionTable
from mindwatch.config import MonitorConfig
from mindwatch.forensics.exchange import SLOT
from mindwatch.run.ranks import RankPlace
from mindwatch.testing import LocalCollective, LocalGroup

WORLDS = range(3, 9)
LOSS = "train/loss"
Values = list[tuple[str, float]]


class Output:
    """A ``ReducedOutput`` that keeps every call (from whichever thread makes it)."""

    def __init__(self, slow_step: Optional[int] = None) -> None:
        self.steps: list[tuple[int, int, dict[str, float], float, Optional[float]]] = []
        self.failures: list[tuple[int, str]] = []
        self.gathers: list[tuple[int, npt.NDArray[np.float64]]] = []
        self._slow_step = slow_step

    def step(
        self, route: int, step: int, values: Values, wall: float, samples: Optional[float]
    ) -> None:
        if route == MAIN and step == self._slow_step:  # a writer slow with this one point
            time.sleep(0.5)
        self.steps.append((route, step, dict(values), wall, samples))

    def failed(self, step: int, reason: str) -> None:
        self.failures.append((step, reason))

    def gathered(self, step: int, slots: npt.NDArray[np.float64]) -> None:
        self.gathers.append((step, np.array(slots)))

    def route(self, route: int) -> dict[int, dict[str, float]]:
        return {step: values for r, step, values, _, _ in self.steps if r == route}


def on_ranks(
    world: int,
    body: Callable[[LocalCollective, int], Any],
    *,
    group: Optional[LocalGroup] = None,
) -> list[Any]:
    """``body(collective, rank)`` on one thread per rank; re-raises a rank's exception."""
    group = group or LocalGroup(world, timeout=30)
    results: list[Any] = [None] * world
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            results[rank] = body(group.member(rank), rank)
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a simulated rank hung"
    if errors:
        raise errors[0]
    return results


def row(step: int, wall: float, values: Values) -> tuple[Any, ...]:
    """A step as the aggregator buffers it without a ``prepare``: a Row."""
    return (step, wall, values, None, None, None)


# ------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("timeout", "problem"),
    [
        (0, "> 0 seconds, got 0"),
        (-1.0, "> 0 seconds, got -1.0"),
        (math.nan, "a finite number of seconds, got nan"),
        (math.inf, "a finite number of seconds, got inf"),
        (True, "a finite number of seconds, got True"),
        ("soon", "a number of seconds, got 'soon'"),
    ],
)
def test_a_bad_timeout_is_refused_naming_the_parameter(timeout: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=rf"^timeout must be {re.escape(problem)}$"):
        Aggregator(LocalGroup(3).member(0), ReductionTable(), every=5, timeout=timeout)


def test_an_interval_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^every must be >= 1 or 'auto', got 0$"):
        Aggregator(LocalGroup(3).member(0), ReductionTable(), every=0)


@pytest.mark.parametrize("world", WORLDS)
def test_the_loss_rank_may_be_any_rank_of_the_job_counted_from_either_end(world: int) -> None:
    collective = LocalGroup(world).member(0)
    for rank in range(-world, world):  # -world is rank 0, -1 the last rank
        config = MonitorConfig.from_dict({"loss_source_rank": rank})
        agg = Aggregator.for_config(collective, config)
        assert agg.table[LOSS].ranks == (rank,)
        agg.close()
    for rank in (world, world + 1, -world - 1):
        config = MonitorConfig.from_dict({"loss_source_rank": rank})
        with pytest.raises(
            ValueError,
            match=rf"loss_ranks \[{rank}\] is not a rank of this job of {world} ranks; "
            rf"use 0\.\.{world - 1}, or -1 for the last rank",
        ):
            Aggregator.for_config(collective, config)
    with pytest.raises(ValueError, match=rf"loss_ranks \[{world}\] is not a rank"):
        Aggregator.for_config(collective, MonitorConfig(), loss_ranks=(0, world))


# ------------------------------------------------------------------------- forensics


@pytest.mark.parametrize("world", WORLDS)
def test_a_burst_of_forensics_requests_keeps_the_newest_64_each_gathered_once(
    world: int,
) -> None:
    """Rank 0's rules ask about 100 steps before a reduction (and about one twice): the
    queue keeps the newest 64 (37..100), and each reduction gathers the oldest of them
    from every rank, then forgets it."""

    def body(collective: LocalCollective, rank: int) -> Output:
        out = Output()
        agg = Aggregator(collective, ReductionTable(), every=1, timeout=30, output=out)
        agg.forensics = lambda step: np.full(SLOT, 1000.0 * rank + step)
        if rank == 0:
            for step in range(1, 101):
                agg.request_forensics(step)
            agg.request_forensics(100)  # two alerts of one step ask once
        for step in range(1, 5):
            agg.add(row(step, 10.0 + step, [(LOSS, float(rank))]))
            agg.flush(step)
        agg.close()
        return out

    outs = on_ranks(world, body)
    assert [step for step, _ in outs[0].gathers] == [37, 38, 39, 40]
    for step, slots in outs[0].gathers:
        assert slots.dtype == np.float64
        assert slots.shape == (world, SLOT)
        assert (slots == np.array([[1000.0 * r + step] for r in range(world)])).all()
    assert all(not out.gathers for out in outs[1:])  # only rank 0 hands slots on


# Steps around the two 24-bit parts they travel in (exact through float32).
BOUNDARY_STEPS = [0, 1, 2**24 - 1, 2**24, 2**24 + 1, 3 * 2**24 + 5, 2**40 + 3]


@pytest.mark.parametrize("world", [3, 5, 8])
def test_steps_at_the_24_bit_boundaries_are_reduced_and_asked_about_exactly(world: int) -> None:
    """Each step is logged on every rank and its forensics asked by rank 0 before its
    reduction: rank 0 writes every step's mean under that step, and gathers that step's
    slots (step 0 included: the others' "none" must not turn it into step 1)."""

    def body(collective: LocalCollective, rank: int) -> Output:
        out = Output()
        agg = Aggregator(collective, ReductionTable(), every=1, timeout=30, output=out)
        agg.forensics = lambda step: np.full(SLOT, float(rank))
        for i, step in enumerate(BOUNDARY_STEPS):
            if rank == 0:
                agg.request_forensics(step)
            agg.add(row(step, 10.0 + i, [(LOSS, float(i + rank))]))
            agg.flush(step)
        agg.close()
        return out

    out = on_ranks(world, body)[0]
    main = out.route(MAIN)
    assert sorted(main) == BOUNDARY_STEPS
    mean_rank = (world - 1) / 2
    assert [main[s][LOSS] for s in BOUNDARY_STEPS] == [
        pytest.approx(i + mean_rank) for i in range(len(BOUNDARY_STEPS))
    ]
    assert [step for step, _ in out.gathers] == BOUNDARY_STEPS


def test_failing_forensics_and_recorder_cost_one_warning_each_not_the_reduction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Rank 1's forensics raise, rank 2's return the wrong shape, rank 1's recorder
    raises: their slots are zeros, every step is still reduced, and each failure is
    one warning that names the step and the error, however often it repeats."""
    caplog.set_level(logging.WARNING, logger="mindwatch")
    world = 4

    def body(collective: LocalCollective, rank: int) -> Output:
        out = Output()
        agg = Aggregator(collective, ReductionTable(), every=1, timeout=30, output=out)

        def forensics(step: int) -> npt.NDArray[np.float64]:
            if rank == 1:
                raise ValueError(f"no state for step {step}")
            return np.full(3 if rank == 2 else SLOT, 5.0)

        def observe(step: int, values: Values) -> None:
            if rank == 1:
                raise RuntimeError("recorder full")

        agg.forensics, agg.observe = forensics, observe
        for step in (7, 8):
            if rank == 0:
                agg.request_forensics(step)
            agg.add(row(step, 1.0, [(LOSS, float(rank))]))
            agg.flush(step)
        agg.close()
        return out

    out = on_ranks(world, body)[0]
    assert {s: v[LOSS] for s, v in out.route(MAIN).items()} == {7: 1.5, 8: 1.5}
    for _, slots in out.gathers:
        assert (slots[[0, 3]] == 5.0).all()
        assert (slots[[1, 2]] == 0.0).all()
    assert sorted(r.getMessage() for r in caplog.records) == [
        "mindwatch: forensics of step 7 failed: ValueError('no state for step 7')",
        "mindwatch: recording steps failed: RuntimeError('recorder full')",
    ]  # once each: step 8's failures are counted, not logged again


# ------------------------------------------------------------------------- telemetry


class Sampler:
    """A ``Telemetry`` whose latest sample is always there and whose next sampling
    period comes at wall time ``next_period`` (``due`` gives the sample from then on)."""

    def __init__(self, rank: int, next_period: float) -> None:
        self.sample = [("hw/rss_mb", 100.0 + rank)]
        self.next_period = next_period

    def latest(self) -> Values:
        return self.sample

    def due(self, wall: float) -> Values:
        return self.sample if wall >= self.next_period else []


@pytest.mark.parametrize("world", WORLDS)
def test_telemetry_rides_on_the_last_step_of_every_interval_on_every_rank(world: int) -> None:
    """Reduced: every rank's latest sample on the interval's last step, whether or not a
    new sampling period began, so the spread covers every rank at the same steps.
    Written locally (no reduction): a point only once a period has passed."""

    def body(collective: LocalCollective, rank: int) -> Output:
        out = Output()
        sampler = Sampler(rank, next_period=1011.0)
        agg = Aggregator(
            collective, ReductionTable(), every=4, timeout=30, output=out, telemetry=sampler
        )
        for step in range(1, 9):
            agg.add(row(step, 1000.0 + step, [(LOSS, 1.0)]))
            agg.step_end(step)
        for step in range(9, 13):  # steps 9..12, walls 1009..1012: local, one flush each
            agg.add(row(step, 1000.0 + step, [(LOSS, 1.0)]))
            agg.flush(step, communicate=False)
        agg.close(communicate=False)
        return out

    main = on_ranks(world, body)[0].route(MAIN)
    with_hw = {step: v for step, v in main.items() if "hw/rss_mb" in v}
    assert sorted(with_hw) == [4, 8, 11, 12]
    for step in (4, 8):  # the worst rank, named
        values = with_hw[step]
        assert values["hw/rss_mb"] == 100.0 + world - 1
        assert values["ranks/rss_mb_min"] == 100.0
        assert values["ranks/rss_mb_argmax"] == world - 1
    assert with_hw[11]["hw/rss_mb"] == with_hw[12]["hw/rss_mb"] == 100.0  # rank 0's own


# ------------------------------------------------------------------------- local writes


@pytest.mark.parametrize("world", [3, 8])
def test_values_written_without_a_reduction_keep_their_wall_time(world: int) -> None:
    def body(collective: LocalCollective, rank: int) -> Output:
        out = Output()
        agg = Aggregator(
            collective, ReductionTable(), every=2, timeout=30, output=out, per_rank=True
        )
        for step in (1, 2, 3):
            agg.add((step, 5000.25 + step, [(LOSS, float(rank))], 4.0, None, None))
        agg.flush(communicate=False)
        agg.close(communicate=False)
        return out

    outs = on_ranks(world, body)
    assert [(r, s, v, w, n) for r, s, v, w, n in outs[0].steps if r == MAIN] == [
        (MAIN, s, {LOSS: 0.0}, 5000.25 + s, 4.0) for s in (1, 2, 3)
    ]
    for rank, out in enumerate(outs):
        assert [(s, v, w) for r, s, v, w, _ in out.steps if r == RANK] == [
            (s, {LOSS: float(rank)}, 5000.25 + s) for s in (1, 2, 3)
        ]


@pytest.mark.parametrize("world", [3, 6])
def test_a_local_flush_waits_for_the_reduced_steps_still_being_written(world: int) -> None:
    """Rank 0's writer takes half a second over reduced step 1 (written with 2..4 on
    the collective thread); steps 5 and 6, flushed locally right after, still come
    after them."""

    def body(collective: LocalCollective, rank: int) -> Output:
        out = Output(slow_step=1 if rank == 0 else None)
        agg = Aggregator(collective, ReductionTable(), every=4, timeout=30, output=out)
        for step in range(1, 7):
            agg.add(row(step, float(step), [(LOSS, float(rank))]))
            if step == 4:
                agg.flush(step)
        agg.flush(communicate=False)
        agg.close(communicate=False)
        return out

    main = [(s, v[LOSS]) for r, s, v, _, _ in on_ranks(world, body)[0].steps if r == MAIN]
    mean = (world - 1) / 2
    assert main == [(1, mean), (2, mean), (3, mean), (4, mean), (5, 0.0), (6, 0.0)]


@pytest.mark.parametrize("world", [3, 7])
def test_a_bug_in_reducing_the_values_names_the_error_and_writes_rank_0s_own(
    world: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")

    def broken(*args: Any) -> Any:
        raise ArithmeticError("planted")

    monkeypatch.setattr(aggregator_module, "finish", broken)

    def body(collective: LocalCollective, rank: int) -> Output:
        out = Output()
        agg = Aggregator(collective, ReductionTable(), every=2, timeout=30, output=out)
        for step in (1, 2):
            agg.add(row(step, 70.0 + step, [(LOSS, float(rank + step))]))
        agg.flush(2)
        agg.close()
        return out

    out = on_ranks(world, body)[0]
    assert [(s, v, w) for r, s, v, w, _ in out.steps if r == MAIN] == [
        (1, {LOSS: 1.0}, 71.0),
        (2, {LOSS: 2.0}, 72.0),
    ]
    assert [r.getMessage() for r in caplog.records] == [
        "mindwatch: reducing the values failed: ArithmeticError('planted')"
    ]


# ------------------------------------------------------------------------- failures


@pytest.mark.parametrize("world", [3, 5])
def test_a_silent_rank_costs_one_warning_that_says_what_to_do(
    world: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The last rank never reduces: every other rank waits one timeout at step 4, warns
    once with the reason and the way out, tells its output, and writes its own values."""
    caplog.set_level(logging.WARNING, logger="mindwatch")

    def body(collective: LocalCollective, rank: int) -> Optional[tuple[Output, Aggregator]]:
        if rank == world - 1:
            return None  # never calls a collective: a rank without mindwatch
        out = Output()
        agg = Aggregator(collective, ReductionTable(), every=4, timeout=0.5, output=out)
        for step in range(1, 9):
            agg.add(row(step, float(step), [(LOSS, float(rank))]))
            agg.step_end(step)
        agg.close()
        return out, agg

    results = on_ranks(world, body, group=LocalGroup(world, timeout=5))
    reason = (
        "no answer from the other ranks within 0.5 s "
        "(a rank died, hangs, or does not run mindwatch)"
    )
    for rank in range(world - 1):
        out, agg = results[rank]
        assert out.failures == [(4, reason)]
        assert agg.summary()["failed_at_step"] == 4
        assert agg.summary()["failed"] == reason
    main = results[0][0].route(MAIN)
    assert {s: v[LOSS] for s, v in main.items()} == dict.fromkeys(range(1, 9), 0.0)
    assert all(not out.route(MAIN) for out, _ in results[1 : world - 1])  # rank 0 only
    warnings = sorted(r.getMessage() for r in caplog.records)
    assert warnings == [
        f"mindwatch: rank {rank}: the cross-rank reduction at step 4 failed: {reason}. "
        "From now on every rank writes its own values (rank 0's in the global run); "
        "training goes on. If this rank is the only one running mindwatch, give the "
        "callback to every rank, or set aggregate_every: 0."
        for rank in range(world - 1)
    ]


@pytest.mark.parametrize(("timeout", "waited"), [(0.2, "0.6"), (0.9, "0.9")])
def test_the_start_waits_the_timeout_but_at_least_start_timeout(
    timeout: float, waited: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 2 never arrives: ranks 0 and 1 give up after the longer of their timeout
    and START_TIMEOUT (0.6 s here), and reductions are off from step 0."""
    monkeypatch.setattr(aggregator_module, "START_TIMEOUT", 0.6)
    world = 3

    def body(collective: LocalCollective, rank: int) -> Optional[tuple[str, Aggregator]]:
        if rank == 2:
            return None
        agg = Aggregator(collective, ReductionTable(), every=5, timeout=timeout)
        try:
            agg.agree_on_start("run-1", RankPlace(rank, "node", None, None))
        except AggregationError as exc:
            agg.close()
            return str(exc), agg
        raise AssertionError("the start-up agreement went through without rank 2")

    for rank_result in on_ranks(world, body, group=LocalGroup(world, timeout=20))[:2]:
        message, agg = rank_result
        assert message.startswith(f"no answer from the other ranks within {waited} s")
        assert (agg.failure, agg.failed_at) == (message, 0)
        assert not agg.reducing


# ------------------------------------------------------------------------- auto interval

WALL = 1.7e9  # time.time() today: walls are far larger than step numbers
TICK = 1 / 64  # step times in 64ths of a second: exact added to WALL


def walls(first: int, step_secs: float) -> list[tuple[Any, ...]]:
    return [row(s, WALL + (s - first) * step_secs, []) for s in range(first, first + 10)]


def test_the_auto_interval_measures_steps_from_wall_clock_times() -> None:
    agg = Aggregator(LocalGroup(1).member(0), ReductionTable(), every="auto")
    agg._cost = 0.0011  # 1.1 ms per reduction
    assert agg._proposal(walls(1, TICK)) == 15  # ceil(1.1 ms / (0.5 % x 15.625 ms))
    agg.close()


def test_the_auto_interval_smooths_the_step_time_over_intervals() -> None:
    """1/64 s steps, then 3/64 s: the step time it plans with is 0.7 x 1/64 + 0.3 x 3/64
    = 25 ms (a proposal of 9 steps), not the last interval's 46.9 ms (5 steps); an
    interval whose clock went back (a pause, a resume) is not measured."""
    agg = Aggregator(LocalGroup(1).member(0), ReductionTable(), every="auto")
    agg._cost = 0.0011
    assert agg._proposal(walls(1, TICK)) == 15
    assert agg._proposal(walls(11, 3 * TICK)) == 9  # ceil(1.1 ms / (0.5 % x 25 ms))
    assert agg._proposal(walls(21, -0.5)) == 9  # not measured: unchanged
    agg.close()


@pytest.mark.parametrize("world", [3, 8])
def test_the_first_reductions_wait_for_a_late_rank_is_not_its_cost(world: int) -> None:
    """The last rank reaches the first reduction a second late; at 1 s steps that wait,
    taken as the cost, would ask for the longest interval (200). It is not measured:
    after two reductions every rank still agrees on the start value, 10."""

    def body(collective: LocalCollective, rank: int) -> list[int]:
        agg = Aggregator(collective, ReductionTable(), every="auto", timeout=30)
        agreed = []
        for first in (1, 11):
            if rank == world - 1 and first == 1:
                time.sleep(1.0)
            for logged in walls(first, 1.0):
                agg.add(row(logged[0], logged[1], [(LOSS, 1.0)]))
            agg.flush(first + 9)
            agreed.append(agg.every)
        agg.close()
        return agreed

    assert on_ranks(world, body) == [[10, 10]] * world


class SlowCollective:
    """A ``LocalGroup`` member whose every all-reduce takes at least ``secs``."""

    def __init__(self, member: LocalCollective, secs: float) -> None:
        self._member, self._secs = member, secs
        self.rank, self.world_size = member.rank, member.world_size

    def all_gather(self, vector: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return self._member.all_gather(vector)

    def all_reduce(self, vector: npt.NDArray[np.float64], op: str) -> npt.NDArray[np.float64]:
        time.sleep(self._secs)
        return self._member.all_reduce(vector, op)


def test_the_cost_of_a_reduction_is_smoothed_with_weights_that_sum_to_one() -> None:
    """Three reductions of at least 0.2 s each (four all-reduces of 0.05 s): the cost
    the interval is planned with is 0.7 x the second's + 0.3 x the third's, so at most
    that weighted sum of what the two flushes took, however long they took."""
    world = 3

    def body(collective: LocalCollective, rank: int) -> tuple[Optional[float], list[float]]:
        agg = Aggregator(SlowCollective(collective, 0.05), ReductionTable(), every=2, timeout=30)
        took = []
        for step in (2, 4, 6):
            agg.add(row(step, float(step), [(LOSS, 1.0)]))
            started = time.perf_counter()
            agg.flush(step)
            took.append(time.perf_counter() - started)
        agg.close()
        return agg._cost, took

    for cost, took in on_ranks(world, body):
        assert cost is not None
        assert 0.2 <= cost <= 0.7 * took[1] + 0.3 * took[2]
