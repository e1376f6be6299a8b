"""Each rank's interval medians of data waits, and the interval a benchmark disturbed."""

from __future__ import annotations

from mindwatch.metrics.straggler import InputWaitMedians


def test_medians_come_once_per_interval() -> None:
    medians = InputWaitMedians(3)
    out = []
    for wait in (1.0, 9.0, 2.0, 4.0, 4.0, 100.0):
        medians.add(wait, 10.0)
        out.append(medians.due())
    assert out == [
        {},
        {},
        {"straggler/input_wait_ms": 2.0, "straggler/step_ms": 12.0},
        {},
        {},
        {"straggler/input_wait_ms": 4.0, "straggler/step_ms": 14.0},
    ]


def test_the_interval_after_a_benchmark_is_dropped_whole() -> None:
    """Disturbed at step 2 (mid-interval) and at step 6 (an interval's last step): the
    intervals holding steps 3 and 7 give nothing, the others their medians."""
    medians = InputWaitMedians(3)
    given = []
    for step in range(1, 13):
        medians.add(float(step), 1.0)
        if medians.due():
            given.append(step)
        if step in (2, 6):
            medians.disturb()
    assert given == [6, 12]
