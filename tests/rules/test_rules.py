"""Each built-in rule on synthetic series: fires where it should, stays quiet on noise."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mindwatch
from mindwatch.alerts import Alert
from mindwatch.alerts.engine import RuleEngine
from mindwatch.common.i18n import set_language
from mindwatch.config import AlertSettings
from mindwatch.rules.base import Finding
from mindwatch.rules.divergence import DivergenceRule, DivergenceSettings
from mindwatch.rules.eval_rebound import EvalReboundRule, EvalReboundSettings
from mindwatch.rules.gradients import (
    GradExplosionRule,
    GradExplosionSettings,
    GradVanishingRule,
    GradVanishingSettings,
)
from mindwatch.rules.plateau import PlateauRule, PlateauSettings


def run(series: Iterable[tuple[int, dict[str, float]]], settings: Any = None) -> list[Alert]:
    engine = RuleEngine(AlertSettings(**(settings or {})), run="test", rank=0)
    alerts: list[Alert] = []
    for step, values in series:
        alerts += engine.observe(step, values)
    return alerts


def noisy_loss(steps: int, seed: int = 0) -> np.ndarray:
    """A healthy loss: decaying, with heavy multiplicative noise (like a small batch)."""
    rng = np.random.default_rng(seed)
    return (0.1 + 2.0 / (1 + np.arange(steps) / 50)) * rng.lognormal(0.0, 0.5, steps)


def warnings(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.severity != "info"]


@pytest.mark.parametrize("seed", range(5))
def test_healthy_noisy_runs_raise_no_warning(seed: int) -> None:
    rng = np.random.default_rng(seed)
    loss = noisy_loss(3000, seed)
    series = (
        (
            step,
            {
                "train/loss": float(loss[step - 1]),
                "train/grad_norm": float(rng.lognormal(0.0, 0.4)),
                "perf/samples_per_s": float(1000 * rng.lognormal(0.0, 0.15)),
                "train/lr": 1e-3,
            },
        )
        for step in range(1, 3001)
    )
    assert warnings(run(series)) == []


def test_nonfinite_is_critical_at_its_step_then_cooled_down() -> None:
    series = [(s, {"train/loss": math.nan if s in (50, 51, 200) else 1.0}) for s in range(1, 301)]
    alerts = [a for a in run(series) if a.rule == "nonfinite"]  # a flat loss: also a plateau
    assert [(a.rule, a.severity, a.step) for a in alerts] == [
        ("nonfinite", "critical", 50),
        ("nonfinite", "critical", 200),  # 51 was inside the 100-step cooldown
    ]
    assert "NaN" in alerts[0].message
    assert alerts[0].causes[0].startswith("a NaN or Inf in the input batch")


@pytest.mark.parametrize(
    ("value", "word"), [(math.inf, "infinite"), (-math.inf, "infinite"), (math.nan, "NaN")]
)
def test_nonfinite_sees_nan_and_both_infinities_in_train_and_eval_tags(
    value: float, word: str
) -> None:
    """Each kind of non-finite value, in a train/ and an eval/ tag, is critical at its
    step; the same value in another family (perf/) is not this rule's."""
    series = [
        (10, {"train/loss": value}),
        (200, {"eval/accuracy": value}),
        (400, {"perf/step_time_ms": value}),
    ]
    alerts = [a for a in run(series) if a.rule == "nonfinite"]
    assert [(a.severity, a.step, a.metric) for a in alerts] == [
        ("critical", 10, "train/loss"),
        ("critical", 200, "eval/accuracy"),
    ]
    assert all(word in a.message for a in alerts)


def test_the_cooldown_holds_for_exactly_cooldown_steps() -> None:
    """With a 100-step cooldown, the same alert 99 steps later is held back and 100 steps
    later fires again (the boundary is ``<``: pinned here)."""
    for later, fires in ((99, False), (100, True)):
        series = [(1, {"train/loss": math.nan}), (1 + later, {"train/loss": math.nan})]
        alerts = run(series, {"cooldown_steps": 100})
        assert [a.step for a in alerts if a.rule == "nonfinite"] == (
            [1, 1 + later] if fires else [1]
        ), later


