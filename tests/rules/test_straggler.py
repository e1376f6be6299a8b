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
    assert finding.value < 0.75


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
