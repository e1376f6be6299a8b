"""``loss_scale_collapse`` on synthetic loss-scale series: quiet on a healthy float16
run (its calibration included), a warning when the scale halves step after step or
falls below the floor."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mindwatch.alerts import Alert, RuleEngine
from mindwatch.common.i18n import set_language
from mindwatch.config import AlertSettings

TAG = "train/loss_scale"


def alerts_of(series: Iterable[tuple[int, float]], settings: Any = None) -> list[Alert]:
    engine = RuleEngine(AlertSettings(**(settings or {})), run="test", rank=0)
    found: list[Alert] = []
    for step, scale in series:
        found += engine.observe(step, {TAG: scale, "train/loss": 1.0})
    return [a for a in found if a.rule == "loss_scale_collapse"]


def dynamic_scale(steps: int, overflows: set[int], start: float = 2.0**16) -> list[float]:
    """What ``nn.DynamicLossScaleUpdateCell`` does (factor 2, window 1000, at least 1):
    the scale after each step's update."""
    scale, clean, out = start, 0, []
    for step in range(1, steps + 1):
        if step in overflows:
            scale, clean = max(scale / 2, 1.0), 0
        else:
            clean += 1
            if clean == 1000:
                scale, clean = scale * 2, 0
        out.append(scale)
    return out


def test_a_healthy_fp16_run_with_its_calibration_is_quiet() -> None:
    # Calibration: a 2**32 scale halves at each of the first 16 steps until it fits;
    # then an overflow now and then, and growth after every 1000 clean steps.
    overflows = set(range(1, 17)) | {700, 701, 1500, 2600, 2601, 2602, 2603}
    scales = dynamic_scale(4000, overflows, start=2.0**32)
    assert scales[15] == 2.0**16
    assert alerts_of(enumerate(scales, start=1)) == []


def test_overflow_at_every_step_from_a_known_step() -> None:
    scales = dynamic_scale(300, set(range(200, 301)))  # overflowing from step 200 on
    (alert,) = alerts_of(enumerate(scales, start=1))
    assert (alert.severity, alert.step, alert.metric) == ("warning", 204, TAG)
    assert (alert.value, alert.baseline) == (2.0**11, 2.0**16)
    assert alert.message == (
        "train/loss_scale halved at 5 steps in a row, from 65536 to 2048: the gradients "
        "overflow at every step"
    )
    assert alert.causes[0].startswith("the gradients overflow at every step")
    settings = {"loss_scale_collapse": {"halvings": 3}}
    (early,) = alerts_of(enumerate(scales, start=1), settings)
    assert early.step == 202


def test_a_scale_below_its_floor() -> None:
    # A scaler of one's own that shrinks by 4 / 3 at each overflow: never a halving.
    series = [(s, 2.0) for s in range(1, 11)] + [(11, 1.5), (12, 1.125), (13, 0.84375)]
    series += [(s, 0.84375) for s in range(14, 30)]
    (alert,) = alerts_of(series)
    assert (alert.step, alert.value, alert.baseline) == (13, 0.84375, 1.0)
    assert alert.message == (
        "train/loss_scale fell to 0.84375, below 1: the gradients overflow even with this "
        "little scaling"
    )
    assert alert.severity == "warning"
    assert alerts_of(series, {"loss_scale_collapse": {"floor": 0.5}}) == []


def test_a_fixed_scale_below_the_floor_and_halvings_from_the_first_step_are_quiet() -> None:
    assert alerts_of((s, 0.5) for s in range(1, 50)) == []
    # Halving from the first point on is calibration until the scale holds once.
    assert alerts_of((s, 2.0**32 / 2**s) for s in range(1, 20)) == []


def test_points_without_a_finite_scale_are_skipped() -> None:
    series = [(s, 2.0**16) for s in range(1, 11)]
    scale = 2.0**16
    for step in range(11, 40):
        if step % 2:
            scale /= 2
            series.append((step, scale))
        else:
            series.append((step, math.nan))  # neither a point nor a break of the run
    (alert,) = alerts_of(series)
    assert alert.step == 19  # halvings at 11, 13, 15, 17, 19


def test_a_second_collapse_alerts_again_and_the_state_survives_a_restart() -> None:
    overflows = set(range(200, 210)) | set(range(600, 700))
    scales = list(enumerate(dynamic_scale(800, overflows), start=1))
    assert [a.step for a in alerts_of(scales)] == [204, 604]
    engine = RuleEngine(AlertSettings(), run="test", rank=0)
    for step, scale in scales[:602]:
        engine.observe(step, {TAG: scale})
    state = engine.state_dict()
    assert state["rules"]["loss_scale_collapse"] == {
        "last": 8.0,  # 2**16 / 2**10 after the first collapse, then 32, 16, 8
        "start": 64.0,
        "halvings": 3,
        "armed": True,
        "below": False,
    }
    resumed = RuleEngine(AlertSettings(), run="test", rank=0)
    resumed.load_state_dict(state)
    found = [a for s, v in scales[602:] for a in resumed.observe(s, {TAG: v})]
    assert [(a.rule, a.step) for a in found] == [("loss_scale_collapse", 604)]


def test_the_messages_in_chinese() -> None:
    set_language("zh")
    try:
        (alert,) = alerts_of(enumerate(dynamic_scale(300, set(range(200, 301))), start=1))
        assert alert.message == (
            "train/loss_scale 连续 5 步减半，从 65536 降到 2048：每一步的梯度都溢出"
        )
        assert alert.causes[0].startswith("每一步的梯度都溢出")
    finally:
        set_language("en")


def test_a_scaler_that_goes_below_one_halves_through_it() -> None:
    """A scaler of one's own with no lower bound (torch's GradScaler has none): 8, 4, 2,
    1, 0.5, 0.25 are five halvings in a row, the one from 1 to 0.5 among them; the floor
    is set below them, so only the halvings can alert."""
    set_language("en")
    series = [(s, 8.0) for s in range(1, 11)]
    series += [(10 + k, 8.0 / 2**k) for k in range(1, 8)]
    settings = {"loss_scale_collapse": {"floor": 0.001}}
    (alert,) = alerts_of(series, settings)
    assert (alert.step, alert.severity, alert.value, alert.baseline) == (15, "warning", 0.25, 8.0)
    assert alert.message == (
        "train/loss_scale halved at 5 steps in a row, from 8 to 0.25: the gradients "
        "overflow at every step"
    )
