"""The straggler rule on constructed interval values."""

from __future__ import annotations

import pytest

from mindwatch.rules.straggler import StragglerRule, StragglerSettings


def _interval(wait_max: float, wait_min: float, step_ms: float, argmax: int) -> dict[str, float]:
    return {
        "straggler/step_ms": step_ms,
        "ranks/input_wait_ms_max": wait_max,
        "ranks/input_wait_ms_min": wait_min,
        "ranks/input_wait_ms_argmax": float(argmax),
    }


def test_names_the_rank_after_persistence_in_intervals_and_time() -> None:
    rule = StragglerRule(StragglerSettings(interval=10, min_seconds=10.0, baseline=1))
    found = []
    for i in range(20):
        low = i >= 5  # 300 ms steps, 10 per interval: 3 s of training per interval
        values = _interval(200.0 if low else 2.0, 1.0, 300.0, 1)
        found += [(i, f) for f in rule.observe(10 * (i + 1), values)]
    assert len(found) == 1
    i, finding = found[0]
    assert i == 5 + 3  # 4 low intervals: 12 s >= 10 s (3 intervals were only 9 s)
    assert finding.rank == 1
    assert finding.extra["part"] == "input pipeline"
    assert finding.value is not None
    assert finding.value < 0.4


def test_healthy_and_short_hiccups_are_quiet() -> None:
    rule = StragglerRule(StragglerSettings(interval=10))
    for i in range(50):
        hiccup = i % 7 == 6  # one slow interval now and then
        values = _interval(250.0 if hiccup else 3.0, 1.0, 300.0, i % 2)
        assert rule.observe(10 * (i + 1), values) == []


def test_steps_without_interval_values_are_ignored() -> None:
    rule = StragglerRule(StragglerSettings())
    assert rule.observe(1, {"perf/data_wait_ms": 500.0}) == []


def test_one_healthy_interval_inside_a_slow_episode_does_not_reset_it() -> None:
    rule = StragglerRule(StragglerSettings(interval=10, min_seconds=1.0, baseline=1))
    pattern = [False] * 4 + [True, True, False, True] + [False] * 5 + [True] * 3
    found = []
    for i, low in enumerate(pattern):
        values = _interval(40.0 if low else 0.5, 0.3, 50.0, 3)
        found += [(i, f) for f in rule.observe(10 * (i + 1), values)]
    # 3 low of the last 4 at interval 7; the second episode (after 4 healthy) at 15.
    assert [(i, f.rank) for i, f in found] == [(7, 3), (15, 3)]
    assert found[0][1].message.startswith("rank 3 is the straggler")


def test_a_job_whose_every_pipeline_is_the_bottleneck_is_its_own_baseline() -> None:
    """One rank waits most of each step from the start (its batch comes last, the
    others' buffers are full): the job's pace. A rank that then slows is a straggler."""
    rule = StragglerRule(StragglerSettings(interval=10))
    found = []
    for i in range(30):
        wait_max, step_ms = (18.0, 30.0) if i < 20 else (85.0, 90.0)
        values = _interval(wait_max, 0.3, step_ms, i % 4 if i < 20 else 3)
        found += [(i, f) for f in rule.observe(10 * (i + 1), values)]
    assert [(i, f.rank) for i, f in found] == [(22, 3)]
    assert found[0][1].extra["baseline_gap_ms"] == pytest.approx(17.7)


def _bench(slowest: float, fastest: float, argmax: int) -> dict[str, float]:
    return {
        "straggler/bench_ms": slowest,
        "ranks/bench_ms_max": slowest,
        "ranks/bench_ms_min": fastest,
        "ranks/bench_ms_argmax": float(argmax),
    }


def test_a_compute_straggler_needs_runs_in_a_row_naming_the_same_rank() -> None:
    rule = StragglerRule(StragglerSettings())  # skip 2, 3 runs in a row below 0.5
    runs = [(1.0, 1, False)] * 2 + [(3.0, 1, False), (3.0, 2, False), (3.0, 1, False)]
    runs += [(1.1, 1, False), (3.0, 1, False), (3.0, 1, False), (3.0, 1, True)]
    runs += [(3.0, 1, False), (1.0, 0, False)] + [(4.0, 2, False)] * 2 + [(4.0, 2, True)]
    for i, (slowest, argmax, named) in enumerate(runs):
        found = rule.observe(10 * (i + 1), _bench(slowest, 1.0, argmax))
        assert [f.rank for f in found] == ([argmax] if named else []), i
        for finding in found:
            assert finding.extra["part"] == "compute"
            assert finding.value == pytest.approx(1.0 / slowest)
            assert finding.message.startswith(f"rank {argmax} is the straggler: its compute")


# (score, slowest rank) of every run of three healthy 2-rank jobs under msrun (CPU, a
# run every 10 steps), recorded on this 2-core machine while a copy of the test suite ran
# beside them: single runs down to 0.38, never three in a row below 0.5 on one rank.
# fmt: off
SHARED_HOST = [
    [(0.53, 0), (0.95, 1), (0.88, 1), (0.9, 0), (0.92, 1), (0.48, 1), (0.96, 0), (0.86, 0),
     (0.76, 1), (0.69, 1), (0.54, 1), (0.62, 0), (0.98, 1), (0.54, 0), (0.76, 1)],
    [(0.74, 0), (0.59, 0), (0.79, 0), (0.95, 1), (0.46, 1), (0.72, 1), (0.38, 1), (0.86, 1),
     (0.82, 0), (0.54, 0), (0.66, 1), (0.9, 0), (0.85, 1), (0.73, 1), (0.5, 0), (0.99, 0)],
    [(0.54, 1), (0.82, 1), (0.55, 1), (0.71, 1), (0.51, 1), (0.71, 1), (0.71, 1), (0.84, 1),
     (0.98, 1), (0.9, 1), (0.97, 1), (0.45, 1), (0.99, 1), (0.54, 0), (0.46, 1)],
]
# fmt: on


@pytest.mark.parametrize("runs", SHARED_HOST)
def test_the_noise_of_a_shared_host_does_not_name_a_compute_straggler(
    runs: list[tuple[float, int]],
) -> None:
    rule = StragglerRule(StragglerSettings())
    for i, (score, argmax) in enumerate(runs):
        assert rule.observe(10 * (i + 1), _bench(1.0 / score, 1.0, argmax)) == []


def test_with_many_ranks_the_slowest_is_judged_against_the_others_mean() -> None:
    """Four ranks: one fast rank for a moment is no straggler (min / max would be 0.33),
    one rank three times slower than the rest is."""
    rule = StragglerRule(StragglerSettings(skip=0, bench_rounds=1))

    def run(times: list[float]) -> dict[str, float]:
        slowest = max(times)
        values = _bench(slowest, min(times), times.index(slowest))
        return {**values, "ranks/bench_ms_mean": sum(times) / 4, "straggler/bench_ranks": 4.0}

    assert rule.observe(10, run([0.5, 1.0, 1.0, 1.5])) == []  # others: 0.83, score 0.56
    (finding,) = rule.observe(20, run([1.0, 1.0, 1.0, 3.0]))
    assert finding.rank == 3
    assert finding.value == pytest.approx(1.0 / 3.0)
    assert "against 1 ms on the other ranks" in finding.message
