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


def test_only_timing_failures_are_trained_again_and_at_most_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rescore_timing`` with the corpus builder and the scorer replaced by records (the
    loop is what is tested; the real runs are tests/rules/test_scorecard.py's): a
    healthy run whose throughput alarm goes on a new run is fixed after one retry, a
    slow-step fault missed every time is retried twice and still fails, a missed spike
    is never retried, and each retried run's folder is gone before its new build."""
    import alerts_scorecard

    names = ["healthy-attn-adam-cosine-b16-s1", "fault-slow-compute", "fault-corrupt-labels"]
    for name in names:
        (tmp_path / name).mkdir()
    built: list[list[str]] = []
    scored: list[str] = []

    def build(chosen: list, out: Path, *, jobs: int = 2, echo: bool = False) -> list[str]:
        for spec in chosen:
            assert not (out / spec.name).exists()  # the old run is gone
            (out / spec.name).mkdir()  # a new run
        built.append([s.name for s in chosen])
        return []

    def score(folder: Path, settings: object) -> Outcome:
        scored.append(folder.name)
        if folder.name == names[0]:
            return Outcome(folder.name, True, [], 0, [])  # the new run is clean
        return Outcome(folder.name, False, ["throughput_drop"], 200, [])  # missed again

    monkeypatch.setattr(alerts_scorecard, "build", build)
    monkeypatch.setattr(alerts_scorecard, "score", score)
    first = [
        Outcome(names[0], True, [], 0, [alert("throughput_drop")]),
        Outcome(names[1], False, ["throughput_drop"], 200, []),
        Outcome(names[2], False, ["spike"], 150, []),
    ]
    outcomes, lines = alerts_scorecard.rescore_timing(tmp_path, first, None)  # type: ignore[arg-type]
    assert built == [[names[0], names[1]], [names[1]]]
    assert scored == [names[0], names[1], names[1]]
    assert [o.name for o in outcomes] == [o.name for o in first]
    assert not outcomes[0].alerts  # fixed
    assert outcomes[1].caught_by is None  # still missed: the test fails on it
    assert outcomes[2] is first[2]  # never retried
    assert [line.split(":")[0] for line in lines] == [
        f"retry 1 of {names[0]}",
        f"retry 1 of {names[1]}",
        f"retry 2 of {names[1]}",
    ]