def test_a_spike_names_the_step_and_the_outlier_rank() -> None:
    loss = noisy_loss(400)
    series = []
    for step in range(1, 401):
        value = float(loss[step - 1]) * (20.0 if step == 300 else 1.0)
        series.append(
            (step, {"train/loss": value, "ranks/loss_argmax": 3.0 if step == 300 else 0.0})
        )
    (alert,) = run(series)
    assert (alert.rule, alert.step, alert.rank, alert.metric) == ("spike", 300, 3, "train/loss")
    assert alert.baseline is not None
    assert alert.value is not None
    assert alert.value > 5 * alert.baseline


def test_gradient_norm_thresholds_escalate_within_the_cooldown() -> None:
    """The seeds' absolute thresholds, set explicitly."""
    norms = {10: 12.0, 11: 13.0, 12: 25.0}
    absolute = {"grad_explosion": {"warning": 10, "critical": 20}}
    alerts = run(((s, {"train/grad_norm": norms.get(s, 1.0)}) for s in range(1, 50)), absolute)
    assert [(a.rule, a.severity, a.step) for a in alerts] == [
        ("grad_explosion", "warning", 10),
        ("grad_explosion", "critical", 12),
    ]
    threshold = {"grad_explosion": {"threshold": 10}}  # the seeds' name; critical: twice it
    alerts = run(((s, {"train/grad_norm": norms.get(s, 1.0)}) for s in range(1, 50)), threshold)
    assert [(a.severity, a.step) for a in alerts] == [("warning", 10), ("critical", 12)]


@pytest.mark.parametrize("scale", [0.01, 1.0, 300.0])
def test_gradient_norm_relative_to_its_running_median_whatever_its_scale(scale: float) -> None:
    """Large first steps (x15, as a fresh network's) raise nothing; x12 the running
    median for 4 steps later warns at the third, x150 is critical at once, whatever the
    model's scale."""
    rng = np.random.default_rng(0)
    norms = [scale * (15.0 if s <= 5 else 1.0) * rng.lognormal(0, 0.3) for s in range(1, 301)]
    norms[199:203] = [12 * scale] * 4
    norms[249] = 150 * scale
    alerts = run((s, {"train/grad_norm": v}) for s, v in enumerate(norms, start=1))
    assert [(a.rule, a.severity, a.step) for a in alerts] == [
        ("grad_explosion", "warning", 202),
        ("grad_explosion", "critical", 250),
    ]
    assert alerts[0].extra["points"] == 3


def grad_steps(norms: list[float], step_ms: float = 0.0) -> list[tuple[int, dict[str, float]]]:
    """``train/grad_norm`` per step, with ``perf/step_time_ms`` when ``step_ms`` is set."""
    timing = {"perf/step_time_ms": step_ms} if step_ms else {}
    return [(s, {"train/grad_norm": v, **timing}) for s, v in enumerate(norms, start=1)]


@pytest.mark.parametrize("width", [1, 2])
def test_an_outlier_of_one_or_two_steps_is_no_explosion(width: int) -> None:
    """A heavy-tailed batch: 11x and 60x the median on one step (or two), back to normal
    the next. Far outside the run's spread, and still the spike rule's business."""
    rng = np.random.default_rng(1)
    norms = [rng.lognormal(0, 0.2) for _ in range(400)]
    norms[199 : 199 + width] = [11.0] * width
    norms[299 : 299 + width] = [60.0] * width
    assert run(grad_steps(norms)) == []


