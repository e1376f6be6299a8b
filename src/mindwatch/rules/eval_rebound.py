"""``eval_rebound``: the validation loss rising while the training loss does not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import Finding, Rule, RuleSettings, fmt

__all__ = ["EvalReboundRule", "EvalReboundSettings"]


class EvalReboundSettings(RuleSettings):
    """``eval_rebound``: validation loss rising for K evaluations while the train loss falls."""

    metric: str = Field(default="eval/loss", description="Validation tag.")
    train_metric: str = Field(default="train/loss", description="Training tag.")
    evaluations: int = Field(default=3, ge=1, description="Consecutive rising evaluations.")
    train_tolerance: float = Field(
        default=0.1,
        ge=0,
        description="The train loss (mean between evaluations) counts as not rising "
        "unless it rose by more than this (noise near convergence).",
    )


class EvalReboundRule(Rule[EvalReboundSettings]):
    """Validation loss rising for ``evaluations`` evaluations in a row while the
    training loss (its mean between evaluations) does not rise (by more than
    ``train_tolerance``)."""

    name = "eval_rebound"
    settings_model = EvalReboundSettings
    causes = (
        N_("overfitting: stop early, add regularisation or data"),
        N_("the learning rate schedule restarted or rose"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "rising": N_(
            "{metric} rose for {evaluations} evaluations in a row to {value} while "
            "{train_metric} did not rise"
        )
    }
    state = ("last_eval", "rising", "train_sum", "train_count", "last_train_mean")

    def __init__(self, settings: EvalReboundSettings) -> None:
        super().__init__(settings)
        self.last_eval: Optional[float] = None
        self.rising = 0
        self.train_sum = 0.0
        self.train_count = 0
        self.last_train_mean: Optional[float] = None

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        train = self.finite(values, s.train_metric)
        if train is not None:
            self.train_sum += train
            self.train_count += 1
        value = self.finite(values, s.metric)
        if value is None:
            return []
        train_mean = self.train_sum / self.train_count if self.train_count else None
        self.train_sum, self.train_count = 0.0, 0
        previous_eval, previous_train = self.last_eval, self.last_train_mean
        self.last_eval, self.last_train_mean = value, train_mean
        # "Falls" allows noise near convergence: not up by more than `train_tolerance`.
        train_falls = (
            train_mean is not None
            and previous_train is not None
            and train_mean <= previous_train * (1 + s.train_tolerance)
        )
        if previous_eval is not None and value > previous_eval and train_falls:
            self.rising += 1
        else:
            self.rising = 0
            return []
        if self.rising != s.evaluations:
            return []
        message = self.message(
            "rising",
            metric=s.metric,
            evaluations=s.evaluations,
            value=fmt(value),
            train_metric=s.train_metric,
        )
        return [Finding(self.name, "warning", s.metric, value, message, baseline=previous_eval)]
