"""The alert scorecard on the reduced corpus: real MindSpore runs, replayed offline.

``benchmarks/alerts_corpus.py --quick`` trains a handful of short runs (healthy ones of
each model, one of heavy-tailed label noise and one of 1 ms steps beside a busy
process, and faults: NaN input, corrupted labels, lr blow-up, slow data, slow
compute); ``benchmarks/alerts_scorecard.py`` replays them through the rules with the
default settings. No healthy run may raise a warning or a critical alert, and every
fault must be caught, from its onset and within its window, by its rule (a throughput
drop naming the part of the step that grew).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("mindspore")
pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import alerts_corpus  # noqa: E402
import alerts_scorecard  # noqa: E402


def test_the_reduced_corpus_scores_clean(tmp_path: Path) -> None:
    runs = alerts_corpus.build(alerts_corpus.specs(quick=True), tmp_path, jobs=2)
    assert not [line for line in runs if "FAILED" in line], runs
    outcomes = alerts_scorecard.run_scorecard(tmp_path, quick=True)
    assert len(outcomes) == len(alerts_corpus.QUICK)
    assert sum(o.healthy for o in outcomes) >= 4
    result = alerts_scorecard.summary(outcomes)
    report = alerts_scorecard.render(outcomes)
    # Each fault within its window: 10 steps, or for a throughput drop (which must last
    # throughput_drop.min_seconds of training) 3 s of training after its onset plus the
    # time of throughput_drop.recent steps at the run's slowed pace.
    assert result == {"false_alarms": [], "missed": [], "late": [], "early": []}, report
    assert all(o.delay is not None for o in outcomes if not o.healthy), report
