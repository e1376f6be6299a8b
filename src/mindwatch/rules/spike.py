"""``spike``: a value far above its recent level.

Per step the cost is a few comparisons per watched value: the expensive statistics
(median and MAD of the window) are computed only for a value that already looks like a
spike against the running mean.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any, ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt

__all__ = ["SpikeRule", "SpikeSettings"]


class SpikeSettings(RuleSettings):
    """``spike``: a value far above its recent level (median/MAD z-score and a ratio)."""

    metrics: list[str] = Field(default_factory=lambda: ["train/loss"], description="Tags.")
    window: int = Field(
        default=100,
        ge=5,
        le=MAX_WINDOW,
        description="Recent points the level is taken from (at most 10000: they are kept "
        "and sorted on the pipeline's thread).",
    )
    warmup: int = Field(default=30, ge=1, description="Points seen before the rule may fire.")
    ratio: float = Field(default=3.0, gt=1, description="Value / recent mean must exceed this.")
    zscore: float = Field(
        default=6.0,
        gt=0,
        description="Robust z-score that must be exceeded: (x - median) / (1.4826 MAD) of "
        "the window, with x = log(value) for positive values.",
    )


class SpikeRule(Rule[SpikeSettings]):
    """A value far above its recent level: above ``ratio`` x the window's mean *and*
    ``zscore`` robust standard deviations above its median, measured on the logarithm
    for positive values (noise on a loss is multiplicative). Both, so a noisy but
    healthy loss does not alert, and a smooth one alerts at the seeds' x3."""

    name = "spike"
    settings_model = SpikeSettings
    causes = (
        N_("a bad batch: corrupted labels or outliers (check the batch at this step and rank)"),
        N_("learning rate too high after warmup (check train/lr)"),
        N_("gradient clipping off or too loose (check train/grad_norm)"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "jump": N_(
            "{tag} jumped to {value}, {ratio:.1f}x its recent median {median} (robust z {z:.0f})"
        )
    }
    state = ("windows", "seen")

    def __init__(self, settings: SpikeSettings) -> None:
        super().__init__(settings)
        self.windows: dict[str, deque[float]] = {
            tag: deque(maxlen=settings.window) for tag in settings.metrics
        }
        self.sums: dict[str, float] = dict.fromkeys(settings.metrics, 0.0)
        self.seen: dict[str, int] = dict.fromkeys(settings.metrics, 0)

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        found = []
        s = self.settings
        for tag, window in self.windows.items():
            value = self.finite(values, tag)
            if value is None:
                continue
            count = len(window)
            if self.seen[tag] >= s.warmup and count:
                mean = self.sums[tag] / count
                if value > s.ratio * mean and mean > 0:
                    finding = self._check(tag, value, window)
                    if finding is not None:
                        found.append(finding)
            if count == window.maxlen:
                self.sums[tag] -= window[0]
            window.append(value)
            self.sums[tag] += value
            self.seen[tag] += 1
        return found

    def _check(self, tag: str, value: float, window: deque[float]) -> Optional[Finding]:
        ordered = sorted(window)
        median = ordered[len(ordered) // 2]
        if ordered[0] > 0:
            # Losses are positive and their noise multiplicative: measure in logs, so the
            # same threshold suits a smooth loss and a noisy small-batch one.
            logs = [math.log(v) for v in window]
            ordered_logs = sorted(logs)
            center = ordered_logs[len(logs) // 2]
            mad = sorted(abs(x - center) for x in logs)[len(logs) // 2]
            # Also the noise from successive differences: a loss still falling fast (a
            # short run) has a wide window that is trend, not noise.
            steps = sorted(abs(b - a) for a, b in zip(logs, logs[1:])) or [mad * 2]
            noise = 1.4826 * min(mad, steps[len(steps) // 2] / math.sqrt(2))
            z = (math.log(value) - center) / max(noise, 1e-3)
        else:
            mad = sorted(abs(v - median) for v in ordered)[len(ordered) // 2]
            scale = 1.4826 * mad if mad > 0 else max(abs(median) * 1e-3, 1e-12)
            z = (value - median) / scale
        if z < self.settings.zscore:
            return None
        severity = "critical" if value > 10 * self.settings.ratio * median else "warning"
        # A median of 0 (a value that is 0 at most steps, an auxiliary loss) is no level
        # to divide by: the jump is infinitely many times it, not a ZeroDivisionError
        # that switches the rule off for the rest of the run.
        ratio = value / median if median > 0 else math.inf
        message = self.message(
            "jump", tag=tag, value=fmt(value), ratio=ratio, median=fmt(median), z=z
        )
        return Finding(self.name, severity, tag, value, message, baseline=median)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.sums = {tag: sum(window) for tag, window in self.windows.items()}  # derived
