"""The straggler rule on constructed interval values.

The input part across the class of jobs: steps of 1 ms to 200 ms (at fast steps the
``min_seconds`` of training take many more intervals than ``intervals``), every
``intervals`` from 1 to 5, healthy intervals inside an episode before and after its
alert, episodes that end and a second one that alerts again, the state saved and
restored in the middle of an episode; the values of each finding asserted (score,
rank, intervals, seconds).
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

import pytest

from mindwatch.rules.base import Finding
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


# --- The input part across the class of jobs -------------------------------------------
#
# A job whose healthy step takes STEP ms: the skipped and baseline intervals healthy (2 +
# 5 with the defaults), then a pattern of intervals, True where rank SLOW's pipeline is
# 3x slower than the step (it waits two steps for each batch, the step is 3x as long:
# score 0). An interval is 10 steps, so a slow one lasts 30 * STEP ms of training.

STEP_LENGTHS = [1.0, 4.0, 13.0, 30.0, 200.0]
WARMUP = 7  # the 2 skipped intervals and the 5 of the baseline
SLOW = 1


def _slow_job(step_ms: float, pattern: list[bool], ranks: int = 2) -> list[dict[str, float]]:
    healthy = [False] * WARMUP + pattern
    return [
        _interval(2.0 * step_ms + 0.1, 0.1, 3.0 * step_ms, SLOW)
        if slow
        else _interval(0.3, 0.1, step_ms, i % ranks)
        for i, slow in enumerate(healthy)
    ]


def _judge(rule: StragglerRule, job: list[dict[str, float]]) -> list[tuple[int, Finding]]:
    """(index in the pattern, finding) of every finding."""
    found = []
    for i, values in enumerate(job):
        found += [(i - WARMUP, f) for f in rule.observe(10 * (i + 1), values)]
    return found


def _needed(step_ms: float, intervals: int) -> int:
    """Slow intervals in a row before the alert: `intervals` of them, and enough for
    `min_seconds` (2 s) of training (each lasts 10 steps of 3 * step_ms)."""
    return max(intervals, math.ceil(MIN_MS / (30.0 * step_ms)))


# The needed slow intervals with the defaults, written out: what the old window of
# intervals + 1 judgements could never reach below 25 ms steps (with its 1 s).
MIN_MS = 2000.0
NEEDED = {1.0: 67, 4.0: 17, 13.0: 6, 30.0: 3, 200.0: 3}


def test_needed_intervals_with_the_defaults() -> None:
    assert StragglerSettings().min_seconds * 1000.0 == MIN_MS
    assert {s: _needed(s, 3) for s in STEP_LENGTHS} == NEEDED


@pytest.mark.parametrize("intervals", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("step_ms", STEP_LENGTHS)
def test_a_slow_pipeline_is_named_at_every_step_length(step_ms: float, intervals: int) -> None:
    needed = _needed(step_ms, intervals)
    rule = StragglerRule(StragglerSettings(intervals=intervals))
    ((i, finding),) = _judge(rule, _slow_job(step_ms, [True] * (needed + 20)))
    assert i == needed - 1  # on the interval that completes both counts, once
    assert finding.rank == SLOW
    assert finding.value == 0.0
    assert finding.extra["intervals"] == needed
    assert finding.extra["seconds"] == pytest.approx(needed * 30.0 * step_ms / 1000.0, abs=1e-3)
    assert finding.extra["seconds"] >= MIN_MS / 1000.0
    assert finding.extra["healthy_intervals"] == 0
    assert finding.extra["step_ms"] == 3.0 * step_ms
    assert f"for {needed} intervals, {needed * 30.0 * step_ms / 1000.0:.1f} s" in finding.message


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("intervals", [2, 3, 5])
@pytest.mark.parametrize("step_ms", STEP_LENGTHS)
def test_a_healthy_interval_inside_an_episode_before_its_alert_does_not_end_it(
    step_ms: float, intervals: int, where: str
) -> None:
    """One healthy interval after the first, a middle or the last slow interval before
    the alert: the alert comes one interval later, counting the same slow intervals
    (an episode ended by it would need all of them again after it)."""
    needed = _needed(step_ms, intervals)
    before = {"first": 1, "middle": max(1, needed // 2), "last": needed - 1}[where]
    rule = StragglerRule(StragglerSettings(intervals=intervals))
    pattern = [True] * before + [False] + [True] * (needed + 20)
    ((i, finding),) = _judge(rule, _slow_job(step_ms, pattern))
    assert i == needed  # the slow intervals before the healthy one count
    assert (finding.extra["intervals"], finding.extra["healthy_intervals"]) == (needed, 1)
    assert finding.rank == SLOW


@pytest.mark.parametrize("step_ms", STEP_LENGTHS)
def test_healthy_intervals_tolerated_in_proportion_to_the_slow_ones(step_ms: float) -> None:
    """``min_seconds`` set so that 10 slow intervals are needed at each step length.
    Two healthy intervals after 4 slow ones (a pause let the slow pipeline's buffer
    fill) are tolerated with intervals 3: one, plus one for the 3 slow ones after the
    first. Two healthy ones after 3 slow ones end the episode."""
    settings = StragglerSettings(min_seconds=10 * 30.0 * step_ms / 1000.0)
    rule = StragglerRule(settings)
    pattern = [True] * 4 + [False] * 2 + [True] * 20
    ((i, finding),) = _judge(rule, _slow_job(step_ms, pattern))
    assert (i, finding.extra["intervals"], finding.extra["healthy_intervals"]) == (11, 10, 2)
    rule = StragglerRule(settings)
    pattern = [True] * 3 + [False] * 2 + [True] * 20
    ((i, finding),) = _judge(rule, _slow_job(step_ms, pattern))
    # Ended: the episode after the two healthy intervals counts from 0.
    assert (i, finding.extra["intervals"], finding.extra["healthy_intervals"]) == (14, 10, 0)


@pytest.mark.parametrize("intervals", [2, 3, 4, 5])
@pytest.mark.parametrize("step_ms", STEP_LENGTHS)
def test_scattered_slow_intervals_never_add_up(step_ms: float, intervals: int) -> None:
    """One slow interval in three (a hiccup every 30 steps) for 600 intervals: at fast
    steps that is many seconds of slow intervals, each a short episode of its own; and
    one in two with intervals >= 3 (below the density of intervals in intervals + 1)."""
    rule = StragglerRule(StragglerSettings(intervals=intervals))
    assert _judge(rule, _slow_job(step_ms, [True, False, False] * 200)) == []
    if intervals >= 3:
        rule = StragglerRule(StragglerSettings(intervals=intervals))
        assert _judge(rule, _slow_job(step_ms, [True, False] * 300)) == []


# Healthy intervals after which an episode of NEEDED + 10 slow intervals ends (intervals
# 3, min_seconds 2): more than one healthy interval plus one per 3 slow ones after the
# first (27, 10, 7, 6, 6), or 4 healthy intervals in a row spanning 2 s of training (200,
# 50, 16, 7, 4 intervals of 10, 40, 130, 300, 2000 ms), whichever comes first.
ENDS_AFTER = {1.0: 27, 4.0: 10, 13.0: 7, 30.0: 6, 200.0: 4}


@pytest.mark.parametrize("step_ms", STEP_LENGTHS)
def test_an_episode_ends_and_the_next_one_alerts_again(step_ms: float) -> None:
    needed, ends = NEEDED[step_ms], ENDS_AFTER[step_ms]
    first = [True] * (needed + 10)
    # One healthy interval short of the end: the slowdown coming back is the same episode.
    rule = StragglerRule(StragglerSettings())
    found = _judge(rule, _slow_job(step_ms, first + [False] * (ends - 1) + [True] * (needed + 20)))
    assert [i for i, _ in found] == [needed - 1]
    # The end: the next slowdown is a new episode, named after as many slow intervals.
    rule = StragglerRule(StragglerSettings())
    pattern = first + [False] * ends + [True] * (needed + 20)
    found = _judge(rule, _slow_job(step_ms, pattern))
    again = len(first) + ends + needed - 1
    assert [(i, f.extra["intervals"], f.extra["healthy_intervals"]) for i, f in found] == [
        (needed - 1, needed, 0),
        (again, needed, 0),
    ]


@pytest.mark.parametrize(
    ("step_ms", "calm_not_enough", "calm_enough"),
    [(1.0, 199, 200), (30.0, 6, 7), (200.0, 3, 4)],
)
def test_a_long_episode_ends_once_healthy_for_intervals_and_seconds(
    step_ms: float, calm_not_enough: int, calm_enough: int
) -> None:
    """1,000 slow intervals tolerate 334 healthy ones; healthy for 4 intervals in a row
    and 2 s of training ends the episode: at 1 ms steps 200 intervals (4 are 40 ms), at
    30 ms steps 7 (6 are 1.8 s), at 200 ms steps 4 intervals (3 are already 6 s)."""
    first, again = [True] * 1000, [True] * (NEEDED[step_ms] + 20)
    rule = StragglerRule(StragglerSettings())
    found = _judge(rule, _slow_job(step_ms, first + [False] * calm_not_enough + again))
    assert len(found) == 1
    rule = StragglerRule(StragglerSettings())
    found = _judge(rule, _slow_job(step_ms, first + [False] * calm_enough + again))
    assert [i for i, _ in found] == [NEEDED[step_ms] - 1, 1000 + calm_enough + NEEDED[step_ms] - 1]


def _same(found: list[tuple[int, Finding]]) -> list[tuple[Any, ...]]:
    return [(i, f.rank, f.value, f.message, f.extra) for i, f in found]


@pytest.mark.parametrize("step_ms", STEP_LENGTHS)
def test_the_state_survives_a_restart_in_the_middle_of_an_episode(step_ms: float) -> None:
    """Saved as JSON (as ``mindwatch watch --once`` keeps it) and restored into a new
    rule at every interval of a pattern with a healthy interval inside the episode and
    a recovery: the same findings as one rule that saw everything."""
    needed = NEEDED[step_ms]
    pattern = [True] * 2 + [False] + [True] * needed + [False] * ENDS_AFTER[step_ms]
    pattern += [True] * (needed + 2)
    job = _slow_job(step_ms, pattern)
    whole = _judge(StragglerRule(StragglerSettings()), job)
    assert len(whole) == 2
    for cut in range(WARMUP, len(job)):
        first = StragglerRule(StragglerSettings())
        found = _judge(first, job[:cut])
        second = StragglerRule(StragglerSettings())
        second.load_state_dict(json.loads(json.dumps(first.state_dict())))
        for i, values in enumerate(job[cut:], start=cut):
            found += [(i - WARMUP, f) for f in second.observe(10 * (i + 1), values)]
        assert _same(found) == _same(whole), cut


def test_a_state_saved_by_the_window_version_is_ignored() -> None:
    """The earlier version saved its window of judgements as lists (``low``,
    ``low_ms``): restoring one neither fails nor invents an episode."""
    rule = StragglerRule(StragglerSettings())
    rule.load_state_dict({"seen": 9, "low": [1.0, 1.0, 0.0], "low_ms": [300.0, 300.0, 0.0]})
    assert (rule.seen, rule.episode_low, rule.episode_low_ms) == (9, 0, 0.0)


# --- The score's parts --------------------------------------------------------------------


def _baseline_then(
    rule: StragglerRule, slow: list[dict[str, float]], base: Optional[list[dict[str, float]]] = None
) -> list[Finding]:
    """Two skipped intervals, the baseline's (healthy: a 30 ms step, a 0.3 ms gap), then
    ``slow``; the findings."""
    healthy = _interval(0.5, 0.2, 30.0, 0)
    job = [healthy] * 2 + (base or [healthy] * 5) + slow
    return [f for i, values in enumerate(job) for f in rule.observe(10 * (i + 1), values)]


@pytest.mark.parametrize(("slower", "score"), [(2.3, 0.0), (1.8, 0.2)])
def test_the_score_is_the_extra_wait_over_the_runs_step(slower: float, score: float) -> None:
    """A job 2.3x (1.8x) slower through rank 1's data: its wait grows by 1.3 (0.8) of
    the run's 30 ms step. Against the run's step the score is 0 (0.2); against the
    interval's own, stretched step it would be 0.43 (0.56) and name nothing."""
    extra_ms = (slower - 1.0) * 30.0
    slow = _interval(0.5 + extra_ms, 0.2, 30.0 + extra_ms, 1)
    rule = StragglerRule(StragglerSettings(interval=10, min_seconds=1.0))
    found = _baseline_then(rule, [slow] * 4)
    (finding,) = found
    assert finding.rank == 1
    assert finding.value == pytest.approx(score)
    assert finding.extra["score"] == pytest.approx(score)
    assert finding.extra["baseline_step_ms"] == 30.0
    assert finding.extra["baseline_gap_ms"] == pytest.approx(0.3)
    assert f"score {score:.2f} below 0.40" in finding.message


