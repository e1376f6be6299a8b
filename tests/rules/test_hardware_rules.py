"""The hardware rules (npu_temperature, hbm_full, npu_health, memory_growth) on
constructed values: a sample every ``every`` steps of ``step_ms`` each, as the
telemetry joins the steps (at most once per sampling period)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pytest

from mindwatch.aggregate.reductions import spread_tags
from mindwatch.alerts import RuleEngine
from mindwatch.common.i18n import set_language
from mindwatch.config import AlertSettings, ConfigError, MonitorConfig
from mindwatch.rules.base import Finding, Rule
from mindwatch.rules.hardware import (
    HbmFullRule,
    HbmFullSettings,
    NpuHealthRule,
    NpuHealthSettings,
    NpuTemperatureRule,
    NpuTemperatureSettings,
)
from mindwatch.rules.memory_growth import MemoryGrowthRule, MemoryGrowthSettings
from mindwatch.rules.sustained import outlier_rank


@pytest.fixture(autouse=True)
def _english() -> None:
    set_language("en")


def run(
    rule: Rule[Any],
    samples: list[Mapping[str, float]],
    *,
    every: int = 10,
    step_ms: float = 500.0,
    after: int = 0,
    repeat: int = 1,
) -> list[tuple[int, Finding]]:
    """Feed every step after ``after`` (with its step time); ``samples[i]`` joins step
    ``after + every * (i + 1)``, each a new sample (its ``hw/cpu_percent`` differs), or
    each the same sample ``repeat`` times in a row (as under a short reduction interval)."""
    found = []
    for i, sample in enumerate(samples):
        for step in range(after + every * i + 1, after + every * (i + 1) + 1):
            values: dict[str, float] = {"perf/step_time_ms": step_ms, "train/loss": 1.0}
            if step == after + every * (i + 1):
                values.update(sample)
                values["hw/cpu_percent"] = float(i // repeat)
            found += [(step, f) for f in rule.observe(step, values)]
    return found


def temp(value: float, argmax: int = 3) -> dict[str, float]:
    return {"hw/npu_temp_c": value, "ranks/npu_temp_c_argmax": float(argmax)}


# ---------------------------------------------------------------- npu_temperature


def test_temperature_warns_then_turns_critical_naming_the_rank() -> None:
    rule = NpuTemperatureRule(NpuTemperatureSettings())  # 3 samples spanning 20 s
    # a sample every 10 steps of 0.5 s: 5 s apart, as with the default period
    values = [temp(60)] * 4 + [temp(88)] * 6 + [temp(97)] * 6
    found = run(rule, values)
    assert [(f.severity, f.rank, f.value, f.baseline) for _, f in found] == [
        ("warning", 3, 88.0, 85.0),
        ("critical", 3, 97.0, 95.0),
    ]
    (warn_step, warning), (crit_step, critical) = found
    assert warn_step == 10 * (4 + 5)  # 5 samples in a row span 20 s (3 span only 10 s)
    assert crit_step == 10 * (10 + 5)
    assert warning.message == ("NPU chip temperature 88 °C, at or above 85 °C for 5 samples (20 s)")
    assert warning.metric == "hw/npu_temp_c"
    assert critical.extra == {"samples": 5, "seconds": 20.0}


def test_temperature_quiet_when_normal_or_a_short_burst() -> None:
    rule = NpuTemperatureRule(NpuTemperatureSettings())
    burst = [temp(55)] * 5 + [temp(90)] * 4 + [temp(55)] * 5  # 15 s hot: below 20 s
    assert run(rule, burst * 4) == []
    assert run(rule, [temp(84.9)] * 50) == []


def test_temperature_one_alert_per_episode_and_a_new_one_after_cooling() -> None:
    rule = NpuTemperatureRule(NpuTemperatureSettings(samples=2, seconds=0))
    episode = [temp(86)] * 6 + [temp(50)]
    found = run(rule, episode * 3)
    assert [f.severity for _, f in found] == ["warning"] * 3


def test_repeated_samples_do_not_stand_for_time() -> None:
    """Under reduction with short intervals one sample joins several steps: the span in
    training time decides, not the count of steps that carry it."""
    rule = NpuTemperatureRule(NpuTemperatureSettings(samples=3, seconds=20))
    found = run(rule, [temp(90)] * 30, every=1, step_ms=500.0)  # 30 points in 15 s
    assert found == []
    found = run(rule, [temp(90)] * 20, every=1, step_ms=500.0, after=30)  # 10 s more
    assert len(found) == 1
    # ... and one sample repeated at several steps counts once: 2 samples in 25 s
    rule = NpuTemperatureRule(NpuTemperatureSettings(samples=3, seconds=20))
    assert run(rule, [temp(90)] * 50, every=1, repeat=25) == []
    found = run(rule, [temp(90)] * 10, every=1, repeat=25, after=50)
    assert [(f.extra["samples"], f.extra["seconds"]) for _, f in found] == [(3, 25.0)]


def test_without_step_times_the_samples_alone_decide() -> None:
    rule = NpuTemperatureRule(NpuTemperatureSettings(samples=3, seconds=20))
    found = [
        f
        for step in range(1, 5)
        for f in rule.observe(step, {**temp(90), "hw/cpu_percent": float(step)})
    ]
    assert len(found) == 1  # the third sample


def test_temperature_thresholds_are_ordered() -> None:
    with pytest.raises(ConfigError, match="critical_c"):
        MonitorConfig.from_dict(
            {"alerts": {"npu_temperature": {"warning_c": 90, "critical_c": 80}}}
        )


def test_state_survives_a_restart() -> None:
    settings = NpuTemperatureSettings()
    rule = NpuTemperatureRule(settings)
    assert run(rule, [temp(90)] * 3) == []
    saved = json.loads(json.dumps(rule.state_dict()))
    again = NpuTemperatureRule(settings)
    again.load_state_dict(saved)
    steps = [step for step, _ in run(again, [temp(90)] * 2, after=30)]
    assert steps == [50]  # the 5th sample in a row, counted across the restart


# ---------------------------------------------------------------- hbm_full


def hbm(used: float, total: float = 65536.0, argmax: int = 2) -> dict[str, float]:
    return {
        "hw/npu_hbm_used_mb": used,
        "hw/npu_hbm_total_mb": total,
        "hw/npu_hbm_used_pct": round(100.0 * used / total, 2),
        "ranks/npu_hbm_used_pct_argmax": float(argmax),
    }


def test_hbm_nearly_full_warns_naming_the_rank() -> None:
    rule = HbmFullRule(HbmFullSettings())
    found = run(rule, [hbm(30000)] * 3 + [hbm(63000)] * 8)
    assert [(f.severity, f.rank) for _, f in found] == [("warning", 2)]
    assert found[0][1].message == (
        "NPU HBM at 96.1%, 63000 of 65536 MB used: at or above 95%, for 5 samples (20 s)"
    )


def test_hbm_critical_and_used_over_total_without_a_share() -> None:
    rule = HbmFullRule(HbmFullSettings())
    plain = [{"hw/npu_hbm_used_mb": 65300.0, "hw/npu_hbm_total_mb": 65536.0}] * 6
    found = run(rule, plain)
    assert [f.severity for _, f in found] == ["critical"]
    assert found[0][1].rank is None  # one process: the engine names its own rank


def test_hbm_from_its_share_alone_and_the_alert_in_full() -> None:
    """A probe that gives the share but not the megabytes: the message says what it does
    not know. 5 samples of 512.3456 ms steps span 20.494 s (to the ms)."""
    rule = HbmFullRule(HbmFullSettings())
    share = {"hw/npu_hbm_used_pct": 96.0, "ranks/npu_hbm_used_pct_argmax": 4.0}
    ((step, finding),) = run(rule, [share] * 6, step_ms=512.3456)
    assert (step, finding.rule, finding.severity, finding.rank) == (50, "hbm_full", "warning", 4)
    assert (finding.value, finding.baseline) == (96.0, 95.0)
    assert finding.extra == {"samples": 5, "seconds": round(40 * 512.3456 / 1000, 3)}
    assert finding.extra["seconds"] == 20.494
    assert finding.message == (
        "NPU HBM at 96.0%, ? of ? MB used: at or above 95%, for 5 samples (20 s)"
    )


def test_hbm_of_a_card_that_reports_no_total_is_no_value() -> None:
    """used / total needs a total: a card that reports 0 MB (a probe that failed to
    parse it) gives no share, and the rule goes on to judge the next one."""
    rule = HbmFullRule(HbmFullSettings())
    zero = {"hw/npu_hbm_used_mb": 100.0, "hw/npu_hbm_total_mb": 0.0}
    plain = {"hw/npu_hbm_used_mb": 65300.0, "hw/npu_hbm_total_mb": 65536.0}
    found = run(rule, [zero] * 10 + [plain] * 6)
    assert [(step, f.severity, f.value) for step, f in found] == [
        (150, "critical", pytest.approx(100.0 * 65300 / 65536))
    ]


def test_the_rank_is_read_from_the_reductions_own_argmax_tag() -> None:
    """``ranks/<name>_argmax`` as the aggregator names it for any tag: one part after
    the first slash or several, or none."""
    for tag in ("hw/npu_temp_c", "hw/npu/3/temp_c", "temp_c", "hw/a/b/c"):
        assert outlier_rank({spread_tags(tag)[4]: 5.0}, tag) == 5, tag
        assert outlier_rank({spread_tags(tag)[4]: math.nan}, tag) is None, tag
        assert outlier_rank({}, tag) is None, tag


def test_hbm_quiet_below_the_threshold() -> None:
    rule = HbmFullRule(HbmFullSettings())
    assert run(rule, [hbm(61000)] * 60) == []  # 93 %


# ---------------------------------------------------------------- npu_health


def health(code: float, argmax: int = 5) -> dict[str, float]:
    return {"hw/npu_health": code, "ranks/npu_health_argmax": float(argmax)}


@pytest.mark.parametrize(
    ("code", "severity", "state"),
    [(1.0, "warning", "Warning"), (2.0, "critical", "Alarm"), (3.0, "critical", "Critical"),
     (4.0, "warning", "unknown")],
)  # fmt: skip
def test_health_not_ok_maps_to_a_severity(code: float, severity: str, state: str) -> None:
    rule = NpuHealthRule(NpuHealthSettings())
    found = run(rule, [health(0)] * 3 + [health(code)] * 3)
    assert [(f.severity, f.rank, f.extra["state"]) for _, f in found] == [(severity, 5, state)]
    assert found[0][0] == 40  # the first sample not OK
    shown = "a state mindwatch does not know" if state == "unknown" else state
    assert found[0][1].message == f"NPU health is {shown} (code {code:g}, 0 is OK) for 1 samples"


def test_health_ok_is_quiet_and_a_worse_state_raises_again() -> None:
    rule = NpuHealthRule(NpuHealthSettings())
    assert run(rule, [health(0)] * 20) == []
    found = run(rule, [health(1)] * 3 + [health(3)] * 3)
    assert [f.severity for _, f in found] == ["warning", "critical"]


# ---------------------------------------------------------------- memory_growth


def growth(mb_per_min: float, share: float, argmax: int = 1) -> dict[str, float]:
    return {
        "hw/rss_growth_mb_per_min": mb_per_min,
        "hw/rss_rising_share": share,
        "ranks/rss_growth_mb_per_min_argmax": float(argmax),
        "hw/rss_mb": 900.0,
    }


def test_a_steady_leak_warns_naming_the_rank() -> None:
    rule = MemoryGrowthRule(MemoryGrowthSettings())  # 5 min after 2 min skipped
    # 5 s apart: 24 samples skip the first 2 minutes, then 61 span 5 minutes
    values = [growth(400, 1.0)] * 24 + [growth(60, 0.9)] * 70
    found = run(rule, values)
    assert len(found) == 1
    step, finding = found[0]
    assert step == 10 * (24 + 61)
    assert (finding.rank, finding.severity, finding.value, finding.baseline) == (
        1,
        "warning",
        60.0,
        10.0,
    )
    assert finding.message == (
        "host memory (RSS) grows 60 MB/min, 90% of the samples rising, for 61 samples "
        "(300 s); threshold 10 MB/min"
    )
    assert finding.extra == {"rising_share": 0.9, "samples": 61, "seconds": 300.0}


def test_warm_up_plateau_noise_and_a_one_off_jump_are_quiet() -> None:
    rule = MemoryGrowthRule(MemoryGrowthSettings())
    warm_up = [growth(300, 1.0)] * 20  # compilation, workers: the first 100 s
    plateau = [growth(0.0, 0.1)] * 100
    creep = [growth(1.4, 0.71)] * 100  # page by page: most samples rise, slowly
    noisy = [growth(12.0 if i % 3 else -8.0, 0.5) for i in range(100)]  # a level, wobbling
    jump = [growth(40.0, 0.3)] * 30  # a cache filled once: a slope, few rising samples
    assert run(rule, warm_up + plateau + creep + noisy + jump + plateau) == []


def test_growth_that_stops_before_the_span_is_quiet_and_episodes_restart() -> None:
    rule = MemoryGrowthRule(MemoryGrowthSettings(seconds=60, skip_seconds=0))
    short = [growth(50, 1.0)] * 10 + [growth(0, 0.0)]  # 45 s
    assert run(rule, short * 5) == []
    long = [growth(50, 1.0)] * 14 + [growth(0, 0.0)]  # 65 s
    assert len(run(rule, long * 2)) == 2


def test_memory_growth_state_survives_a_restart() -> None:
    settings = MemoryGrowthSettings(seconds=60, skip_seconds=10)
    rule = MemoryGrowthRule(settings)
    assert run(rule, [growth(0, 0.0)] * 3 + [growth(50, 1.0)] * 8) == []
    again = MemoryGrowthRule(settings)
    again.load_state_dict(json.loads(json.dumps(rule.state_dict())))
    found = run(again, [growth(50, 1.0)] * 8, after=110)
    assert [(step, f.extra["samples"]) for step, f in found] == [(160, 13)]  # 60 s


def test_the_engine_writes_the_rank_into_the_alert() -> None:
    settings = AlertSettings(memory_growth={"seconds": 10, "skip_seconds": 0, "samples": 2})
    engine = RuleEngine(settings, run="t", rank=0)
    alerts = []
    for i in range(6):
        for step in range(10 * i + 1, 10 * i + 11):
            values = {"perf/step_time_ms": 500.0}
            if step % 10 == 0:
                values.update({**growth(80, 1.0, argmax=1), "hw/cpu_percent": float(i)})
            alerts += engine.observe(step, values)
    assert [(a.rule, a.rank, a.step) for a in alerts] == [("memory_growth", 1, 30)]
    assert "rank 1" in alerts[0].line()


def test_defaults_are_for_real_runs() -> None:
    """Minutes, not seconds, by default; the tests' short spans are settings."""
    s = MemoryGrowthSettings()
    assert s.seconds >= 120
    assert s.skip_seconds >= 60
    assert s.samples >= 3
    t = NpuTemperatureSettings()
    assert (t.warning_c, t.critical_c) == (85.0, 95.0)
