"""The alert scorecard on the reduced corpus: real MindSpore runs, replayed offline.

``benchmarks/alerts_corpus.py --quick`` trains a handful of short runs (healthy ones of
each model, one of heavy-tailed label noise and one of 1 ms steps beside a busy
process, and faults: NaN input, corrupted labels, lr blow-up, slow data, slow
compute); ``benchmarks/alerts_scorecard.py`` replays them through the rules with the
default settings. No healthy run may raise a warning or a critical alert, and every
fault must be caught, from its onset and within its window, by its rule (a throughput
drop naming the part of the step that grew). A wrong verdict of a timing rule alone is
judged again on a new run of that spec, at most twice
(``alerts_scorecard.rescore_timing``): another process can slow a healthy run, and the
rule is right to say so.
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
    # A verdict that hangs on wall-clock time alone (a healthy run's throughput alarm, a
    # slow-step fault missed) is judged again on a new run, at most twice: this suite's
    # other workers can slow a run for seconds, as any shared machine does.
    settings = alerts_scorecard.AlertSettings()
    outcomes, retries = alerts_scorecard.rescore_timing(tmp_path, outcomes, settings)
    result = alerts_scorecard.summary(outcomes)
    report = "\n".join([alerts_scorecard.render(outcomes), *retries])
    # Each fault within its window: 10 steps, or for a throughput drop (which must last
    # throughput_drop.min_seconds of training) 3 s of training after its onset plus the
    # time of throughput_drop.recent steps at the run's slowed pace.
    assert result == {"false_alarms": [], "missed": [], "late": [], "early": []}, report
    assert all(o.delay is not None for o in outcomes if not o.healthy), report


def test_a_layer_whose_gradient_grows_is_named_before_the_loss_moves(tmp_path: Path) -> None:
    """Real MindSpore: from step 250 the MLP's first layer's gradient is multiplied by
    1.03 per step (the forward pass unchanged); ``layer_grad_outlier`` names that layer,
    after the onset and before ``grad_explosion`` and every loss rule."""
    (spec,) = [s for s in alerts_corpus.leading_specs() if s.name == "fault-layer-grad-mlp"]
    runs = alerts_corpus.build([spec], tmp_path, jobs=1)
    assert not [line for line in runs if "FAILED" in line], runs
    settings = alerts_scorecard.leading_settings()
    outcome = alerts_scorecard.score(tmp_path / spec.name, settings)
    # The gradient and loss rules (a busy machine's throughput is not this test's).
    judged = {*alerts_scorecard.LEADING, "grad_explosion", *alerts_scorecard.LOSS_RULES}
    bad = [a for a in outcome.alerts if a.severity in alerts_scorecard.BAD and a.rule in judged]
    report = "\n".join(a.line() for a in outcome.alerts)
    assert [a for a in bad if a.step < spec.onset] == [], report
    first = {}
    for alert in bad:
        first.setdefault(alert.rule, alert)
    layer = first["layer_grad_outlier"]
    assert (layer.metric, layer.extra["layer"]) == ("layers/grad_norm/0.weight", "0.weight")
    later = [first[r] for r in ("grad_explosion", *alerts_scorecard.LOSS_RULES) if r in first]
    assert later, report  # the loss does diverge in this run
    assert all(layer.step < alert.step for alert in later), report