def test_a_warning_level_explosion_lasts_its_min_seconds_when_set() -> None:
    """By default three points are enough, at any step time; with ``min_seconds: 1`` at
    1 ms steps the warning waits until the norm has stayed up for 1 s (1,000 steps),
    then fires once, against the median before the run."""
    norms = [1.0] * 200 + [20.0] * 1200
    assert [(a.severity, a.step) for a in run(grad_steps(norms, step_ms=1.0))] == [("warning", 203)]
    alerts = run(grad_steps(norms, step_ms=1.0), {"grad_explosion": {"min_seconds": 1.0}})
    assert [(a.severity, a.step) for a in alerts] == [("warning", 1200)]
    assert alerts[0].extra["points"] == 1000
    assert alerts[0].extra["seconds"] == pytest.approx(1.0)
    assert alerts[0].baseline == pytest.approx(1.0)  # the run was kept out of the median
    # At 500 ms steps the three points span 1.5 s: the third one fires.
    alerts = run(
        grad_steps([1.0] * 200 + [20.0] * 5, step_ms=500.0),
        {"grad_explosion": {"min_seconds": 1.0}},
    )
    assert [(a.severity, a.step) for a in alerts] == [("warning", 203)]


def test_an_explosion_hovering_about_the_factor_warns_at_its_third_point() -> None:
    """A layer's gradient 50x from step 201 puts the global norm at 6 to 15x its median,
    in and out of the 10x bar: one explosion, warned at its third point; a single 12x
    step with the norm barely up after it (1.2x on a steady series) is none."""
    rng = np.random.default_rng(5)
    steady = [0.2 * rng.lognormal(0, 0.25) for _ in range(200)]
    hovering = steady + [0.2 * f for f in (14.0, 6.0, 7.5, 11.0, 5.5, 9.0)]
    alerts = run(grad_steps(hovering))
    assert [(a.severity, a.step) for a in alerts] == [("warning", 203)]
    assert run(grad_steps([*steady, 0.2 * 12, 0.2 * 1.2, 0.2 * 1.2, 0.2])) == []


def test_a_jump_inside_a_wide_spread_is_no_explosion() -> None:
    """A norm that swings by x3 from step to step (robust sd of its log ~1.1): 12x for
    five steps is within 6 of its deviations; the same jump in a steady run warns."""
    rng = np.random.default_rng(2)
    wide = [rng.lognormal(0, 1.1) for _ in range(300)] + [12.0] * 5
    assert run(grad_steps(wide)) == []
    steady = [rng.lognormal(0, 0.1) for _ in range(300)] + [12.0] * 5
    assert [(a.rule, a.step) for a in run(grad_steps(steady))] == [("grad_explosion", 303)]


def test_the_explosion_rule_state_survives_a_restart_in_the_middle_of_a_run() -> None:
    """Saved while three large points are held back (watch --once between two calls):
    the restored rule fires at the same step, with the same baseline."""
    norms = [1.0] * 100 + [20.0] * 300
    series = grad_steps(norms, step_ms=5.0)
    settings = {"grad_explosion": {"min_seconds": 1.0}}
    whole = run(series, settings)
    first = RuleEngine(AlertSettings(**settings), run="test", rank=0)
    for step, values in series[:103]:
        first.observe(step, values)
    state = json.loads(json.dumps(first.state_dict()))
    second = RuleEngine(AlertSettings(**settings), run="test", rank=0)
    second.load_state_dict(state)
    resumed = [a for step, values in series[103:] for a in second.observe(step, values)]
    assert [(a.step, a.baseline) for a in resumed] == [(a.step, a.baseline) for a in whole]
    assert [a.step for a in whole] == [300]  # 200 points of 5 ms: 1 s


def test_vanishing_gradients_after_five_steps_below_the_threshold() -> None:
    alerts = run((s, {"train/grad_norm": 1e-4 if s >= 100 else 0.5}) for s in range(1, 200))
    assert [(a.rule, a.step) for a in alerts] == [("grad_vanishing", 104)]


def test_plateau_is_info_by_default() -> None:
    """By default the flat part must last as long as the improving part did."""
    alerts = run((s, {"train/loss": 1.0 / s if s < 100 else 0.01}) for s in range(1, 2600))
    ((rule, severity, step),) = [(a.rule, a.severity, a.step) for a in alerts]
    assert (rule, severity) == ("plateau", "info")
    assert 300 <= step <= 700  # improving (EMA) until ~250, then as long again


