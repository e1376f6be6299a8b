"""Monitors on simulated ranks (threads sharing ``mindwatch.testing.LocalGroup``).

The same code path as under msrun, minus MindSpore: the msrun tests in
``tests/mindspore/test_multicard.py`` prove it with real workers.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

from mindwatch import Monitor
from mindwatch.testing import LocalGroup
from tests.tbread import accumulator, scalars

QUIET = {"print_every": 0, "flush_secs": 0.2}


def run_ranks(
    world: int,
    logdir: Path,
    body: Callable[[Monitor, int], None],
    *,
    config: Optional[dict[str, Any]] = None,
    group: Optional[LocalGroup] = None,
    collectives: Optional[list[Any]] = None,
) -> list[Monitor]:
    """One thread per rank, each with its own Monitor; re-raises a rank's exception."""
    group = group or LocalGroup(world)
    monitors: list[Optional[Monitor]] = [None] * world
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            collective = collectives[rank] if collectives else group.member(rank)
            mon = Monitor(logdir, {**QUIET, **(config or {})}, collective=collective)
            monitors[rank] = mon
            body(mon, rank)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a simulated rank hung"
    if errors:
        raise errors[0]
    return [m for m in monitors if m is not None]


def local_loss(rank: int, step: int) -> float:
    return 1.0 / step + 0.25 * rank


def test_rank_0_writes_the_mean_and_the_spread_of_every_step(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 26):  # 25: the last 5 steps are reduced at close()
                mon.log_step(step, loss=local_loss(rank, step), lr=0.1 * (1 + rank), samples=8)

    config = {"aggregate_every": 10, "per_rank": True}
    monitors = run_ranks(2, tmp_path, body, config=config)
    curves = scalars(tmp_path)
    steps = list(range(1, 26))
    assert [s for s, _ in curves["train/loss"]] == steps
    for (step, value), (_, high), (_, low), (_, arg) in zip(
        curves["train/loss"],
        curves["ranks/loss_max"],
        curves["ranks/loss_min"],
        curves["ranks/loss_argmax"],
    ):
        mean = (local_loss(0, step) + local_loss(1, step)) / 2
        assert value == pytest.approx(mean, rel=1e-6)
        assert high == pytest.approx(local_loss(1, step), rel=1e-6)
        assert low == pytest.approx(local_loss(0, step), rel=1e-6)
        assert arg == 1.0
    assert [v for _, v in curves["train/lr"]] == pytest.approx([0.1] * 25)  # once: rank 0's
    assert "ranks/lr_max" not in curves
    assert [s for s, _ in curves["perf/samples_per_s"]] == steps
    # Each rank's own folder: its local values of the reduced metrics, nothing global.
    for rank in (0, 1):
        own = scalars(tmp_path / f"rank_{rank}")
        assert [v for _, v in own["train/loss"]] == pytest.approx(
            [local_loss(rank, s) for s in steps]
        )
        assert "train/lr" not in own
        assert not any(t.startswith("ranks/") for t in own)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["world_size"] == 2
    assert info["status"] == "finished"
    assert info["aggregation"] == {"reductions": 3, "interval": 10, "last_reduced_step": 25}
    assert sorted(Path(f).parent.name for f in monitors[0].stats.files) == [
        "rank_0",
        tmp_path.name,
    ]
    assert not (tmp_path / "rank_1" / "run.json").exists()


def test_without_per_rank_output_only_rank_0_writes_files(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 11):
                mon.log_step(step, loss=local_loss(rank, step))

    run_ranks(2, tmp_path, body, config={"aggregate_every": 4})
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []
    assert len(scalars(tmp_path)["train/loss"]) == 10


def test_mean_weighted_by_tokens_and_declared_reductions(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 7):
                mon.log_step(
                    step,
                    loss=1.0 + rank,
                    tokens=100 * (1 + 3 * rank),  # rank 1 saw 4x the tokens
                    accuracy=0.5 + 0.1 * rank,
                    memory_mb=1000.0 + rank,
                    reduce={"accuracy": "min"},
                )

    config = {"aggregate_every": 3, "reductions": {"memory_mb": "per_rank"}}
    run_ranks(2, tmp_path, body, config=config)
    curves = scalars(tmp_path)
    assert [v for _, v in curves["train/loss"]] == pytest.approx([(1.0 * 1 + 2.0 * 4) / 5] * 6)
    assert [v for _, v in curves["train/accuracy"]] == pytest.approx([0.5] * 6)
    assert "train/memory_mb" not in curves  # per_rank: only the spread is global
    assert {v for _, v in curves["ranks/memory_mb_max"]} == {1001.0}
    assert {v for _, v in curves["ranks/memory_mb_argmax"]} == {1.0}
    assert {v for _, v in curves["perf/tokens_per_s"]} != set()  # sum over ranks


