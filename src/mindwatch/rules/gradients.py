"""``grad_explosion`` and ``grad_vanishing``: the global gradient norm far above its
running level, or near zero for several steps."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import ClassVar, Optional

from pydantic import AliasChoices, Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt

__all__ = [
    "GradExplosionRule",
    "GradExplosionSettings",
    "GradVanishingRule",
    "GradVanishingSettings",
]


class GradExplosionSettings(RuleSettings):
    """``grad_explosion``: the global gradient norm many times its running median (scale
    free: what is "large" depends on the model and the loss scale), or above absolute
    thresholds when ``warning`` / ``critical`` are set (the seeds' 10 and 20)."""

    metric: str = Field(default="train/grad_norm", description="Tag.")
    factor: float = Field(
        default=10.0, gt=1, description="Warning above this many times the running median."
    )
    critical_factor: float = Field(
        default=100.0, gt=1, description="Critical above this many times the running median."
    )
    window: int = Field(
        default=100,
        ge=3,
        le=MAX_WINDOW,
        description="Points the running median is taken from (at most 10000: they are "
        "sorted at every step).",
    )
    warmup: int = Field(
        default=10, ge=1, description="Points seen before the relative test may fire."
    )
    warning: Optional[float] = Field(
        default=None,
        gt=0,
        validation_alias=AliasChoices("warning", "threshold"),
        description="Absolute warning threshold (alias: threshold; None: relative). "
        "Setting it (or critical) replaces the relative test.",
    )
    critical: Optional[float] = Field(
        default=None,
        gt=0,
        description="Absolute critical threshold (None: twice warning, or relative).",
    )


class GradExplosionRule(Rule[GradExplosionSettings]):
    """The global gradient norm ``factor`` times its running median (``critical_factor``
    for critical), after ``warmup`` points; or above absolute ``warning`` / ``critical``
    when the settings give them. Relative by default: the first steps of a healthy run
    often have norms of 10 or more, and what is large depends on the model."""

    name = "grad_explosion"
    settings_model = GradExplosionSettings
    causes = (
        N_("learning rate too high or warmup too short"),
        N_("no gradient clipping: set clip_grad_norm"),
        N_("a bad batch at this step"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "absolute": N_("gradient norm {value} is above {limit}"),
        "relative": N_("gradient norm {value} is {ratio}x its running median {median}"),
    }
    state = ("recent", "seen")

    def __init__(self, settings: GradExplosionSettings) -> None:
        super().__init__(settings)
        self.absolute: Optional[tuple[float, float]] = None
        if settings.warning is not None or settings.critical is not None:
            warning = settings.warning or settings.critical / 2  # type: ignore[operator]
            self.absolute = (warning, settings.critical or 2 * warning)
        self.recent: deque[float] = deque(maxlen=settings.window)
        self.seen = 0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = self.finite(values, s.metric)
        if value is None:
            return []
        if self.absolute is not None:
            warning, critical = self.absolute
            if not value > warning:
                return []
            severity = "critical" if value > critical else "warning"
            limit = critical if severity == "critical" else warning
            message = self.message("absolute", value=fmt(value), limit=fmt(limit))
            return [Finding(self.name, severity, s.metric, value, message, baseline=limit)]
        found = []
        if self.seen >= s.warmup and self.recent:
            ordered = sorted(self.recent)
            median = ordered[len(ordered) // 2]
            if median > 0 and value > s.factor * median:
                severity = "critical" if value > s.critical_factor * median else "warning"
                message = self.message(
                    "relative", value=fmt(value), ratio=f"{value / median:.0f}", median=fmt(median)
                )
                found.append(Finding(self.name, severity, s.metric, value, message, median))
        self.recent.append(value)
        self.seen += 1
        return found


class GradVanishingSettings(RuleSettings):
    """``grad_vanishing``: the global gradient norm below a threshold for several steps."""

    metric: str = Field(default="train/grad_norm", description="Tag.")
    below: float = Field(default=1e-3, gt=0, description="Norm threshold.")
    steps: int = Field(default=5, ge=1, description="Consecutive steps below it.")


class GradVanishingRule(Rule[GradVanishingSettings]):
    """The global gradient norm below ``below`` for ``steps`` consecutive points."""

    name = "grad_vanishing"
    settings_model = GradVanishingSettings
    causes = (
        N_("an attention mask or input that is all zeros (check the batch)"),
        N_("dropout or a frozen layer stopping the gradient"),
        N_("learning rate schedule decayed to ~0, or the loss saturated"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "below": N_("gradient norm {value} has been below {below} for {steps} steps")
    }
    state = ("run",)

    def __init__(self, settings: GradVanishingSettings) -> None:
        super().__init__(settings)
        self.run = 0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = self.finite(values, s.metric)
        if value is None:
            return []
        if value >= s.below:
            self.run = 0
            return []
        self.run += 1
        if self.run != s.steps:
            return []
        message = self.message("below", value=fmt(value), below=fmt(s.below), steps=s.steps)
        return [Finding(self.name, "warning", s.metric, value, message, baseline=s.below)]