def test_plateau_with_the_seeds_fixed_steps() -> None:
    series = ((s, {"train/loss": 1.0 / s if s < 100 else 0.01}) for s in range(1, 2600))
    ((rule, step),) = [(a.rule, a.step) for a in run(series, {"plateau": {"steps": 2000}})]
    assert rule == "plateau"
    assert 2099 <= step <= 2300  # 2000 steps after the smoothed loss stopped improving


def test_a_plateau_in_a_noisy_loss_is_found_in_a_short_run() -> None:
    """The issue's case: the lr drops to 0 for the last 450 of 600 steps."""
    rng = np.random.default_rng(1)
    loss = [
        (2.0 / (1 + s / 30) if s <= 150 else 2.0 / 6) * rng.lognormal(0, 0.3) for s in range(1, 601)
    ]
    alerts = run((s, {"train/loss": v}) for s, v in enumerate(loss, start=1))
    ((rule, step),) = [(a.rule, a.step) for a in alerts]
    assert rule == "plateau"
    assert 250 < step <= 500


def test_divergence_of_the_smoothed_loss() -> None:
    loss = [
        2.0 / (1 + s / 50) if s < 600 else 0.15 * math.exp((s - 600) / 150) for s in range(1, 1201)
    ]
    alerts = run((s, {"train/loss": v}) for s, v in enumerate(loss, start=1))
    rules = [a.rule for a in warnings(alerts)]
    assert "divergence" in rules
    (div,) = [a for a in alerts if a.rule == "divergence"]
    assert 600 < div.step < 1000


def test_divergence_adapts_to_a_short_noisy_run() -> None:
    """300 steps of a noisy small-batch loss: a fixed 200-point warm-up and 100-point span
    would see the divergence late or not at all; a healthy run of the same noise never
    fires."""
    rng = np.random.default_rng(3)

    def losses(diverge: bool) -> list[float]:
        return [
            (2.0 / (1 + s / 20) if not diverge or s < 150 else 0.2 * math.exp((s - 150) / 40))
            * rng.lognormal(0, 0.4)
            for s in range(1, 301)
        ]

    alerts = run((s, {"train/loss": v}) for s, v in enumerate(losses(True), start=1))
    (div,) = [a for a in alerts if a.rule == "divergence"]
    assert 150 < div.step < 260
    for _ in range(5):
        healthy = run((s, {"train/loss": v}) for s, v in enumerate(losses(False), start=1))
        assert [a for a in healthy if a.rule == "divergence"] == []


def test_throughput_drop_is_reported_once_per_drop() -> None:
    rng = np.random.default_rng(0)
    speed = [
        1000 * (0.5 if 600 <= s < 900 else 1.0) * rng.lognormal(0, 0.05) for s in range(1, 1500)
    ]
    alerts = run((s, {"perf/samples_per_s": v}) for s, v in enumerate(speed, start=1))
    drops = [a for a in alerts if a.rule == "throughput_drop"]
    assert len(drops) == 1
    assert 600 < drops[0].step <= 640
    assert drops[0].baseline == pytest.approx(1000, rel=0.05)


def speed_steps(speeds: list[float]) -> list[tuple[int, dict[str, float]]]:
    """``perf/samples_per_s`` with the step time it implies (16 samples per step)."""
    return [
        (s, {"perf/samples_per_s": v, "perf/step_time_ms": 16_000.0 / v})
        for s, v in enumerate(speeds, start=1)
    ]


def test_a_throughput_dip_of_milliseconds_is_no_drop() -> None:
    """1 ms steps, and another process takes the CPU for 40 steps (40 to 120 ms) at a
    time, 10 times: each dip is far below the baseline and far outside its noise, and
    none lasts the 2 s a drop must last."""
    rng = np.random.default_rng(3)
    speeds = [16_000 * rng.lognormal(0, 0.05) for _ in range(5000)]
    for start in range(500, 5000, 450):
        speeds[start : start + 40] = [16_000 / 3 * rng.lognormal(0, 0.05) for _ in range(40)]
    assert run(speed_steps(speeds)) == []