def test_a_rank_with_more_tags_than_the_slice_holds_grows_it(tmp_path: Path) -> None:
    many = {f"m{i}": float(i) for i in range(40)}

    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 13):
                extra = many if rank == 1 else {}
                mon.log_step(step, loss=float(rank), **extra)

    group = LocalGroup(2)
    run_ranks(2, tmp_path, body, config={"aggregate_every": 6}, group=group)
    curves = scalars(tmp_path)
    assert len(curves["train/loss"]) == 12
    # Rank 0 never logged m0..m39: it cannot name them, so they stay out of the global run.
    assert "train/m3" not in curves
    # The run folder agreed at start + 2 flushes of 4 all-reduces (only rank 0's layout
    # sets the room: rank 1's extra tags need none) + the final, empty one (round 1 only)
    assert group.calls == 10


def test_auto_interval_agrees_across_ranks_and_keeps_every_step(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 301):
                time.sleep(0.0005 if rank == 0 else 0.0)
                mon.log_step(step, loss=float(step + rank))

    monitors = run_ranks(2, tmp_path, body, config={"aggregate_every": "auto"})
    intervals = {m.aggregator.every for m in monitors if m.aggregator is not None}
    assert len(intervals) == 1  # both ranks use the one agreed interval
    values = scalars(tmp_path)["train/loss"]
    assert [s for s, _ in values] == list(range(1, 301))
    assert all(v == pytest.approx(s + 0.5) for s, v in values)


def test_the_auto_interval_keeps_a_reduction_under_half_a_percent_of_a_step() -> None:
    from mindwatch.aggregate import Aggregator, ReductionTable

    agg = Aggregator(LocalGroup(1).member(0), ReductionTable(), every="auto")
    rows = [(s, s * 0.010, [], None, None) for s in range(1, 11)]  # 10 ms steps
    assert agg._proposal(rows) == 10  # nothing measured yet: keep the start value
    agg._cost = 0.001  # 1 ms per reduction
    assert agg._proposal(rows) == 20  # 1 ms / (0.5 % x 10 ms)
    agg._cost = 1.0
    assert agg._proposal(rows) == 200  # capped: the global curve may lag 200 steps at most
    agg._cost = 1e-6
    assert agg._proposal(rows) == 1


def test_a_dead_rank_costs_one_timeout_then_local_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")
    finished: set[int] = set()

    def body(mon: Monitor, rank: int) -> None:
        for step in range(1, 41):
            if rank == 1 and step == 13:
                return  # dies: never logs again, never closes
            mon.log_step(step, loss=float(rank))
        mon.close()
        finished.add(rank)

    run_ranks(2, tmp_path, body, config={"aggregate_every": 5, "aggregate_timeout": 1.0})
    assert 0 in finished  # rank 0 got through the timeout, training went on, it closed
    values = scalars(tmp_path)["train/loss"]
    assert [s for s, _ in values] == list(range(1, 41))  # nothing lost
    assert [v for s, v in values if s <= 10] == [0.5] * 10  # reduced while rank 1 lived
    assert [v for s, v in values if s > 15] == [0.0] * 25  # then rank 0's own
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["aggregation"]["failed_at_step"] == 15
    assert "no answer from the other ranks within 1 s" in info["aggregation"]["failed"]
    warnings = [r.getMessage() for r in caplog.records if "reduction at step 15" in r.getMessage()]
    assert len(warnings) == 1


