"""The leading indicators on constructed series: ``layer_grad_outlier`` (a layer against
its own median), ``attention_logit`` (a threshold) and ``attention_logit_growth``
(a trend). Each test pins a boundary a broken rule would cross: the persistence in
steps and in training time, the threshold's ``>=``, the layer the alert names."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mindwatch.alerts.engine import RuleEngine
from mindwatch.common.i18n import set_language
from mindwatch.config import AlertSettings
from mindwatch.rules.attention_logit import (
    AttentionLogitGrowthRule,
    AttentionLogitGrowthSettings,
    AttentionLogitRule,
    AttentionLogitSettings,
)
from mindwatch.rules.base import Finding
from mindwatch.rules.layer_outlier import LayerGradOutlierRule, LayerGradOutlierSettings

LAYERS = ("model.layers.0.attention.wq", "model.layers.0.norm.gamma", "model.layers.1.ffn.w1")


def grad_norms(steps: int, seed: int = 0, sigma: float = 0.3) -> Iterator[dict[str, float]]:
    """Healthy per-layer norms: each layer its own level, lognormal noise, decaying."""
    rng = np.random.default_rng(seed)
    levels = {name: 10.0 ** rng.uniform(-3, 1) for name in LAYERS}
    for step in range(1, steps + 1):
        decay = 1.0 + 3.0 / (1 + step / 30)
        yield {
            f"layers/grad_norm/{name}": float(level * decay * rng.lognormal(0.0, sigma))
            for name, level in levels.items()
        }


def feed(rule: Any, series: list[dict[str, float]], start: int = 1) -> list[tuple[int, Finding]]:
    found = []
    for step, values in enumerate(series, start):
        found += [(step, f) for f in rule.observe(step, values)]
    return found


def layer_rule(**settings: Any) -> LayerGradOutlierRule:
    return LayerGradOutlierRule(LayerGradOutlierSettings(**settings))


def test_healthy_noisy_layers_raise_nothing() -> None:
    for seed in range(5):
        assert feed(layer_rule(), list(grad_norms(3000, seed, sigma=0.5))) == [], seed


def flat(steps: int) -> list[dict[str, float]]:
    """Every layer at 1.0 or 1.02, alternating: a median of 1.02 and a tiny MAD, so
    ``factor`` alone sets the limit (10.2)."""
    return [
        {f"layers/grad_norm/{name}": 1.0 + 0.02 * (step % 2) for name in LAYERS}
        for step in range(steps)
    ]


def test_persistence_is_steps_outlying_points_among_the_last_within() -> None:
    tag = f"layers/grad_norm/{LAYERS[1]}"
    normal = flat(2)[1]  # 1.02, the median
    # Which of the points after 100 are outlying (49x the median), and the step of the
    # finding: 3 of the last 5 (the defaults), or 3 in a row (within: 3).
    for pattern, within, expected in (
        ("xx", 5, []),
        ("xxx", 5, [103]),
        ("x.x.x", 5, [105]),  # the first still among the last 5
        ("x..x.x", 5, []),  # it has left them
        ("x.xx", 3, []),
        ("xx.xxx", 3, [106]),
    ):
        series = flat(100) + [{**normal, tag: 50.0} if c == "x" else normal for c in pattern]
        series += flat(20)
        found = feed(layer_rule(steps=3, within=within), series)
        assert [step for step, _ in found] == expected, (pattern, within)


def test_a_growing_layer_is_named_when_it_passes_factor_times_its_median() -> None:
    set_language("en")
    grows, tag = LAYERS[2], f"layers/grad_norm/{LAYERS[2]}"
    series = flat(200)
    values = []
    for k in range(1, 60):
        point = dict(series[-2 + k % 2])
        point[tag] = 1.02 * 1.1**k
        values.append(point[tag])
        series.append(point)
    # Independently: the median of the layer's last 100 points before each one.
    history = [v[tag] for v in series]
    first = next(
        i for i in range(200, len(history)) if history[i] > 10 * np.median(history[i - 100 : i])
    )
    found = feed(layer_rule(), series)
    assert len(found) == 1
    step, finding = found[0]
    assert step == first + 1 + 2  # 1-based; the third outlying point in a row
    assert (finding.metric, finding.extra["layer"], finding.severity) == (tag, grows, "warning")
    assert finding.message.startswith(f"layer {grows}: gradient norm ")
    assert "its own median 1.02, outlying at 3 of its last 5 steps" in finding.message
    assert finding.baseline is not None
    assert math.isclose(finding.baseline, 1.02, rel_tol=1e-9)


def test_the_layer_furthest_above_its_median_is_named_and_the_others_listed() -> None:
    fast, slow = f"layers/grad_norm/{LAYERS[0]}", f"layers/grad_norm/{LAYERS[1]}"
    series = flat(120)
    for k in range(1, 8):
        series.append({**series[-2], slow: 1.02 * 30 * k, fast: 1.02 * 40 * k})
    ((_, finding),) = feed(layer_rule(), series)
    assert (finding.metric, finding.extra["layer"]) == (fast, LAYERS[0])
    assert finding.extra["others"] == [LAYERS[1]]
    assert finding.message.endswith(f"; also outlying: {LAYERS[1]}")
    assert finding.severity == "critical"  # 120x its median at the third point


def test_persistence_in_training_time_counts_from_the_first_outlying_point() -> None:
    tag = f"layers/grad_norm/{LAYERS[0]}"
    series = [{**v, "perf/step_time_ms": 100.0} for v in flat(100)]
    for _ in range(30):
        series.append({**series[-2], tag: 50.0})
    # 100 ms a step: 1 s spans 11 points, the first at step 101.
    found = feed(layer_rule(steps=3, seconds=1.0), series)
    assert [step for step, _ in found] == [111]
    assert found[0][1].extra["seconds"] == 1.0
    # Without step times the steps alone decide.
    plain = [{k: v for k, v in p.items() if k != "perf/step_time_ms"} for p in series]
    assert [step for step, _ in feed(layer_rule(steps=3, seconds=1.0), plain)] == [103]


def test_one_finding_per_episode_which_ends_after_within_normal_points() -> None:
    tag = f"layers/grad_norm/{LAYERS[0]}"
    normal = flat(2)[1]
    for gap, expected in ((4, [103]), (5, [103, 114])):
        series = flat(100) + [{**normal, tag: 50.0}] * 6 + [normal] * gap
        series += [{**normal, tag: 50.0}] * 6
        assert [step for step, _ in feed(layer_rule(), series)] == expected, gap


def test_nonfinite_and_zero_norms_are_skipped_and_state_survives_a_restart() -> None:
    tag = f"layers/grad_norm/{LAYERS[0]}"
    series = list(grad_norms(400, seed=3))
    series[50] = {**series[50], tag: math.nan}
    series[51] = {**series[51], tag: 0.0}
    series[52] = {**series[52], tag: math.inf}
    for k in range(300, 400):
        series[k] = {**series[k], tag: series[k][tag] * 1.08 ** (k - 299)}
    whole = feed(layer_rule(), series)
    assert len(whole) == 1
    assert whole[0][1].metric == tag
    expected = [(s, f.message) for s, f in whole]
    for split in (20, 40, 137, 310, 320, whole[0][0] - 1, whole[0][0] + 5):
        first = layer_rule()
        before = feed(first, series[:split])
        second = layer_rule()
        second.load_state_dict(json.loads(json.dumps(first.state_dict(), allow_nan=False)))
        after = feed(second, series[split:], start=split + 1)
        assert [(s, f.message) for s, f in before + after] == expected, split


def logits(values: list[float], tag: str = "max_attention_logit/max") -> list[dict[str, float]]:
    return [{tag: v, "train/loss": 1.0} for v in values]


def test_attention_logit_at_the_threshold_warns_and_critical_above() -> None:
    set_language("en")
    rule = AttentionLogitRule(AttentionLogitSettings())
    found = feed(rule, logits([50.0, 99.99, 100.0, 120.0, 999.0, 1000.0, 1500.0, 90.0, 100.0]))
    assert [(s, f.severity, f.value) for s, f in found] == [
        (3, "warning", 100.0),
        (6, "critical", 1000.0),
        (9, "warning", 100.0),  # a new episode after 90
    ]
    assert found[0][1].message == "max_attention_logit/max is 100, at or above 100 for 1 steps"


def test_attention_logit_needs_its_steps_in_a_row_and_names_the_largest_tag() -> None:
    rule = AttentionLogitRule(AttentionLogitSettings(steps=2))
    series = [
        {"max_attention_logit/layers.0": 150.0, "max_attention_logit/layers.3": 20.0},
        {"max_attention_logit/layers.0": 60.0, "max_attention_logit/layers.3": 20.0},
        {"max_attention_logit/layers.0": 60.0, "max_attention_logit/layers.3": 130.0},
        {"max_attention_logit/layers.0": 60.0, "max_attention_logit/layers.3": 140.0},
    ]
    ((step, finding),) = feed(rule, series)
    assert (step, finding.metric, finding.value) == (4, "max_attention_logit/layers.3", 140.0)


def test_attention_logit_growth_fires_once_the_grown_median_reaches_the_floor() -> None:
    set_language("en")
    settings = AttentionLogitGrowthSettings()
    values = [5.0 + 0.1 * (i % 3) for i in range(100)] + [5.0 * 1.03**k for k in range(1, 150)]
    # Independently: at point t (0-based) the newest median is values[t - 2] (rising),
    # the oldest values[t - 52]; the condition must hold on 5 points in a row.
    ok = [
        t >= 54 and values[t - 2] >= 20.0 and values[t - 2] >= 2.0 * values[t - 52]
        for t in range(len(values))
    ]
    expected = next(t for t in range(4, len(ok)) if all(ok[t - 4 : t + 1])) + 1
    found = feed(AttentionLogitGrowthRule(settings), logits(values))
    assert [s for s, _ in found] == [expected]
    finding = found[0][1]
    assert finding.message.startswith("max_attention_logit/max grew ")
    assert " in 50 steps, from " in finding.message
    assert "(for 5 steps)" in finding.message
    assert finding.value is not None
    assert finding.value >= 20.0


def test_attention_logit_growth_ignores_slow_growth_and_small_logits() -> None:
    slow = [30.0 * 1.01**k for k in range(400)]  # 1.6x in 50 steps
    small = [0.5 * 1.05**k for k in range(70)]  # fast, but below the floor of 20
    for values in (slow, small):
        assert feed(AttentionLogitGrowthRule(AttentionLogitGrowthSettings()), logits(values)) == []


def test_the_engine_runs_them_with_the_defaults_and_names_the_layer() -> None:
    settings = AlertSettings(layer_grad_outlier={"enabled": True})
    engine = RuleEngine(settings, run="t", rank=0)
    tag = f"layers/grad_norm/{LAYERS[0]}"
    alerts = []
    for step, values in enumerate(flat(100) + [{**flat(2)[0], tag: 50.0}] * 3, 1):
        alerts += engine.observe(step, {**values, "train/loss": 1.0})
    (alert,) = [a for a in alerts if a.rule == "layer_grad_outlier"]
    assert (alert.step, alert.metric, alert.extra["layer"]) == (103, tag, LAYERS[0])
    assert alert.causes
    assert "layer" in alert.causes[0]


def test_a_layer_of_rounding_noise_against_the_global_norm_is_not_judged() -> None:
    tag = f"layers/grad_norm/{LAYERS[0]}"
    series = [{tag: 1e-9 * (1.0 + 0.02 * (s % 2)), "train/grad_norm": 1.0} for s in range(100)]
    series += [{tag: 5e-8, "train/grad_norm": 1.0}] * 3  # 49x, but 5e-8 of the global norm
    assert feed(layer_rule(), series) == []
    # At the share (1e-6 of the norm, here 5e-8 / 0.05) it is judged; without a global
    # norm logged there is no share to test.
    at_share = [{**p, "train/grad_norm": 0.05} if i >= 100 else p for i, p in enumerate(series)]
    assert [s for s, _ in feed(layer_rule(), at_share)] == [103]
    alone = [{tag: p[tag]} for p in series]
    assert [s for s, _ in feed(layer_rule(), alone)] == [103]


def test_a_slow_ramp_does_not_drag_the_layers_median_up_behind_it() -> None:
    # 1.03x per step: within a 100-point window a median that took every point would
    # follow it (the ratio to it would stay near 1.03**50 = 4.4, below the factor).
    tag = f"layers/grad_norm/{LAYERS[0]}"
    series = flat(200)
    for k in range(1, 120):
        series.append({**series[-2 + k % 2], tag: 1.02 * 1.03**k})
    first_k = next(k for k in range(1, 120) if 1.03**k > 10.0)  # 10x the median 1.02
    assert [s for s, _ in feed(layer_rule(), series)] == [200 + first_k + 2]


def test_attention_logit_growth_at_exactly_the_floor_and_the_growth() -> None:
    # 10 then 20: the newest median is 20 (the floor) from the 3rd point of 20 on,
    # twice (the growth) the oldest; 5 points in a row: the 7th point of 20, step 67.
    values = [10.0] * 60 + [20.0] * 20
    found = feed(AttentionLogitGrowthRule(AttentionLogitGrowthSettings()), logits(values))
    assert [s for s, _ in found] == [67]


def test_tags_that_appear_later_are_read() -> None:
    # The tags a rule reads are found once per set of tags: a new set is looked at again.
    rule = AttentionLogitRule(AttentionLogitSettings())
    series = [{"train/loss": 1.0}] * 10 + logits([150.0])
    assert [s for s, _ in feed(rule, series)] == [11]
    tag = f"layers/grad_norm/{LAYERS[0]}"
    late = [{"train/loss": 1.0}] * 10 + [{**p, "train/loss": 1.0} for p in flat(100)]
    late += [{**late[-2], tag: 50.0}] * 3
    assert [s for s, _ in feed(layer_rule(), late)] == [113]


def restarted(series: list[dict[str, float]], split: int) -> list[int]:
    """The steps of the findings when the rule is saved after ``split`` points and a new
    one continues from that state."""
    first = layer_rule()
    before = feed(first, series[:split])
    second = layer_rule()
    second.load_state_dict(json.loads(json.dumps(first.state_dict(), allow_nan=False)))
    return [s for s, _ in before + feed(second, series[split:], start=split + 1)]


def test_a_restart_keeps_a_new_level_being_learnt_and_the_cached_statistics() -> None:
    tag = f"layers/grad_norm/{LAYERS[0]}"
    # A new level 5x the old (above the midpoint, below the limit): kept out for 100
    # points, then learnt; 30 is then 6x it, no outlier. Saved halfway through.
    level = flat(100) + [{tag: 5.1}] * 155 + [{tag: 30.0}] * 3
    level = [{tag: p[tag]} for p in level]
    assert [s for s, _ in feed(layer_rule(), level)] == []
    assert restarted(level, 160) == []
    # A level 100x lower: statistics cached 50 points earlier still see the old one, so
    # 15 (15x the new level) is not judged yet; a restored rule must judge the same.
    drop = [{tag: 100.0 * (1 + 0.02 * (i % 2))} for i in range(100)]
    drop += [{tag: 1.0 + 0.02 * (i % 2)} for i in range(60)] + [{tag: 15.0}] * 5
    whole = [s for s, _ in feed(layer_rule(), drop)]
    assert restarted(drop, 155) == whole


def test_the_attention_rules_continue_across_a_restart() -> None:
    values = [5.0 + 0.1 * (i % 3) for i in range(100)] + [5.0 * 1.03**k for k in range(1, 200)]
    series = logits(values)
    for rule_type, settings in (
        (AttentionLogitGrowthRule, AttentionLogitGrowthSettings(steps=8)),
        (AttentionLogitRule, AttentionLogitSettings(steps=4)),
    ):
        whole = [(s, f.message) for s, f in feed(rule_type(settings), series)]
        assert whole, rule_type
        for split in range(whole[0][0] - 6, whole[0][0]):
            first = rule_type(settings)
            before = feed(first, series[:split])
            second = rule_type(settings)
            second.load_state_dict(json.loads(json.dumps(first.state_dict())))
            after = feed(second, series[split:], start=split + 1)
            assert [(s, f.message) for s, f in before + after] == whole, (rule_type, split)


def test_the_layer_rule_judges_the_norms_a_training_process_logs_apart(tmp_path: Any) -> None:
    """In training the per-layer norms arrive through ``log_scalars`` (the MindSpore
    callback's way), before their step; the training process's own rules see them with
    it, and the alert is explained (forensics)."""
    import mindwatch

    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as monitor:
        for step, healthy in enumerate(grad_norms(200), start=1):
            tag = f"layers/grad_norm/{LAYERS[1]}"
            norms = {**healthy, tag: healthy[tag] * (50 if step > 150 else 1)}
            monitor.log_scalars(step, norms)
            monitor.log_step(step, loss=1.0, grad_norm=sum(v * v for v in norms.values()) ** 0.5)
        run = monitor.logdir
    lines = [json.loads(line) for line in (run / "alerts.jsonl").read_text().splitlines()]
    found = [a for a in lines if a["rule"] == "layer_grad_outlier"]
    assert found, lines
    assert 150 < found[0]["step"] <= 156
    assert found[0]["layer"] == LAYERS[1]
    assert "forensics" in found[0]


def test_attention_logit_names_the_largest_value_whatever_the_order_of_the_tags() -> None:
    """3 to 8 layers, the largest in every position (the other values grow with the
    tag's name, so the last name is never the largest by chance); of two equal largest
    values the first in the step's order is named."""
    for layers in (3, 5, 8):
        tags = [f"max_attention_logit/layers.{i}" for i in range(layers)]
        for hot in range(layers):
            values = {tag: 10.0 + i for i, tag in enumerate(tags)}
            values[tags[hot]] = 150.0
            ((_, finding),) = feed(AttentionLogitRule(AttentionLogitSettings()), [values])
            assert (finding.rule, finding.severity, finding.metric, finding.value) == (
                "attention_logit",
                "warning",
                tags[hot],
                150.0,
            ), (layers, hot)
            assert (finding.baseline, finding.extra) == (100.0, {"steps": 1})
        tied = dict.fromkeys(tags, 10.0)
        tied[tags[1]] = tied[tags[-1]] = 1200.0
        ((_, finding),) = feed(AttentionLogitRule(AttentionLogitSettings()), [tied])
        assert (finding.severity, finding.metric, finding.baseline) == (
            "critical",
            tags[1],
            1000.0,
        )


def test_attention_logit_growth_alert_in_full() -> None:
    set_language("en")
    values = [10.0] * 60 + [20.0] * 20  # as above: the 7th point of 20, step 67
    ((step, finding),) = feed(
        AttentionLogitGrowthRule(AttentionLogitGrowthSettings()), logits(values)
    )
    assert (step, finding.rule, finding.severity, finding.metric) == (
        67,
        "attention_logit_growth",
        "warning",
        "max_attention_logit/max",
    )
    assert (finding.value, finding.baseline) == (20.0, 10.0)
    assert finding.extra == {"ratio": 2.0, "window": 50, "steps": 5}
    assert (
        finding.message
        == "max_attention_logit/max grew 2.0x in 50 steps, from 10 to 20 (for 5 steps)"
    )


def test_the_layer_alert_in_full() -> None:
    """Every field the alert carries, against values computed here: 130 ms steps and
    ``seconds: 0.5``, so the run lasts a fraction of a second; the median of the flat
    series is 1.02 and its noise comes from its successive differences."""
    set_language("en")
    tag = f"layers/grad_norm/{LAYERS[0]}"
    series = [{**v, "perf/step_time_ms": 130.0} for v in flat(100)]
    series += [{**series[-2], tag: 50.0}] * 8
    ((step, finding),) = feed(layer_rule(steps=3, seconds=0.5), series)
    # 0.5 s from the first outlying point (step 101): 4 steps of 130 ms later, step 105.
    assert step == 105
    center, step_log = math.log(1.02), math.log(1.02) - math.log(1.0)
    noise = 1.4826 * min(step_log, step_log / math.sqrt(2.0))
    z = (math.log(50.0) - center) / noise
    assert finding.extra == {
        "layer": LAYERS[0],
        "ratio": round(50.0 / 1.02, 3),
        "zscore": round(z, 2),
        "steps": 5,
        "within": 5,
        "seconds": 0.52,
        "others": [],
    }
    assert finding.extra["zscore"] != round(z)  # two decimals, not a whole number
    assert (finding.rule, finding.severity, finding.metric, finding.value) == (
        "layer_grad_outlier",
        "warning",
        tag,
        50.0,
    )
    assert finding.message == (
        f"layer {LAYERS[0]}: gradient norm 50 is 49x its own median 1.02, outlying at 5 of "
        f"its last 5 steps (robust z {z:.0f})"
    )


def test_a_layer_that_drifted_has_the_noise_of_its_successive_differences() -> None:
    """A layer's norm falls 100x over its first 130 points (log-linear, wobbling by
    +-0.2): its window is wide from the trend (median absolute deviation ~0.9 in log),
    the noise is that of its successive differences (~0.38). 17x and 51x its median
    are outlying (above 10x, and beyond 6 noises); 7x is not."""
    tag = f"layers/grad_norm/{LAYERS[0]}"
    ramp = [{tag: math.exp(4.6 * (1 - i / 129) + (0.2 if i % 2 else -0.2))} for i in range(130)]
    logs = [math.log(p[tag]) for p in ramp[30:]]  # the last 100 points: the window
    center = sorted(logs)[50]
    diffs = sorted(abs(b - a) for a, b in zip(logs, logs[1:]))
    noise = 1.4826 * diffs[len(diffs) // 2] / math.sqrt(2.0)
    assert 0.3 < noise < 0.45
    limit = math.exp(center + max(math.log(10.0), 6.0 * noise))
    for jump in (100.0, 300.0):
        ((step, finding),) = feed(layer_rule(), ramp + [{tag: jump}] * 3)
        assert step == 133
        assert finding.baseline == pytest.approx(math.exp(center))
        assert finding.extra["zscore"] == pytest.approx((math.log(jump) - center) / noise, abs=0.01)
    assert 40.0 < limit < 100.0
    assert feed(layer_rule(), ramp + [{tag: 40.0}] * 3) == []


def test_a_layer_is_judged_from_the_point_after_its_warmup() -> None:
    tag = f"layers/grad_norm/{LAYERS[0]}"
    for warmup in (5, 30, 64):
        series = [{tag: p[tag]} for p in flat(warmup)] + [{tag: 50.0}] * 3
        assert [s for s, _ in feed(layer_rule(warmup=warmup), series)] == [warmup + 3]


def test_a_restart_keeps_the_points_a_layer_was_outlying_at_and_since_when() -> None:
    """Saved at every point of a run of outlying points: the restored rule counts the
    same points among the last ``within`` (which points have left them), and the same
    training time since the run began."""
    tag = f"layers/grad_norm/{LAYERS[0]}"
    normal = {**flat(2)[1], "perf/step_time_ms": 100.0}
    for pattern, settings in (("x..x.x...", {}), ("xxxxxxxxxxxxxxx", {"seconds": 1.0})):
        series = [{**p, "perf/step_time_ms": 100.0} for p in flat(100)]
        series += [{**normal, tag: 50.0} if c == "x" else normal for c in pattern]
        whole = [(s, f.extra) for s, f in feed(layer_rule(**settings), series)]
        assert [s for s, _ in whole] == ([] if not settings else [111])
        for split in range(100, len(series)):
            first = layer_rule(**settings)
            before = feed(first, series[:split])
            second = layer_rule(**settings)
            second.load_state_dict(json.loads(json.dumps(first.state_dict(), allow_nan=False)))
            after = feed(second, series[split:], start=split + 1)
            assert [(s, f.extra) for s, f in before + after] == whole, (pattern, split)


def test_a_state_without_the_episode_keeps_the_rules_own() -> None:
    """What Stateful promises: a key the state lacks keeps its value. A rule that warned
    in this episode and is given a state without ``raised`` stays quiet until it ends."""
    tag = f"layers/grad_norm/{LAYERS[0]}"
    rule = layer_rule()
    outlying = [{**flat(2)[1], tag: 50.0}] * 6
    assert [s for s, _ in feed(rule, flat(100) + outlying[:3])] == [103]
    rule.load_state_dict({"clock": rule.clock.state_dict()})
    assert feed(rule, outlying[3:], start=104) == []