def test_a_throughput_drop_longer_than_the_window_is_caught_after_min_seconds() -> None:
    """1 ms steps halve in speed from step 1001: the drop must last 2 s of training
    (about 1,000 of its 2 ms steps, 5 times the 200-point window) and is measured
    against the speed before it, not against itself."""
    rng = np.random.default_rng(4)
    speeds = [16_000 * rng.lognormal(0, 0.05) for _ in range(1000)]
    speeds += [8_000 * rng.lognormal(0, 0.05) for _ in range(2000)]
    (drop,) = run(speed_steps(speeds))
    assert drop.rule == "throughput_drop"
    assert 1900 < drop.step < 2100
    assert drop.extra["seconds"] == pytest.approx(2.0, abs=0.01)
    assert drop.baseline == pytest.approx(16_000, rel=0.05)
    assert drop.value == pytest.approx(8_000, rel=0.05)


def test_the_throughput_rule_state_survives_a_restart_while_a_drop_waits() -> None:
    speeds = [1000.0] * 300 + [400.0] * 200  # 16 ms steps, then 40 ms: 2 s is 50 steps
    series = speed_steps(speeds)
    whole = run(series)
    first = RuleEngine(AlertSettings(), run="test", rank=0)
    for step, values in series[:330]:
        first.observe(step, values)
    state = json.loads(json.dumps(first.state_dict()))
    second = RuleEngine(AlertSettings(), run="test", rank=0)
    second.load_state_dict(state)
    resumed = [a for step, values in series[330:] for a in second.observe(step, values)]
    assert [(a.step, a.baseline, a.value) for a in resumed] == [
        (a.step, a.baseline, a.value) for a in whole
    ]
    assert [a.rule for a in whole] == ["throughput_drop"]


def test_eval_rebound_while_train_loss_falls() -> None:
    evals = {100: 1.0, 200: 0.8, 300: 0.85, 400: 0.9, 500: 0.95}
    series = []
    for step in range(1, 501):
        values = {"train/loss": 2.0 / (1 + step / 50)}
        if step in evals:
            values["eval/loss"] = evals[step]
        series.append((step, values))
    alerts = run(series)
    assert [(a.rule, a.step) for a in alerts] == [("eval_rebound", 500)]


def test_state_survives_a_restart() -> None:
    """Split a run in two processes: the same alerts as one uninterrupted engine."""
    loss = noisy_loss(600)
    series = [
        (s, {"train/loss": float(loss[s - 1]) * (30 if s == 450 else 1)}) for s in range(1, 601)
    ]
    whole = run(series)
    first = RuleEngine(AlertSettings(), run="test", rank=0)
    for step, values in series[:400]:
        first.observe(step, values)
    state = json.loads(json.dumps(first.state_dict()))  # it must survive JSON (watch --once)
    second = RuleEngine(AlertSettings(), run="test", rank=0)
    second.load_state_dict(state)
    resumed = [a for step, values in series[400:] for a in second.observe(step, values)]
    assert [(a.rule, a.step) for a in resumed] == [(a.rule, a.step) for a in whole]


def test_disabled_rules_and_thresholds_from_the_config() -> None:
    series = [(s, {"train/grad_norm": 15.0}) for s in range(1, 5)]
    assert run(series, {"grad_explosion": {"enabled": False}}) == []
    assert run(series, {"grad_explosion": {"warning": 50, "critical": 100}}) == []