def test_the_baseline_is_the_median_of_its_intervals() -> None:
    """One baseline interval with a 60 ms gap and a 300 ms step (a checkpoint, a
    compile): the medians keep the run's own 0.3 ms and 30 ms. The slowdown (a 21 ms
    rise, 70 % of the step) scores 0.3; against means (12.2 ms, 84 ms) it would score
    0.7 and name nothing."""
    healthy = _interval(0.5, 0.2, 30.0, 0)
    base = [healthy, healthy, _interval(60.2, 0.2, 300.0, 1), healthy, healthy]
    slow = _interval(21.5, 0.2, 51.0, 2)
    rule = StragglerRule(StragglerSettings())
    (finding,) = _baseline_then(rule, [slow] * 4, base)
    assert finding.extra["baseline_gap_ms"] == pytest.approx(0.3)
    assert finding.extra["baseline_step_ms"] == 30.0
    assert finding.value == pytest.approx(0.3)


def test_the_named_rank_is_the_argmax_among_eight() -> None:
    """Eight ranks, rank 5 slow, rank 2 the fastest: the finding names 5 (not its
    neighbours, not the fastest)."""
    slow = {
        **_interval(40.2, 0.2, 45.0, 5),
        "ranks/input_wait_ms_mean": 5.2,
        "ranks/input_wait_ms_std": 13.0,
    }
    rule = StragglerRule(StragglerSettings())
    (finding,) = _baseline_then(rule, [slow] * 8)
    assert finding.rank == 5
    assert finding.message.startswith("rank 5 is the straggler")
    assert finding.extra["wait_ms"] == [0.2, 40.2]


