"""``loss_scale_collapse``: the dynamic loss scale of float16 training collapsing.

A dynamic loss scale (``nn.DynamicLossScaleUpdateCell``, MindFormers' train cells) is
divided at every step whose gradients overflow and grows back after a window of clean
steps. One halving now and then is the scaler doing its job; a scale that halves at
step after step, or sinks below a floor, means the gradients overflow whatever the
scale: the updates are being skipped, and float16 training is about to diverge. It is
what MindFormers users see in ``loss_scale`` before the loss goes NaN.

The first steps of a run often halve a large initial scale (2**32, 2**16) several times
in a row until it fits: that is calibration, so halvings count only once the scale has
held steady (not decreased) at least once. A scale that starts below the floor is a
choice (a fixed scale), not a collapse: the floor alerts when the scale crosses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import Finding, Rule, RuleSettings

__all__ = ["LossScaleCollapseRule", "LossScaleCollapseSettings"]


class LossScaleCollapseSettings(RuleSettings):
    """``loss_scale_collapse``: the dynamic loss scale halving step after step, or below a floor.

    Either way the float16 gradients overflow at every scale the scaler tries."""

    metric: str = Field(default="train/loss_scale", description="Tag.")
    floor: float = Field(
        default=1.0,
        gt=0,
        description="Warning when the scale falls below this (MindSpore's dynamic scale "
        "never goes below 1; a scaler of your own may).",
    )
    halvings: int = Field(
        default=5,
        ge=2,
        description="Warning after this many points in a row, each at most half the one "
        "before, once the scale has held steady since the start (the first steps of an "
        "fp16 run halve a large initial scale until it fits).",
    )


def _scale(value: float) -> str:
    return f"{value:g}"  # loss scales are powers of two: 65536, not 6.554e+04


class LossScaleCollapseRule(Rule[LossScaleCollapseSettings]):
    """The loss scale at most half its previous point for ``halvings`` points in a row
    (after it held steady once), or crossing below ``floor``: a warning, once per
    collapse (a new one needs the scale to hold, or to rise back above the floor)."""

    name = "loss_scale_collapse"
    settings_model = LossScaleCollapseSettings
    causes = (
        N_(
            "the gradients overflow at every step: a loss or activation beyond the float16 "
            "range (check train/loss and the batch at this step)"
        ),
        N_("learning rate too high: the weights grow until float16 overflows (check train/lr)"),
        N_(
            "float16 cannot hold this model's values: use bfloat16, or keep the overflowing "
            "layers in float32"
        ),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "halved": N_(
            "{metric} halved at {halvings} steps in a row, from {start} to {value}: the "
            "gradients overflow at every step"
        ),
        "floor": N_(
            "{metric} fell to {value}, below {floor}: the gradients overflow even with "
            "this little scaling"
        ),
    }
    state = ("last", "start", "halvings", "armed", "below")

    def __init__(self, settings: LossScaleCollapseSettings) -> None:
        super().__init__(settings)
        self.last: Optional[float] = None
        self.start: Optional[float] = None  # the scale before the current halvings
        self.halvings = 0
        self.armed = False  # the scale has held steady once: calibration is over
        self.below = False

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = self.finite(values, s.metric)
        if value is None:
            return []
        last, self.last = self.last, value
        crossed = value < s.floor and not self.below and last is not None
        self.below = value < s.floor
        if last is None:
            return []
        if last > 0 and value <= last / 2:
            if self.armed:
                if self.halvings == 0:
                    self.start = last
                self.halvings += 1
        else:
            self.armed, self.halvings = True, 0
        if self.halvings == s.halvings and self.start is not None:
            message = self.message(
                "halved",
                metric=s.metric,
                halvings=s.halvings,
                start=_scale(self.start),
                value=_scale(value),
            )
            return [Finding(self.name, "warning", s.metric, value, message, baseline=self.start)]
        if crossed:
            text = self.message(
                "floor", metric=s.metric, value=_scale(value), floor=_scale(s.floor)
            )
            return [Finding(self.name, "warning", s.metric, value, text, baseline=s.floor)]
        return []