class _Impostor:
    """A collective whose answer is not mindwatch's (another collective paired with ours)."""

    def __init__(self, rank: int) -> None:
        self.rank, self.world_size = rank, 2
        self.calls = 0

    def all_gather(self, vector: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls == 1:  # the run folder is agreed; the data that follows is not ours
            agreed = vector.copy()
            agreed[1] = 1  # rank 1's answer: the same text
            return np.stack([vector, agreed])
        return np.stack([vector, np.full_like(vector, 7.0)])

    def all_reduce(self, vector: np.ndarray, op: str) -> np.ndarray:
        self.calls += 1
        return np.full_like(vector, 7.0)  # not the sum or max of mindwatch's vectors


def test_data_from_another_collective_is_not_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")
    with Monitor(tmp_path, {**QUIET, "aggregate_every": 2}, collective=_Impostor(0)) as mon:
        for step in range(1, 7):
            mon.log_step(step, loss=3.0)
    assert [v for _, v in scalars(tmp_path)["train/loss"]] == [3.0] * 6
    assert any("is not mindwatch's" in r.getMessage() for r in caplog.records)


def test_run_name_gives_every_rank_rank_0s_folder(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        with mon:
            if rank == 1:
                time.sleep(1.1)  # a different second on its clock
            mon.log_step(1, loss=1.0)

    monitors = run_ranks(2, tmp_path, body, config={"run_name": "exp", "per_rank": True})
    assert monitors[0].logdir == monitors[1].logdir
    assert len(list(tmp_path.iterdir())) == 1
    assert monitors[1].rank_logdir == monitors[0].logdir / "rank_1"


def test_an_exception_on_one_rank_does_not_wait_for_the_others_at_close(
    tmp_path: Path,
) -> None:
    # No timeout while both ranks open their monitors (they agree on the folder, however
    # long a busy machine makes one of them take); then a short one, which only a final
    # collective that rank 1 never joins (the bug) would wait for: it fails the test
    # instead of hanging it.
    group = LocalGroup(2)
    config = {**QUIET, "aggregate_every": 100}
    other: list[Monitor] = []  # rank 1 opens its Monitor too (they agree on the folder)
    opening = threading.Thread(
        target=lambda: other.append(Monitor(tmp_path, config, collective=group.member(1)))
    )
    opening.start()
    mon = Monitor(tmp_path, config, collective=group.member(0))
    opening.join(120)
    assert other, "rank 1's Monitor did not open"
    group.timeout = 2.0

    def train() -> None:
        with mon:
            mon.log_step(1, loss=2.0)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        train()
    assert group.attempts == [1, 1]  # no final collective: rank 1 would never come
    assert scalars(tmp_path)["train/loss"] == [(1, 2.0)]
    other[0].close(timeout=5.0)


def test_histograms_text_and_eval_come_from_rank_0_only(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        with mon:
            mon.log_step(1, loss=1.0)
            mon.log_eval(1, loss=0.5 + rank)
            mon.log_histogram("parameters/w", np.arange(10.0) + rank, 1)
            mon.log_text("notes", f"rank {rank}", 1)

    run_ranks(2, tmp_path, body, config={"aggregate_every": 1, "per_rank": True})
    acc = accumulator(tmp_path)
    assert [e.value for e in acc.Scalars("eval/loss")] == [0.5]
    assert acc.Tags()["histograms"] == ["parameters/w"]
    rank_1 = accumulator(tmp_path / "rank_1").Tags()
    assert rank_1["histograms"] == []
    assert "eval/loss" not in rank_1["scalars"]


def test_a_resume_hides_the_buffered_steps_it_voids(tmp_path: Path) -> None:
    """A second Model.train resuming at 11 with the same (user-owned) monitor: the steps
    21-25 still buffered from the first one must not appear after the purge marker."""

    def body(mon: Monitor, rank: int) -> None:
        for step in range(1, 26):
            mon.log_step(step, loss=100.0 + step)
        mon.flush()  # what TrainingMonitor does at on_train_end for a monitor passed in
        mon.mark_resume(11)
        for step in range(11, 16):
            mon.log_step(step, loss=float(step))
        mon.close()

    run_ranks(2, tmp_path, body, config={"aggregate_every": 10})
    values = scalars(tmp_path)["train/loss"]
    assert [s for s, _ in values] == list(range(1, 16))
    assert [v for s, v in values if s > 10] == [11.0, 12.0, 13.0, 14.0, 15.0]


def test_close_waits_for_reduced_steps_still_being_written(tmp_path: Path) -> None:
    """Steps reduced just before a failure are written even though close() follows at
    once (the collective thread was still writing them)."""

    def body(mon: Monitor, rank: int) -> None:
        if rank == 0:
            aggregator = mon.aggregator
            assert aggregator is not None
            output = aggregator._output
            assert output is not None

            class Slow:  # the pipeline, slow to take the first reduced step
                def step(self, route: int, step: int, *rest: Any) -> None:
                    if step == 1:
                        time.sleep(1.0)
                    output.step(route, step, *rest)

                def failed(self, step: int, reason: str) -> None:
                    output.failed(step, reason)

            aggregator._output = Slow()
        for step in range(1, 8):
            if rank == 1 and step == 6:
                return  # leaves: the reduction at step 7 gets no answer
            mon.log_step(step, loss=1.0)
        mon.close()

    run_ranks(2, tmp_path, body, config={"aggregate_every": 5, "aggregate_timeout": 0.5})
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == list(range(1, 8))


def test_without_a_collective_each_rank_keeps_its_own_values(tmp_path: Path) -> None:
    for rank in (0, 1):
        with Monitor(tmp_path, {**QUIET, "run_name": "exp"}, rank=rank, world_size=2) as mon:
            mon.log_step(1, loss=float(rank))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2
    assert names[0].endswith("_exp")
    assert names[1].endswith("_exp_rank1")
    assert scalars(tmp_path / names[1])["train/loss"] == [(1, 1.0)]  # not nested in rank_1/


def test_a_loss_rank_outside_the_job_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"loss_source_rank / loss_ranks \[4\] is not a rank"):
        Monitor(tmp_path, {**QUIET, "loss_source_rank": 4}, collective=LocalGroup(2).member(0))


def test_a_stop_request_reaches_every_rank_at_the_same_step(tmp_path: Path) -> None:
    """Rank 0's rules (on the reduced loss) ask to stop; both ranks stop together."""
    stopped: dict[int, int] = {}

    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 200):
                loss = math.nan if (rank == 1 and step == 42) else 1.0
                mon.log_step(step, loss=loss)
                if mon.should_stop:
                    stopped[rank] = step
                    return

    config = {"aggregate_every": 10, "alerts": {"stop_on": ["nonfinite"]}}
    run_ranks(2, tmp_path, body, config=config)
    # Reduced at 50: rank 0 sees the NaN and asks; everyone learns it at the next reduction.
    assert stopped == {0: 60, 1: 60}
    (line,) = (tmp_path / "alerts.jsonl").read_text().splitlines()
    alert = json.loads(line)
    assert (alert["rule"], alert["step"], alert["rank"], alert["action"]) == (
        "nonfinite",
        42,
        1,
        "stop training",
    )


def test_a_benchmark_request_is_agreed_at_the_same_step_on_every_rank(tmp_path: Path) -> None:
    """Whichever rank asks, every rank learns it from the same reduction, once; the
    wait for the background threads to go idle returns (the micro-benchmark's quiet
    moment)."""
    agreed: dict[int, list[int]] = {0: [], 1: [], 2: []}

    def body(mon: Monitor, rank: int) -> None:
        aggregator = mon.aggregator
        assert aggregator is not None
        with mon:
            for step in range(1, 60):
                mon.log_step(step, loss=1.0)
                if rank == 2 and step in (12, 13, 41):  # asked twice before one reduction
                    aggregator.request_benchmark()
                if aggregator.take_benchmark():
                    agreed[rank].append(step)
                    assert mon.settle(10.0)

    run_ranks(3, tmp_path, body, config={"aggregate_every": 10})
    assert agreed == {0: [20, 50], 1: [20, 50], 2: [20, 50]}


def test_controls_come_back_as_values_on_every_rank(tmp_path: Path) -> None:
    """Three ranks; rank 2's loss turns NaN at step 33. Rank 0's rules judge the reduced
    steps; the stop reaches every rank in the same later reduction (run after run, the
    same step), and the keep_last_stable control only rank 0, which writes the alert
    once it hands it back."""
    config = {"aggregate_every": 5, "alerts": {"stop_on": ["nonfinite"]}}
    for attempt in range(3):  # the same steps however the threads happen to run
        stopped: dict[int, int] = {}
        controls: dict[int, list[Any]] = {}

        def body(
            mon: Monitor,
            rank: int,
            stopped: dict[int, int] = stopped,
            controls: dict[int, list[Any]] = controls,
        ) -> None:
            mon.keep_checkpoints(True)  # every rank's loop could keep one
            taken: list[Any] = controls.setdefault(rank, [])
            with mon:
                for step in range(1, 100):
                    loss = math.nan if (rank == 2 and step == 33) else 1.0
                    mon.log_step(step, loss=loss)
                    for control in mon.take_controls():
                        taken.append(control)
                        control.alert.action = f"{control.alert.action}; kept nothing"
                        mon.report(control.alert)  # written now, with what the loop did
                    if mon.should_stop:
                        stopped[rank] = step
                        return

        folder = tmp_path / str(attempt)
        run_ranks(3, folder, body, config=config)
        # Reduced at 35: rank 0 sees the NaN and asks; everyone stops at the next one.
        assert stopped == {0: 40, 1: 40, 2: 40}
        assert [c.kind for c in controls[0]] == ["keep_last_stable"]
        assert controls[1] == controls[2] == []
        (line,) = (folder / "alerts.jsonl").read_text().splitlines()
        alert = json.loads(line)
        assert (alert["rule"], alert["step"], alert["rank"]) == ("nonfinite", 33, 2)
        assert alert["action"] == "stop training; kept nothing"


def test_after_a_failed_reduction_a_stop_applies_at_once(tmp_path: Path) -> None:
    """With no reduction left to carry it, rank 0's stop takes effect on rank 0 alone,
    at the step that raised it (its verdict is waited for, as in a single process)."""
    stopped: dict[int, int] = {}

    def body(mon: Monitor, rank: int) -> None:
        for step in range(1, 40):
            if rank == 1 and step == 6:
                return  # dies: the reduction at step 10 fails on rank 0
            loss = math.nan if (rank == 0 and step == 20) else 1.0
            mon.log_step(step, loss=loss)
            if mon.should_stop:
                stopped[rank] = step
                break
        mon.close()

    config = {"aggregate_every": 5, "aggregate_timeout": 0.5, "alerts": {"stop_on": ["nonfinite"]}}
    run_ranks(2, tmp_path, body, config=config)
    assert stopped == {0: 20}


def test_a_stop_survives_the_failure_of_the_reduction_that_was_to_carry_it(
    tmp_path: Path,
) -> None:
    """NaN at step 3, judged on the reduction of step 4, asks for a stop in the reduction
    of step 6; rank 1 dies before it, so that reduction fails: rank 0 stops on its own
    right after it."""
    stopped: dict[int, int] = {}

    def body(mon: Monitor, rank: int) -> None:
        for step in range(1, 40):
            if rank == 1 and step == 5:
                return  # dies before the reduction at step 6
            mon.log_step(step, loss=math.nan if (rank == 0 and step == 3) else 1.0)
            if mon.should_stop:
                stopped[rank] = step
                break
        mon.close()

    config = {"aggregate_every": 2, "aggregate_timeout": 0.5, "alerts": {"stop_on": ["nonfinite"]}}
    run_ranks(2, tmp_path, body, config=config)
    assert stopped == {0: 6}
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["aggregation"]["failed_at_step"] == 6
    assert info["last_step"] == 6


def test_perplexity_of_reduced_steps_is_exp_of_the_reduced_loss_once(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        for step in range(1, 11):
            mon.log_step(step, loss=1.0 + rank)  # rank 0: 1.0, rank 1: 2.0 -> mean 1.5
        mon.close()

    config = {"aggregate_every": 5, "perplexity": True, "per_rank": True}
    run_ranks(2, tmp_path, body, config=config)
    read = scalars(tmp_path)
    assert read["train/perplexity"] == [(s, pytest.approx(math.exp(1.5))) for s in range(1, 11)]
    assert not [tag for tag in read if "perplexity" in tag and tag != "train/perplexity"]
    for rank in (0, 1):  # each rank's own folder: its own loss's perplexity, once per step
        own = scalars(tmp_path / f"rank_{rank}")["train/perplexity"]
        assert own == [(s, pytest.approx(math.exp(1.0 + rank))) for s in range(1, 11)]


def test_values_logged_under_derived_tags_replace_them_before_and_after_reduction(
    tmp_path: Path,
) -> None:
    """One point per tag per step under reduction too: each rank's own step time and
    throughput are reduced as the built-ins declare (max, sum), the caller's perplexity
    (mean) replaces exp of the reduced loss."""

    def body(mon: Monitor, rank: int) -> None:
        for step in range(1, 11):
            own = {
                "perf/step_time_ms": 6.0 + rank,
                "perf/samples_per_s": 100.0 * (rank + 1),
                "train/perplexity": 3.0 + rank,
            }
            mon.log_step(step, loss=1.0, samples=8, **own)
        mon.close()

    config = {"aggregate_every": 5, "perplexity": True, "per_rank": True}
    run_ranks(2, tmp_path, body, config=config)
    read = scalars(tmp_path)
    steps = list(range(1, 11))
    assert read["perf/step_time_ms"] == [(s, pytest.approx(7.0)) for s in steps]
    assert read["perf/samples_per_s"] == [(s, pytest.approx(300.0)) for s in steps]
    assert read["train/perplexity"] == [(s, pytest.approx(3.5)) for s in steps]
    assert read["ranks/step_time_ms_min"] == [(s, pytest.approx(6.0)) for s in steps]
    for rank in (0, 1):
        own = scalars(tmp_path / f"rank_{rank}")
        assert own["perf/step_time_ms"] == [(s, pytest.approx(6.0 + rank)) for s in steps]
        assert own["train/perplexity"] == [(s, pytest.approx(3.0 + rank)) for s in steps]


def test_a_rank_that_reaches_its_monitor_late_still_joins_the_run(tmp_path: Path) -> None:
    """Ranks make their Monitor at different times (imports, data, compiling). With a
    short aggregate_timeout (3 s) a rank 4 s late made the start-up agreement on the run
    folder fail and every rank wrote apart; the start waits at least START_TIMEOUT."""
    group = LocalGroup(2)
    monitors: list[Optional[Monitor]] = [None, None]

    def rank_main(rank: int) -> None:
        if rank == 1:
            time.sleep(4.0)  # longer than aggregate_timeout
        mon = Monitor(tmp_path, {**QUIET, "aggregate_timeout": 3}, collective=group.member(rank))
        monitors[rank] = mon
        with mon:
            for step in range(1, 11):
                mon.log_step(step, loss=local_loss(rank, step))

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert all(m is not None for m in monitors)
    assert monitors[0].logdir == monitors[1].logdir  # type: ignore[union-attr]
    loss = scalars(tmp_path)["train/loss"]
    assert loss[-1][1] == pytest.approx((local_loss(0, 10) + local_loss(1, 10)) / 2, rel=1e-6)


def test_an_alert_gathers_every_ranks_forensics_once_and_names_the_bad_ranks_batch(
    tmp_path: Path,
) -> None:
    """Rank 1's loss jumps at step 45: the spike is raised on rank 0 from the reduced
    loss, rank 1's own recorder answers in the next reduction, and the alert names rank
    1's batch (its sample ids, not rank 0's), though the run outpaces the pipeline."""
    group = LocalGroup(2)

    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 61):
                loss = 1.0 + 0.01 * ((step * 7 + rank) % 5)
                if rank == 1 and step == 45:
                    loss = 500.0
                mon.log_sample_ids(step, [1000 * rank + 10 * step + k for k in range(3)])
                mon.log_step(step, loss=loss, grad_norm=loss, samples=3)

    run_ranks(2, tmp_path, body, config={"aggregate_every": 10}, group=group)
    (file,) = tmp_path.rglob("alerts.jsonl")
    alerts = [json.loads(line) for line in file.read_text().splitlines()]
    spike = next(a for a in alerts if a["rule"] == "spike")
    assert (spike["step"], spike["rank"]) == (45, 1)
    forensics = spike["forensics"]
    assert forensics["ranks"] == [0, 1]
    assert forensics["blame"] == 1
    assert spike["sample_ids"] == [1450, 1451, 1452]
    assert [(m["rank"], m["onset"]) for m in forensics["movers"] if m["name"] == "loss"] == [
        (1, 45)
    ]
    assert json.loads((file.parent / "skip.json").read_text())["samples"] == [1450, 1451, 1452]
