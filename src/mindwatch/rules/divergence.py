"""``divergence``: the smoothed loss has risen well above its minimum and stays there."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt

__all__ = ["DivergenceRule", "DivergenceSettings"]


class DivergenceSettings(RuleSettings):
    """``divergence``: the smoothed loss has risen well above its minimum and stays there."""

    metric: str = Field(default="train/loss", description="Tag.")
    window: Optional[int] = Field(
        default=None,
        ge=2,
        le=MAX_WINDOW,
        description="Smoothing (EMA span, in points); not set: a third of the points seen "
        "so far, between 10 and 100, so a short run is judged on a short span. At most "
        "10000.",
    )
    rise: float = Field(default=1.0, gt=0, description="Relative rise above the minimum.")
    zscore: float = Field(
        default=6.0,
        ge=0,
        description="The rise must also exceed this many standard deviations of the "
        "smoothed value's own noise (measured from point to point): a noisy loss needs a "
        "larger rise.",
    )
    steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="Consecutive points above it; not set: a tenth of the points seen, "
        "between 10 and 50.",
    )
    warmup: int = Field(
        default=100,
        ge=0,
        description="Points seen before the rule may fire (the minimum is taken from then "
        "on: a noisy loss dips low in its first, fast-falling steps).",
    )


class DivergenceRule(Rule[DivergenceSettings]):
    """The smoothed value (EMA) ``rise`` above its minimum, and well beyond its own
    noise, for ``steps`` points in a row.

    Span and duration adapt to the run: by default the EMA spans a third of the points
    seen (10 to 100) and the rise must last a tenth of them (10 to 50), so a run of a few
    hundred steps is judged on tens of points, a long run on a hundred. The noise is the
    mean point-to-point change of the raw value, scaled to the EMA's spread.
    """

    name = "divergence"
    settings_model = DivergenceSettings
    causes = (
        N_("learning rate too high: lower it or lengthen warmup"),
        N_("optimizer state corrupted after a resume (check the checkpoint)"),
        N_("a data distribution shift (check recent batches)"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "risen": N_(
            "smoothed {metric} {value} has stayed {rise:.0%} above its minimum {minimum} "
            "for {steps} points"
        )
    }
    state = ("ema", "minimum", "seen", "above", "change", "last")

    def __init__(self, settings: DivergenceSettings) -> None:
        super().__init__(settings)
        self.ema: Optional[float] = None
        self.minimum: Optional[float] = None
        self.seen = 0
        self.above = 0
        self.change: Optional[float] = None  # EMA of |value - previous value|
        self.last: Optional[float] = None

    def _span(self) -> float:
        given = self.settings.window
        return float(given) if given is not None else min(100.0, max(10.0, self.seen / 3))

    def _steps(self) -> int:
        given = self.settings.steps
        return given if given is not None else min(50, max(10, self.seen // 10))

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = self.finite(values, s.metric)
        if value is None:
            return []
        self.seen += 1
        alpha = 2.0 / (self._span() + 1)
        ema = value if self.ema is None else self.ema + alpha * (value - self.ema)
        self.ema = ema
        if self.last is not None:
            moved = abs(value - self.last)
            before = self.change
            self.change = moved if before is None else before + 0.02 * (moved - before)
        self.last = value
        if self.seen < s.warmup:
            return []
        low = self.minimum = ema if self.minimum is None else min(self.minimum, ema)
        # Mean |successive difference| of white noise is 2/sqrt(pi) sigma; an EMA of it
        # spreads by sqrt(alpha / (2 - alpha)) of that.
        noise = (self.change or 0.0) * 0.886 * math.sqrt(alpha / (2 - alpha))
        if not ema > low + max(abs(low) * s.rise, s.zscore * noise):
            self.above = 0
            return []
        self.above += 1
        needed = self._steps()
        if self.above != needed:
            return []
        message = self.message(
            "risen",
            metric=s.metric,
            value=fmt(ema),
            rise=ema / low - 1,
            minimum=fmt(low),
            steps=needed,
        )
        return [Finding(self.name, "warning", s.metric, ema, message, baseline=low)]
