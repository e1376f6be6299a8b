"""The seeds' dynamic learning rate, as a rule: it decides, the adapter applies.

Framework-free: :meth:`LRController.observe` returns the multiplier to apply to the
learning rate now (or None). Under data parallelism every rank sees the same global
gradient norm (computed after the gradient all-reduce), so every rank decides the same
change at the same step without talking to the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from mindwatch.config import DynamicLRSettings

__all__ = ["LRController"]


class LRController:
    """Count steps below ``low`` / above ``high``; after ``patience`` of them, a change."""

    def __init__(self, settings: DynamicLRSettings) -> None:
        self.settings = settings
        self.below = 0
        self.above = 0
        self.scale = 1.0  # the product of the changes so far

    def observe(self, step: int, values: Mapping[str, float]) -> Optional[float]:
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
        return factor

    def state_dict(self) -> dict[str, Any]:
        return {"below": self.below, "above": self.above, "scale": self.scale}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.below = int(state.get("below", 0))
        self.above = int(state.get("above", 0))
        self.scale = float(state.get("scale", 1.0))