def test_the_monitor_writes_alerts_jsonl(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.steps_per_epoch = 25
        for step in range(1, 61):
            mon.log_step(step, loss=math.nan if step == 42 else 1.0, epoch=1 + (step - 1) // 25)
    (line,) = (tmp_path / "alerts.jsonl").read_text().splitlines()
    alert = json.loads(line)
    assert {k: alert[k] for k in ("rule", "severity", "metric", "value", "step", "rank")} == {
        "rule": "nonfinite",
        "severity": "critical",
        "metric": "train/loss",
        "value": "NaN",
        "step": 42,
        "rank": 0,
    }
    assert (alert["epoch"], alert["batch"]) == (2, 16)
    assert alert["run"] == tmp_path.name
    assert alert["message"] == "train/loss is NaN"
    assert alert["causes"]
    assert json.loads((tmp_path / "run.json").read_text())["alerts"] == 1


def test_eval_rebound_state_survives_a_save_between_train_and_eval_points() -> None:
    """watch --once may save after a train step and before the evaluation of that step."""
    evals = {100: 1.0, 200: 0.8, 300: 0.85, 400: 0.9, 500: 0.95}
    engine = RuleEngine(AlertSettings(), run="t", rank=0)
    fired = []
    for step in range(1, 501):
        fired += engine.observe(step, {"train/loss": 2.0 / (1 + step / 50)})
        if step in evals:
            state = json.loads(json.dumps(engine.state_dict()))
            engine = RuleEngine(AlertSettings(), run="t", rank=0)
            engine.load_state_dict(state)
            fired += engine.observe(step, {"eval/loss": evals[step]})
    assert [(a.rule, a.step) for a in fired] == [("eval_rebound", 500)]


def test_throughput_drop_fires_whatever_the_step_offset() -> None:
    speed = [(s, 1000.0 if s < 3000 else 300.0) for s in range(11, 4000, 10)]  # 11, 21, ...
    alerts = run((s, {"perf/samples_per_s": v}) for s, v in speed)
    assert [a.rule for a in alerts] == ["throughput_drop"]


def divergences(values: list[float], **settings: Any) -> list[tuple[int, Finding]]:
    rule = DivergenceRule(DivergenceSettings(**settings))
    found = []
    for step, value in enumerate(values, start=1):
        found += [(step, f) for f in rule.observe(step, {"train/loss": value})]
    return found


def test_divergence_needs_a_rise_beyond_the_smoothed_values_own_noise() -> None:
    """A loss alternating 1.0 / 1.2 moves 0.2 a point: the EMA over 10 points spreads by
    0.2 x 0.886 x sqrt(alpha / (2 - alpha)) = 0.056, so with ``rise`` at 1% a step up
    must exceed 6 x 0.056 = 0.34. Up 0.2 or 0.3: no alert; up 0.4 or 0.6: an alert."""
    set_language("en")
    base = [1.0 + (0.2 if i % 2 else 0.0) for i in range(200)]
    settings = {"window": 10, "steps": 5, "rise": 0.01, "warmup": 50}
    for up, expected in ((0.2, []), (0.3, []), (0.4, [214]), (0.6, [208])):
        after = [v + up for v in base[:100]]
        assert [s for s, _ in divergences(base + after, **settings)] == expected, up


def test_divergence_alert_in_full_with_the_adaptive_span_and_steps() -> None:
    """A long run (the span is capped at 100 points after 300, the steps at 50 after
    500): the finding's value is the EMA computed here with those spans, and the message
    says how far above the minimum it is and for how many points."""
    set_language("en")
    loss = [
        2.0 / (1 + s / 50) if s < 600 else 0.15 * math.exp((s - 600) / 150) for s in range(1, 1201)
    ]
    ((step, finding),) = divergences(loss)
    ema, low = None, math.inf
    for seen, value in enumerate(loss[:step], start=1):
        alpha = 2.0 / (min(100.0, max(10.0, seen / 3)) + 1)
        ema = value if ema is None else ema + alpha * (value - ema)
        if seen >= 100:
            low = min(low, ema)
    assert finding.value == pytest.approx(ema, rel=1e-12)
    assert finding.baseline == pytest.approx(low, rel=1e-12)
    assert finding.value > 2 * low
    needed = min(50, max(10, step // 10))
    assert needed == 50
    assert (finding.rule, finding.severity, finding.metric) == (
        "divergence",
        "warning",
        "train/loss",
    )
    assert finding.message == (
        f"smoothed train/loss {finding.value:.4g} has stayed {finding.value / low - 1:.0%} "
        f"above its minimum {low:.4g} for 50 points"
    )


def rebounds(points: dict[int, tuple[float, float]], **settings: Any) -> list[tuple[int, Finding]]:
    """Steps 1 to the last of ``points``: ``points[step]`` is (train loss, eval loss)
    of an evaluation step; in between, the train loss of the next evaluation."""
    rule = EvalReboundRule(EvalReboundSettings(**settings))
    found, last = [], max(points)
    for step in range(1, last + 1):
        train = points[min(s for s in points if s >= step)][0]
        values = {"train/loss": train}
        if step in points:
            values["eval/loss"] = points[step][1]
        found += [(step, f) for f in rule.observe(step, values)]
    return found


def test_eval_rebound_compares_the_train_means_whatever_the_evaluation_interval() -> None:
    """Evaluations 50, 100, 100 and 100 steps apart with a flat train loss: its means
    are equal (its sums are not). The alert in full."""
    set_language("en")
    points = {50: (1.0, 1.0), 100: (1.0, 1.1), 200: (1.0, 1.2), 300: (1.0, 1.3)}
    ((step, finding),) = rebounds(points)
    assert (step, finding.rule, finding.severity, finding.metric) == (
        300,
        "eval_rebound",
        "warning",
        "eval/loss",
    )
    assert (finding.value, finding.baseline) == (1.3, 1.2)
    assert finding.message == (
        "eval/loss rose for 3 evaluations in a row to 1.3 while train/loss did not rise"
    )
    # 150 steps, then 50, 50 and 50: the same.
    points = {150: (1.0, 1.0), 200: (1.0, 1.1), 250: (1.0, 1.2), 300: (1.0, 1.3)}
    assert [s for s, _ in rebounds(points)] == [300]


def test_eval_rebound_is_quiet_when_the_train_loss_rises_beyond_its_tolerance() -> None:
    """The train loss rising 5% per evaluation is noise near convergence (tolerance
    10%); rising 20% the model is not overfitting: both losses rise."""
    for growth, expected in ((1.05, [400]), (1.2, [])):
        points = {100 * k: (growth**k, 1.0 + 0.1 * k) for k in range(1, 5)}
        assert [s for s, _ in rebounds(points)] == expected, growth
        assert [s for s, _ in rebounds(points, train_tolerance=0.25)] == [400]


def test_an_eval_loss_that_holds_is_not_rising() -> None:
    flat = {100 * k: (1.0, 0.9) for k in range(1, 6)}
    assert rebounds(flat) == []
    barely = {100 * k: (1.0, 0.9 + 1e-9 * k) for k in range(1, 6)}
    assert [s for s, _ in rebounds(barely)] == [400]


def explosions(
    norms: list[float], step_ms: float = 0.0, **settings: Any
) -> list[tuple[int, Finding]]:
    rule = GradExplosionRule(GradExplosionSettings(**settings))
    found = []
    for step, values in grad_steps(norms, step_ms):
        found += [(step, f) for f in rule.observe(step, values)]
    return found


def test_absolute_thresholds_on_both_sides_of_critical() -> None:
    set_language("en")
    for norm, expected in (
        (10.0, []),
        (10.5, ["warning"]),
        (20.0, ["warning"]),
        (20.5, ["critical"]),
    ):
        found = explosions([1.0, norm], warning=10, critical=20)
        assert [f.severity for _, f in found] == expected, norm
    ((_, finding),) = explosions([20.0], warning=10, critical=20)
    assert (finding.baseline, finding.message) == (10.0, "gradient norm 20 is above 10")


def test_critical_is_above_critical_factor_times_the_median_at_once() -> None:
    """A flat history of 1: 100x for one point is not above 100x (and one point is no
    warning); 100.5x is critical at once. The message in full."""
    set_language("en")
    assert explosions([1.0] * 100 + [100.0] + [1.0] * 5) == []
    ((step, finding),) = explosions([1.0] * 100 + [100.5] + [1.0] * 5)
    assert (step, finding.severity, finding.baseline) == (101, "critical", 1.0)
    assert finding.message == "gradient norm 100.5 is 100x its running median 1"
    ((step, finding),) = explosions([1.0] * 100 + [20.0] * 3)
    assert (step, finding.severity, finding.extra) == (
        103,
        "warning",
        {"points": 3, "seconds": 0.0},
    )
    assert finding.message == "gradient norm 20 is 20x its running median 1"


def test_the_points_after_the_first_need_half_its_distance() -> None:
    """A history whose log norms are -0.5, 0, 0, 0.5 in turn: median 1, robust sd
    1.4826 x 0.5 = 0.74, so the first point must be e^(6 x 0.74) = 85x out (and 10x),
    the next ones e^(3 x 0.74) = 9.2x (and sqrt(10)x). 90x then 20x, 20x warns at the
    third; 90x then 6x, 6x does not."""
    history = [math.exp(d) for d in (-0.5, 0.0, 0.0, 0.5)] * 50
    assert [(s, f.severity) for s, f in explosions([*history, 90.0, 20.0, 20.0])] == [
        (203, "warning")
    ]
    assert explosions([*history, 90.0, 6.0, 6.0]) == []
    assert explosions([*history, 80.0, 20.0, 20.0]) == []  # the first not far enough


def test_a_history_of_zero_norms_is_no_failure() -> None:
    """Steps whose update was skipped (an overflow) may log a norm of 0: a history of
    mostly zeros has no median to compare with, and an explosion once the norm is back
    is still found."""
    norms = [0.0] * 60 + [1.0 + 0.01 * (i % 3) for i in range(200)] + [20.0] * 3
    assert [(s, f.severity) for s, f in explosions(norms)] == [(263, "warning")]


def test_a_run_longer_than_the_held_bound_keeps_its_last_points() -> None:
    """A run of large norms held back for 11 s of 1 ms steps (``min_seconds: 11``) keeps
    at most MAX_WINDOW (10,000) of its points; its time is still counted from its first."""
    ((step, finding),) = explosions([1.0] * 100 + [20.0] * 11_005, step_ms=1.0, min_seconds=11.0)
    assert step == 100 + 11_000
    assert finding.extra == {"points": 10_000, "seconds": 11.0}
    assert finding.baseline == 1.0


def test_vanishing_gradients_alert_in_full() -> None:
    set_language("en")
    rule = GradVanishingRule(GradVanishingSettings())
    found = [
        f
        for s in range(1, 20)
        for f in rule.observe(s, {"train/grad_norm": 1e-4 if s > 5 else 0.5})
    ]
    (finding,) = found
    assert (finding.rule, finding.severity, finding.value, finding.baseline) == (
        "grad_vanishing",
        "warning",
        1e-4,
        1e-3,
    )
    assert finding.message == "gradient norm 0.0001 has been below 0.001 for 5 steps"


def test_a_loss_that_holds_exactly_is_a_plateau() -> None:
    """A value equal to the best is no improvement, even when nothing is required of
    one: a loss stuck at exactly 0 (or at 1 with ``min_delta: 0``) has plateaued; one
    still falling a thousandth each step has not."""
    set_language("en")
    for level, settings in ((0.0, {}), (1.0, {"min_delta": 0.0}), (1.0, {})):
        rule = PlateauRule(PlateauSettings(steps=50, **settings))
        found = [(s, f) for s in range(1, 200) for f in rule.observe(s, {"train/loss": level})]
        assert [(s, f.rule, f.severity, f.baseline) for s, f in found] == [
            (51, "plateau", "info", level)
        ], (level, settings)
    falling = PlateauRule(PlateauSettings(steps=50, min_delta=0.0))
    assert [
        f for s in range(1, 200) for f in falling.observe(s, {"train/loss": 1.0 - s / 1000})
    ] == []