@pytest.mark.parametrize("score", [0.39, 0.41])
def test_the_threshold_is_strict(score: float) -> None:
    """A score just below the threshold is low, one just above is not."""
    rise = (1.0 - score) * 30.0
    slow = _interval(0.5 + rise, 0.2, 30.0 + rise, 1)
    found = _baseline_then(StragglerRule(StragglerSettings()), [slow] * 8)
    assert [f.value for f in found] == ([pytest.approx(score)] if score < 0.4 else [])


# The intervals (wait_max, wait_min, argmax, step_ms) of the noisiest healthy job
# measured at fast steps: 2 ranks under msrun, each store answering in 20 ms (the job's
# bottleneck), 400 steps of about 20 ms, on this 2-core machine at load 20. Five
# intervals score below 0.4 (down to 0.13), never 3 in a row; a rule whose episodes
# tolerated any number of healthy intervals would add them up to 1 s and name rank 1.
# fmt: off
NOISY_INPUT_BOUND = [
    (0.16, 0.15, 1, 23.68), (0.13, 0.1, 0, 14.99), (0.16, 0.16, 0, 20.16),
    (0.16, 0.15, 0, 16.45), (1.33, 0.22, 0, 17.44), (7.31, 6.78, 1, 18.26),
    (12.19, 0.56, 1, 21.54), (1.4, 0.24, 1, 18.27), (5.37, 2.86, 1, 16.22),
    (8.56, 0.53, 1, 18.59), (11.23, 1.63, 1, 19.64), (2.89, 1.56, 1, 15.33),
    (10.81, 3.74, 1, 19.69), (11.35, 2.82, 1, 19.37), (8.41, 0.19, 1, 19.51),
    (8.92, 0.17, 1, 19.49), (8.76, 0.17, 1, 20.72), (5.66, 0.21, 1, 22.3),
    (0.19, 0.18, 1, 16.94), (0.19, 0.18, 0, 14.45), (12.25, 8.01, 0, 20.74),
    (11.77, 6.95, 0, 20.84), (12.98, 12.01, 0, 20.03), (0.19, 0.18, 1, 21.13),
    (1.94, 0.17, 0, 14.93), (0.2, 0.17, 0, 25.76), (0.45, 0.19, 1, 19.02),
    (0.21, 0.2, 0, 31.66), (0.22, 0.19, 1, 17.1), (7.2, 0.15, 1, 17.1),
    (16.65, 0.18, 1, 21.46), (0.2, 0.19, 1, 26.12), (0.17, 0.17, 1, 10.53),
    (17.18, 5.59, 1, 21.85), (14.58, 0.16, 1, 19.98), (4.78, 0.16, 1, 21.16),
    (5.42, 0.16, 1, 16.62), (15.69, 0.16, 1, 21.57), (14.62, 0.17, 1, 23.39),
    (0.18, 0.17, 1, 14.66),
]
# fmt: on


