"""``throughput_drop``: the part of the step it names (input pipeline or compute), the
rank it names under data parallelism, what the alert says, and a drop after the run
sped up. The per-rank values are reduced by the aggregator's own reduction
(``reduce_values``), as rank 0 sees them."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pytest

from mindwatch.aggregate.reductions import Reduction, reduce_values, spread_tags
from mindwatch.common.i18n import set_language
from mindwatch.rules.base import Finding
from mindwatch.rules.throughput import ThroughputDropRule, ThroughputDropSettings

SPEED = "perf/samples_per_s"


@pytest.fixture(autouse=True)
def _english() -> None:
    set_language("en")


def feed(series: list[dict[str, float]], **settings: Any) -> list[tuple[int, Finding]]:
    rule = ThroughputDropRule(ThroughputDropSettings(**settings))
    found = []
    for step, values in enumerate(series, start=1):
        found += [(step, f) for f in rule.observe(step, values)]
    return found


def jitter(i: int) -> float:
    """A small steady wobble: the baseline has a spread, and no two points tie."""
    return 1.0 + 0.01 * (i % 3)


def reduced(waits: list[float], computes: list[float]) -> dict[str, float]:
    """What rank 0 judges at one step of a data-parallel job: the job's step time and
    speed (the slowest rank's step holds everyone), and the spread of ``data_wait_ms``
    and ``compute_ms`` over the ranks (``ranks/<name>_max``, ``_min``, ``_argmax``),
    reduced by the aggregator."""
    out: dict[str, float] = {}
    for tag, per_rank in (("perf/data_wait_ms", waits), ("perf/compute_ms", computes)):
        values = np.array(per_rank, dtype=np.float64)[:, None]
        result, spread, _ = reduce_values(
            values, np.ones_like(values, dtype=bool), Reduction("max")
        )
        assert spread is not None
        out[tag] = float(result[0])
        for name, row in zip(spread_tags(tag), spread[:, 0]):
            out[name] = float(row)
    step_ms = max(w + c for w, c in zip(waits, computes))
    out["perf/step_time_ms"] = step_ms
    out[SPEED] = 64_000.0 / step_ms  # 64 samples a step over the job
    return out


def job(world: int, slow: list[int], wait_ms: float, compute_ms: float) -> list[dict[str, float]]:
    """600 healthy steps (2 ms data wait, 60 ms compute on every rank), then 200 steps
    where the ranks in ``slow`` wait ``wait_ms`` for data and every rank computes
    ``compute_ms``, except that under synchronous data parallelism the others also
    wait for the slow ranks inside their compute (the gradient all-reduce)."""
    series = []
    for i in range(800):
        k = jitter(i)
        if i < 600:
            series.append(reduced([2.0 * k] * world, [60.0 * k] * world))
            continue
        waits = [wait_ms * k if r in slow else 2.0 * k for r in range(world)]
        held = max(waits) - 2.0 * k  # what the others wait for in the collective
        computes = [compute_ms * k + (0.0 if r in slow else held) for r in range(world)]
        series.append(reduced(waits, computes))
    return series


@pytest.mark.parametrize(("world", "slow"), [(3, [2]), (5, [1]), (8, [6]), (8, [3, 6])])
def test_a_slow_input_pipeline_on_one_rank_is_named_with_its_rank(
    world: int, slow: list[int]
) -> None:
    """One rank's data wait grows from 2 to 90 ms (two ranks tie at 90 in the last case:
    the lowest is named, as ``ranks/<name>_argmax`` does); the other ranks' compute
    grows meanwhile, their least (the slow rank's own) does not: the input pipeline is
    the part named, from the job's largest wait, with the slow rank."""
    ((step, finding),) = feed(job(world, slow, 90.0, 60.0))
    k = jitter(0)  # the medians before and during the drop are points of jitter 1.01
    assert finding.rank == min(slow)
    assert finding.extra["part"] == "input pipeline"
    assert finding.extra["part_metric"] == "ranks/data_wait_ms_max"
    assert finding.extra["part_ms"] == pytest.approx([2.0 * (k + 0.01), 90.0 * (k + 0.01)])
    assert finding.message.endswith(
        ": the input pipeline is slower (ranks/data_wait_ms_max 2.02 -> 90.9 ms)"
    )
    assert 600 < step <= 640


def test_slower_compute_on_every_rank_is_named_without_a_rank() -> None:
    """Every rank computes 160 ms instead of 60 (a slower kernel, a busy card): the
    least compute over the ranks grows, the data wait does not. The rank of a slow
    compute is the straggler rule's business: none is named here."""
    ((_, finding),) = feed(job(4, [], 2.0, 160.0))
    assert finding.rank is None
    assert finding.extra["part"] == "compute"
    assert finding.extra["part_metric"] == "ranks/compute_ms_min"
    assert finding.extra["part_ms"] == pytest.approx([60.6, 161.6])
    assert finding.message.endswith(": compute is slower (ranks/compute_ms_min 60.6 -> 162 ms)")


def single(wait_ms: float, compute_ms: float, i: int) -> dict[str, float]:
    k = jitter(i)
    step_ms = (wait_ms + compute_ms) * k
    return {
        SPEED: 16_000.0 / step_ms,
        "perf/step_time_ms": step_ms,
        "perf/data_wait_ms": wait_ms * k,
        "perf/compute_ms": compute_ms * k,
    }


def test_one_process_names_the_part_from_its_own_values_and_the_alert_in_full() -> None:
    """Without the reduction's spread the process's own ``perf/data_wait_ms`` and
    ``perf/compute_ms`` are read; a step that lacks them (or logs NaN) is no evidence
    either way. The message and the fields of the alert, in full."""
    series = [single(2.0, 60.0, i) for i in range(600)]
    series += [single(100.0, 60.0, i) for i in range(600, 800)]
    for i in range(0, 800, 7):  # every seventh step without the parts
        series[i] = {k: v for k, v in series[i].items() if k in (SPEED, "perf/step_time_ms")}
    series[605]["perf/data_wait_ms"] = float("nan")
    ((step, finding),) = feed(series)
    # The drop is first seen at step 607 (the 7th low point makes the median of the
    # last 12 low); 2 s of ~160 ms steps later, counted from the step before it, the
    # 13th point fires: the 12 points before that one and the 12 since.
    assert step == 607 + 12
    assert finding.rank is None
    assert finding.extra == {
        "seconds": round(sum(160.0 * jitter(i) for i in range(606, 619)) / 1000.0, 3),
        "points": 24,
        "part": "input pipeline",
        "part_metric": "perf/data_wait_ms",
        "part_ms": pytest.approx([2.02, 100.0]),
    }
    assert finding.extra["seconds"] == 2.099
    assert finding.value == pytest.approx(100.0)  # 16000 / 160: the median point
    assert finding.baseline == pytest.approx(16_000 / (62 * 1.01))
    assert finding.message == (
        "perf/samples_per_s fell to 100 (median of the last 24), 61% below its baseline "
        "255.5: the input pipeline is slower (perf/data_wait_ms 2.02 -> 100 ms)"
    )


def test_parts_that_did_not_grow_are_not_named() -> None:
    """The speed drops with neither part logged as grown (the time went elsewhere: a
    checkpoint, the host): the alert says so much and names no part."""
    series = [single(2.0, 60.0, i) for i in range(600)]
    series += [{**single(2.0, 60.0, i), SPEED: 100.0 * jitter(i)} for i in range(600, 900)]
    ((_, finding),) = feed(series)
    assert "part" not in finding.extra
    assert finding.message.endswith("below its baseline 255.5")


@pytest.mark.parametrize("after", [1.0, 0.7, 0.55])
@pytest.mark.parametrize(("slow", "fast"), [(300, 600), (1000, 400)])
def test_a_drop_after_the_run_sped_up_is_measured_against_the_new_speed(
    after: float, slow: int, fast: int
) -> None:
    """The run doubles its speed after ``slow`` steps (the data cache warm, say), holds
    it for ``fast`` steps (more than the 200-point window), then falls to ``after`` of
    that. Judged against the baseline of the fast steps (2,000), 1,100 and 1,400 are
    drops of 45% and 30%; only the first is beyond the 40% that alerts. (The cheap first
    test once compared every point with the baseline of the first judged point, 1,000,
    and let the drop pass; a level taken from more than the window would too.)"""
    speeds = [1000.0] * slow + [2000.0] * fast + [2000.0 * after] * 600
    series = [
        {SPEED: v * jitter(i), "perf/step_time_ms": 16_000 / (v * jitter(i))}
        for i, v in enumerate(speeds)
    ]
    found = feed(series)
    if after < 0.6:
        ((step, finding),) = found
        # Seen at its 7th point, then 2 s of ~14.5 ms steps: 138 more.
        assert slow + fast + 7 + 130 < step <= slow + fast + 7 + 140
        assert finding.baseline == pytest.approx(2020.0)
    else:
        assert found == [], after


def first_drop(series: list[dict[str, float]]) -> Optional[int]:
    found = feed(series)
    return found[0][0] if found else None


def test_the_cheap_test_and_the_full_one_agree_at_the_drop_threshold() -> None:
    """A point just above ``(1 - drop)`` x the baseline is no drop, one just below is,
    whichever test (the cheap one against the last baseline, or the full one) sees it."""
    base = [{SPEED: 1000.0 * jitter(i)} for i in range(400)]
    # The baseline is the median of 1000, 1010 and 1020: 1010.
    above = base + [{SPEED: 1010.0 * 0.6 * 1.001}] * 100
    below = base + [{SPEED: 1010.0 * 0.6 * 0.999}] * 100
    assert first_drop(above) is None
    assert first_drop(below) == 400 + 7


def test_a_run_whose_speed_wanders_needs_a_drop_beyond_its_own_wander() -> None:
    """The speed wanders by a factor of e^0.3 (1.35) either way over every 200 steps (a
    shared machine): the rolling medians of the baseline spread by 0.35 in log, so a drop
    must exceed 6 x 0.35 = 2.1 in log (8x). Halving is within the wander: no alert,
    though it alerts with ``zscore: 0``; a fall to a tenth is beyond it."""

    def series(after: float) -> list[dict[str, float]]:
        speeds = [1000.0 * math.exp(0.3 * math.sin(2 * math.pi * i / 200)) for i in range(1000)]
        speeds += [after] * 800
        return [{SPEED: v, "perf/step_time_ms": 16_000 / v} for v in speeds]

    assert feed(series(500.0)) == []
    assert [step for step, _ in feed(series(500.0), zscore=0.0)] == [1069]
    ((step, finding),) = feed(series(100.0))
    assert (step, finding.value) == (1019, 100.0)
    assert finding.baseline == pytest.approx(1000.0)
