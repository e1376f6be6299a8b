"""The seeds' dynamic learning rate, as a rule: it decides, the adapter applies.

Framework-free: :meth:`LRController.observe` returns a ``scale_lr``
:class:`~mindwatch.alerts.Control` (the multiplier, and the ``info`` alert that reports
it) or None. It runs on the training thread, because the change must apply from the very
next update; it costs a few comparisons. Under data parallelism every rank sees the same
global gradient norm (computed after the gradient all-reduce), so every rank decides the
same change at the same step without talking to the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from mindwatch.alerts.control import Control
from mindwatch.alerts.model import Alert
from mindwatch.common.i18n import _
from mindwatch.config import DynamicLRSettings
from mindwatch.rules import Stateful

__all__ = ["LRController"]


class LRController(Stateful):
    """Count steps below ``low`` / above ``high``; after ``patience`` of them, a change."""

    state = ("below", "above", "scale")

    def __init__(self, settings: DynamicLRSettings) -> None:
        self.settings = settings
        self.below = 0
        self.above = 0
        self.scale = 1.0  # the product of the changes so far

    def observe(self, step: int, values: Mapping[str, float]) -> Optional[Control]:
        s = self.settings
        value = values.get(s.metric)
        if value is None or value - value != 0.0:
            return None
        self.below = self.below + 1 if value < s.low else 0
        self.above = self.above + 1 if s.high is not None and value > s.high else 0
        factor = None
        if self.below >= s.patience:
            self.below = 0
            factor = min(s.factor, s.max_scale / self.scale)
        elif self.above >= s.patience:
            self.above = 0
            factor = max(1 / s.factor, s.min_scale / self.scale)
        if factor is None or abs(factor - 1.0) < 1e-12:
            return None
        self.scale *= factor
        if factor > 1:
            text = _(
                "learning rate x{factor:.4g} (gradient norm below {low:g} for {steps} steps); "
                "x{scale:.4g} in all"
            )
        else:
            text = _(
                "learning rate x{factor:.4g} (gradient norm above {high:g} for {steps} steps); "
                "x{scale:.4g} in all"
            )
        message = text.format(
            factor=factor, low=s.low, high=s.high, steps=s.patience, scale=self.scale
        )
        alert = Alert(
            rule="dynamic_lr",
            severity="info",
            metric=s.metric,
            value=value,
            step=step,
            message=message,
            action=f"lr x{factor:.4g} from step {step + 1}",
            extra={"lr_scale": self.scale},
        )
        return Control("scale_lr", step, alert, factor)
