"""``nonfinite``: NaN or +-Inf in a watched value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import Finding, Rule, RuleSettings

__all__ = ["NonFiniteRule", "NonFiniteSettings"]


class NonFiniteSettings(RuleSettings):
    """``nonfinite``: NaN or Inf in a watched metric (critical)."""

    metrics: list[str] = Field(
        default_factory=list,
        description="Tags to watch (empty: every train/ and eval/ tag).",
    )


class NonFiniteRule(Rule[NonFiniteSettings]):
    """NaN or +-Inf in a watched value: critical, every time (the cooldown thins it)."""

    name = "nonfinite"
    settings_model = NonFiniteSettings
    causes = (
        N_("a NaN or Inf in the input batch (check the data at this step)"),
        N_("learning rate too high for this step (check train/lr)"),
        N_("log/sqrt/division of zero or a negative number in the loss"),
        N_("float16 overflow: use a loss scale or bfloat16"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "nan": N_("{tag} is NaN"),
        "inf": N_("{tag} is infinite"),
    }

    def __init__(self, settings: NonFiniteSettings) -> None:
        super().__init__(settings)
        self.metrics = set(settings.metrics)

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        found = []
        for tag, value in values.items():
            if value - value == 0.0:  # finite: the common case, no function call
                continue
            if self.metrics:
                if tag not in self.metrics:
                    continue
            elif not tag.startswith(("train/", "eval/")):
                continue
            message = self.message("nan" if math.isnan(value) else "inf", tag=tag)
            found.append(Finding(self.name, "critical", tag, value, message))
        return found
