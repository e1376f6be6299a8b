"""``plateau``: the smoothed loss has stopped improving."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Literal, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import Finding, Rule, RuleSettings, fmt

__all__ = ["PlateauRule", "PlateauSettings"]


class PlateauSettings(RuleSettings):
    """``plateau``: the smoothed loss has not improved by ``min_delta`` in ``steps`` steps."""

    metric: str = Field(default="train/loss", description="Tag.")
    steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="Steps without improvement (None: adapts to the run: ``patience`` x "
        "the steps the run took to reach its best, at least ``min_steps``).",
    )
    patience: float = Field(
        default=0.5, gt=0, description="With steps None: the flat part / the improving part."
    )
    min_steps: int = Field(default=100, ge=1, description="With steps None: at least this.")
    min_delta: float = Field(default=0.05, ge=0, description="Relative improvement required.")
    smoothing: int = Field(default=50, ge=1, description="EMA span of the loss, in points.")
    severity: Literal["info", "warning"] = Field(default="info", description="Alert severity.")


class PlateauRule(Rule[PlateauSettings]):
    """No improvement of the best smoothed value (EMA over ``smoothing`` points) in
    ``steps`` steps; with ``steps`` None, in ``patience`` x the steps the run took to
    reach that best (at least ``min_steps``), so a short run's plateau is found in it.
    An improvement must beat ``min_delta`` (relative) and twice the EMA's own noise, so
    noise around a flat loss does not pass for progress."""

    name = "plateau"
    settings_model = PlateauSettings
    causes = (
        N_("learning rate too low, or the schedule is not applied (is train/lr flat?)"),
        N_("the model has converged: consider stopping or lowering the lr"),
        N_("data repeating or labels not matching the inputs"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "flat": N_(
            "smoothed {metric} has not improved on {best} (step {best_step}) in {steps} steps"
        )
    }
    state = ("ema", "spread", "best", "best_step", "first_step", "reported")

    def __init__(self, settings: PlateauSettings) -> None:
        super().__init__(settings)
        self.alpha = 2.0 / (settings.smoothing + 1)
        # The EMA of a noise of spread d has a spread of d * sqrt(alpha / (2 - alpha)).
        self.shrink = 1.2533 * math.sqrt(self.alpha / (2 - self.alpha))  # MAD -> std, EMA
        self.ema: Optional[float] = None
        self.spread = 0.0  # EMA of |raw - ema|: the loss's own noise
        self.best: Optional[float] = None
        self.best_step = 0
        self.first_step: Optional[int] = None
        self.reported = False

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        raw = self.finite(values, s.metric)
        if raw is None:
            return []
        if self.first_step is None:
            self.first_step = step
        # Smoothed, so one lucky batch of a noisy loss is not an improvement.
        if self.ema is None:
            value = raw
        else:
            self.spread += self.alpha * (abs(raw - self.ema) - self.spread)
            value = self.ema + self.alpha * (raw - self.ema)
        self.ema = value
        best = self.best
        needed = (
            0.0 if best is None else max(abs(best) * s.min_delta, 2 * self.spread * self.shrink)
        )
        if best is None or value < best - needed:
            self.best, self.best_step, self.reported = value, step, False
            return []
        patience = s.steps
        if patience is None:
            patience = max(s.min_steps, int(s.patience * (self.best_step - self.first_step)))
        if self.reported or step - self.best_step < patience:
            return []
        self.reported = True
        message = self.message(
            "flat",
            metric=s.metric,
            best=fmt(best),
            best_step=self.best_step,
            steps=step - self.best_step,
        )
        return [Finding(self.name, s.severity, s.metric, value, message, baseline=best)]
