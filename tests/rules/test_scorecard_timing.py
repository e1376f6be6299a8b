"""Which scorecard verdicts are judged again on a new run: those that hang on wall-clock
time alone (``benchmarks/alerts_scorecard.py``'s ``timing_only``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import pytest

from mindwatch.alerts import Alert

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from alerts_scorecard import Outcome, timing_only


def alert(rule: str, severity: str = "warning", step: int = 250) -> Alert:
    return Alert(rule=rule, severity=severity, metric="m", value=1.0, step=step, message="")  # type: ignore[arg-type]


def healthy(*alerts: Alert) -> Outcome:
    return Outcome("healthy-x", True, [], 0, list(alerts))


def fault(
    rule: str, caught_by: Optional[str] = None, late: bool = False, early: tuple[Alert, ...] = ()
) -> Outcome:
    return Outcome(
        "fault-x", False, [rule], 200, [], caught_by=caught_by, late=late, early=list(early)
    )


@pytest.mark.parametrize("rule", ["throughput_drop", "straggler", "stall"])
def test_a_healthy_runs_timing_alarms_alone_are_judged_again(rule: str) -> None:
    assert timing_only(healthy(alert(rule)))
    assert timing_only(healthy(alert(rule, "critical"), alert("throughput_drop")))


@pytest.mark.parametrize("other", ["spike", "nonfinite", "grad_explosion", "plateau"])
def test_a_healthy_run_with_any_other_alarm_is_not(other: str) -> None:
    assert not timing_only(healthy(alert("throughput_drop"), alert(other)))
    assert not timing_only(healthy(alert(other)))


def test_a_clean_healthy_run_or_an_info_is_not_judged_again() -> None:
    assert not timing_only(healthy())
    assert not timing_only(healthy(alert("throughput_drop", "info")))


def test_a_missed_or_late_timing_fault_is_judged_again() -> None:
    assert timing_only(fault("throughput_drop"))
    assert timing_only(fault("straggler", caught_by="straggler", late=True))
    assert timing_only(fault("throughput_drop", early=(alert("throughput_drop", step=150),)))


def test_a_caught_timing_fault_and_every_numeric_fault_are_not() -> None:
    assert not timing_only(fault("throughput_drop", caught_by="throughput_drop"))
    assert not timing_only(fault("spike"))  # missed, but the loss is not the machine's
    assert not timing_only(fault("spike", caught_by="spike", late=True))
    # An early alarm of another rule is a wrong verdict no new run excuses.
    assert not timing_only(fault("throughput_drop", early=(alert("spike", step=150),)))