def test_the_noise_of_a_healthy_input_bound_job_at_fast_steps_names_nobody() -> None:
    rule = StragglerRule(StragglerSettings())
    episodes = []  # the low intervals of each episode, when it ends
    for i, (wait_max, wait_min, argmax, step_ms) in enumerate(NOISY_INPUT_BOUND):
        before = rule.episode_low
        assert rule.observe(10 * (i + 1), _interval(wait_max, wait_min, step_ms, argmax)) == []
        if before and not rule.episode_low:
            episodes.append(before)
    # Two short episodes (1 and 2 low intervals, each ended by its allowance of healthy
    # ones) and a third of 2 still open at the job's end.
    assert (episodes, rule.episode_low) == ([1, 2], 2)


def test_the_longest_healthy_stall_seen_names_nobody_with_the_defaults() -> None:
    """The healthy 2-rank job (20 ms stores, 21.6 ms steps) that warned under the whole
    suite's load: rank 1's data wait 15.4 ms against 0.24 ms for 5 intervals in a row,
    1.06 s. The default 2 s is twice that; the 1 s that was the default named rank 1."""
    base = [_interval(0.5, 0.2, 21.6, i % 2) for i in range(5)]
    stall = [_interval(15.4, 0.24, 21.6, 1)] * 5 + [_interval(0.5, 0.2, 21.6, 0)] * 10
    assert _baseline_then(StragglerRule(StragglerSettings()), stall, base) == []
    (finding,) = _baseline_then(StragglerRule(StragglerSettings(min_seconds=1.0)), stall, base)
    assert (finding.rank, finding.extra["intervals"]) == (1, 5)
    assert finding.extra["seconds"] == pytest.approx(1.08)
