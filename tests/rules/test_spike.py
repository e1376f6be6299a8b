"""``spike``: the severity on both sides of its critical level, the running mean once the
window has turned over, and the values that are not all positive (judged on the values,
not their logs), including a median of 0."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mindwatch.common.i18n import set_language
from mindwatch.rules.base import Finding
from mindwatch.rules.spike import SpikeRule, SpikeSettings

TAG = "train/loss"


@pytest.fixture(autouse=True)
def _english() -> None:
    set_language("en")


def spikes(values: list[float], **settings: Any) -> list[tuple[int, Finding]]:
    rule = SpikeRule(SpikeSettings(**settings))
    found = []
    for step, value in enumerate(values, start=1):
        found += [(step, f) for f in rule.observe(step, {TAG: value})]
    return found


def smooth(n: int, level: float = 1.0) -> list[float]:
    """``level`` x 1.00, 1.01, 1.02 in turn: a median of 1.01 x level, little noise."""
    return [level * (1.0 + 0.01 * (i % 3)) for i in range(n)]


@pytest.mark.parametrize(
    ("times", "severity"), [(4.0, "warning"), (29.0, "warning"), (31.0, "critical")]
)
def test_the_severity_is_critical_above_ten_times_ratio_times_the_median(
    times: float, severity: str
) -> None:
    value = 1.01 * times  # the median is 1.01; critical above 10 x ratio (3) x it
    ((step, finding),) = spikes([*smooth(300), value, *smooth(10)])
    assert (step, finding.rule, finding.severity, finding.metric) == (301, "spike", severity, TAG)
    assert (finding.value, finding.baseline) == (value, 1.01)
    assert finding.message.startswith(f"train/loss jumped to {value:.4g}, {times:.1f}x its ")


def test_the_running_mean_follows_the_window_after_it_turned_over() -> None:
    """The loss falls from 10 to 1 and stays: once the 10s have left the 100-point
    window the mean is 1.01 again, so 2.5 (below ratio x the mean, however far out in
    its spread) is no spike and 3.5 is."""
    before = smooth(150, level=10.0) + smooth(450)
    assert spikes([*before, 2.5, *smooth(5)]) == []
    assert [step for step, _ in spikes([*before, 3.5, *smooth(5)])] == [601]


def cycle(pattern: list[float], n: int) -> list[float]:
    return [pattern[i % len(pattern)] for i in range(n)]


def test_values_not_all_positive_are_judged_by_their_median_absolute_deviation() -> None:
    """A window of 0, 1 and 2 (30, 40 and 30 points): median 1, median absolute deviation
    1, robust sd 1.4826. 5 (z 2.7) is no spike, 11 (z 6.7) is."""
    window = cycle([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0], 200)
    assert spikes([*window, 5.0]) == []
    ((step, finding),) = spikes([*window, 11.0])
    assert (step, finding.severity, finding.baseline) == (201, "warning", 1.0)
    assert finding.message == "train/loss jumped to 11, 11.0x its recent median 1 (robust z 7)"


def test_a_window_without_spread_is_scaled_by_its_median() -> None:
    """Nine points in ten at 1 and one at 0: no deviation from the median at all, so the
    scale is a thousandth of the median: 5 is a spike (z 4000)."""
    ((step, finding),) = spikes([*cycle([0.0] + [1.0] * 9, 200), 5.0])
    assert (step, finding.severity, finding.baseline) == (201, "warning", 1.0)
    assert finding.message == "train/loss jumped to 5, 5.0x its recent median 1 (robust z 4000)"


def test_a_median_of_zero_is_a_spike_not_a_failure() -> None:
    """A value that is 0 at most steps (an auxiliary loss) jumps to 5: the rule says so
    (infinitely many times its median), and keeps running for the next one."""
    values = [*cycle([0.0] * 6 + [1.0] * 4, 200), 5.0, *cycle([0.0] * 6 + [1.0] * 4, 100)]
    found = spikes([*values, 7.0])
    assert [(step, f.severity, f.value, f.baseline) for step, f in found] == [
        (201, "critical", 5.0, 0.0),
        (302, "critical", 7.0, 0.0),
    ]
    assert found[0][1].message.startswith("train/loss jumped to 5, infx its recent median 0 ")
    assert math.isinf(float(found[0][1].message.split(", ")[1].split("x")[0]))
