"""What a straggler finding carries, asserted by value: its metric (the alert's, in
alerts.jsonl and the report), the waits and step its message quotes, and the rank it
names, or "?" when the reduction gave no argmax (found by ``make mutation``:
docs/dev/mutation/rules-straggler.md)."""

from __future__ import annotations

from typing import Optional

import pytest

from mindwatch.rules.base import Finding
from mindwatch.rules.straggler import StragglerRule, StragglerSettings
from tests.rules.test_straggler import _bench, _interval


def _input_alert(argmax: Optional[int]) -> tuple[int, Finding]:
    """2 skipped intervals, 1 of baseline, then a pipeline that holds the job up: the
    third low interval (3 x 527 ms of training) alerts."""
    rule = StragglerRule(StragglerSettings(interval=10, min_seconds=1.0, baseline=1))
    found = []
    for i in range(8):
        values = _interval(41.237 if i >= 3 else 0.5, 0.3456, 52.71, argmax or 0)
        if argmax is None:
            del values["ranks/input_wait_ms_argmax"]
        found += [(i, f) for f in rule.observe(10 * (i + 1), values)]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("argmax", [0, 3, 7])
def test_an_input_finding_names_its_metric_its_waits_and_the_rank(argmax: int) -> None:
    i, finding = _input_alert(argmax)
    assert i == 5
    assert finding.metric == "straggler/input_score"
    assert finding.severity == "warning"
    assert finding.rank == argmax
    assert finding.value == pytest.approx(1.0 - (41.237 - 0.3456 - 0.1544) / 52.71)
    assert finding.message == (
        f"rank {argmax} is the straggler: its input pipeline holds the others up "
        "(score 0.23 below 0.40 for 3 intervals, 1.6 s; "
        "data wait 41.2 ms against 0.346 ms on the fastest rank, step 52.7 ms)"
    )
    assert finding.extra["wait_ms"] == [0.3456, 41.237]


def test_without_an_argmax_the_finding_still_comes_naming_no_rank() -> None:
    # A reduction (or a replayed run) that gave the spread but not its argmax: the
    # slowdown is still worth the warning, with the rank unknown rather than made up.
    i, finding = _input_alert(None)
    assert i == 5
    assert finding.rank is None
    assert finding.metric == "straggler/input_score"
    assert finding.message.startswith("rank ? is the straggler: its input pipeline")


@pytest.mark.parametrize("argmax", [1, 4])
def test_a_compute_finding_names_its_metric_and_the_rank(argmax: int) -> None:
    rule = StragglerRule(StragglerSettings(skip=0, bench_rounds=2))
    assert rule.observe(10, _bench(3.0, 1.0, argmax)) == []
    (finding,) = rule.observe(20, _bench(3.0, 1.0, argmax))
    assert finding.metric == "straggler/compute_score"
    assert finding.rank == argmax
    assert finding.value == pytest.approx(1.0 / 3.0)
    assert finding.baseline == 0.5
    assert finding.extra["bench_ms"] == [1.0, 3.0]
