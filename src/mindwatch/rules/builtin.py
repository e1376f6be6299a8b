"""The built-in anomaly rules: plain objects over ``(step, {tag: value})``.

Each rule declares the attributes that are its state (:mod:`mindwatch.rules.base`), so
the same rules run in the training process and in ``mindwatch watch``, which keeps
their state between calls. (A training process that resumes starts its rules afresh:
warm-ups and cooldowns restart; persisting their state in checkpoints is not done yet.)
``observe`` returns :class:`Finding`s; the engine adds the context (rank, run, epoch,
batch) and the cooldowns.

Per step the cost is a few comparisons per watched value: the expensive statistics
(median and MAD of a window) are computed only for a value that already looks like a
spike against the running mean.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any, Optional

from mindwatch.common.i18n import _
from mindwatch.config import (
    DivergenceSettings,
    EvalReboundSettings,
    GradExplosionSettings,
    GradVanishingSettings,
    NonFiniteSettings,
    PlateauSettings,
    SpikeSettings,
    ThroughputDropSettings,
)
from mindwatch.rules.base import Finding, Rule

__all__ = [
    "DivergenceRule",
    "EvalReboundRule",
    "GradExplosionRule",
    "GradVanishingRule",
    "NonFiniteRule",
    "PlateauRule",
    "SpikeRule",
    "ThroughputDropRule",
]


def _fmt(value: float) -> str:
    return f"{value:.4g}"


class NonFiniteRule(Rule):
    """NaN or +-Inf in a watched value: critical, every time (the cooldown thins it)."""

    name = "nonfinite"

    def __init__(self, settings: NonFiniteSettings) -> None:
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
            if math.isnan(value):
                message = _("{tag} is NaN").format(tag=tag)
            else:
                message = _("{tag} is infinite").format(tag=tag)
            found.append(Finding(self.name, "critical", tag, value, message))
        return found


class SpikeRule(Rule):
    """A value far above its recent level: above ``ratio`` x the window's mean *and*
    ``zscore`` robust standard deviations above its median, measured on the logarithm
    for positive values (noise on a loss is multiplicative). Both, so a noisy but
    healthy loss does not alert, and a smooth one alerts at the seeds' x3."""

    name = "spike"
    state = ("windows", "seen")

    def __init__(self, settings: SpikeSettings) -> None:
        self.settings = settings
        self.windows: dict[str, deque[float]] = {
            tag: deque(maxlen=settings.window) for tag in settings.metrics
        }
        self.sums: dict[str, float] = dict.fromkeys(settings.metrics, 0.0)
        self.seen: dict[str, int] = dict.fromkeys(settings.metrics, 0)

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        found = []
        s = self.settings
        for tag, window in self.windows.items():
            value = values.get(tag)
            if value is None or value - value != 0.0:
                continue  # absent, or non-finite (the nonfinite rule's business)
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
            logs = [math.log(v) for v in ordered]
            center = logs[len(logs) // 2]
            mad = sorted(abs(x - center) for x in logs)[len(logs) // 2]
            z = (math.log(value) - center) / max(1.4826 * mad, 1e-3)
        else:
            mad = sorted(abs(v - median) for v in ordered)[len(ordered) // 2]
            scale = 1.4826 * mad if mad > 0 else max(abs(median) * 1e-3, 1e-12)
            z = (value - median) / scale
        if z < self.settings.zscore:
            return None
        severity = "critical" if value > 10 * self.settings.ratio * median else "warning"
        return Finding(
            self.name,
            severity,
            tag,
            value,
            _(
                "{tag} jumped to {value}, {ratio:.1f}x its recent median {median} "
                "(robust z {z:.0f})"
            ).format(tag=tag, value=_fmt(value), ratio=value / median, median=_fmt(median), z=z),
            baseline=median,
        )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.sums = {tag: sum(window) for tag, window in self.windows.items()}  # derived


class GradExplosionRule(Rule):
    """The global gradient norm above ``warning`` / ``critical``."""

    name = "grad_explosion"

    def __init__(self, settings: GradExplosionSettings) -> None:
        self.settings = settings

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = values.get(s.metric)
        if value is None or not value > s.warning:
            return []
        severity = "critical" if value > s.critical else "warning"
        limit = s.critical if severity == "critical" else s.warning
        return [
            Finding(
                self.name,
                severity,
                s.metric,
                value,
                _("gradient norm {value} is above {limit}").format(
                    value=_fmt(value), limit=_fmt(limit)
                ),
                baseline=limit,
            )
        ]


class GradVanishingRule(Rule):
    """The global gradient norm below ``below`` for ``steps`` consecutive points."""

    name = "grad_vanishing"
    state = ("run",)

    def __init__(self, settings: GradVanishingSettings) -> None:
        self.settings = settings
        self.run = 0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = values.get(s.metric)
        if value is None or value - value != 0.0:
            return []
        if value >= s.below:
            self.run = 0
            return []
        self.run += 1
        if self.run != s.steps:
            return []
        return [
            Finding(
                self.name,
                "warning",
                s.metric,
                value,
                _("gradient norm {value} has been below {below} for {steps} steps").format(
                    value=_fmt(value), below=_fmt(s.below), steps=s.steps
                ),
                baseline=s.below,
            )
        ]


class PlateauRule(Rule):
    """No relative improvement of ``min_delta`` over the best smoothed value (EMA over
    ``smoothing`` points) in ``steps`` steps."""

    name = "plateau"
    state = ("ema", "best", "best_step", "reported")

    def __init__(self, settings: PlateauSettings) -> None:
        self.settings = settings
        self.alpha = 2.0 / (settings.smoothing + 1)
        self.ema: Optional[float] = None
        self.best: Optional[float] = None
        self.best_step = 0
        self.reported = False

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        raw = values.get(s.metric)
        if raw is None or raw - raw != 0.0:
            return []
        # Smoothed, so one lucky batch of a noisy loss is not an improvement.
        value = raw if self.ema is None else self.ema + self.alpha * (raw - self.ema)
        self.ema = value
        best = self.best
        if best is None or value < best - abs(best) * s.min_delta:
            self.best, self.best_step, self.reported = value, step, False
            return []
        if self.reported or step - self.best_step < s.steps:
            return []
        self.reported = True
        return [
            Finding(
                self.name,
                s.severity,
                s.metric,
                value,
                _(
                    "smoothed {metric} has not improved by {min_delta:.0%} on {best} "
                    "(step {best_step}) in {steps} steps"
                ).format(
                    metric=s.metric,
                    min_delta=s.min_delta,
                    best=_fmt(best),
                    best_step=self.best_step,
                    steps=step - self.best_step,
                ),
                baseline=best,
            )
        ]


class DivergenceRule(Rule):
    """The smoothed value (EMA) ``rise`` above its minimum for ``steps`` points in a row."""

    name = "divergence"
    state = ("ema", "minimum", "seen", "above")

    def __init__(self, settings: DivergenceSettings) -> None:
        self.settings = settings
        self.alpha = 2.0 / (settings.window + 1)
        self.ema: Optional[float] = None
        self.minimum: Optional[float] = None
        self.seen = 0
        self.above = 0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = values.get(s.metric)
        if value is None or value - value != 0.0:
            return []
        ema = value if self.ema is None else self.ema + self.alpha * (value - self.ema)
        self.ema = ema
        self.seen += 1
        if self.seen < s.warmup:
            return []
        low = self.minimum = ema if self.minimum is None else min(self.minimum, ema)
        if not ema > low + abs(low) * s.rise:
            self.above = 0
            return []
        self.above += 1
        if self.above != s.steps:
            return []
        return [
            Finding(
                self.name,
                "warning",
                s.metric,
                ema,
                _(
                    "smoothed {metric} {value} has stayed {rise:.0%} above its minimum "
                    "{minimum} for {steps} points"
                ).format(
                    metric=s.metric,
                    value=_fmt(ema),
                    rise=ema / low - 1,
                    minimum=_fmt(low),
                    steps=s.steps,
                ),
                baseline=low,
            )
        ]


class ThroughputDropRule(Rule):
    """The median of the last ``recent`` points ``drop`` below the median of the
    ``window`` points before them."""

    name = "throughput_drop"
    state = ("points", "dropped", "since")

    def __init__(self, settings: ThroughputDropSettings) -> None:
        self.settings = settings
        self.points: deque[float] = deque(maxlen=settings.window + settings.recent)
        self.dropped = False
        self.since = 0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = values.get(s.metric)
        if value is None or value - value != 0.0:
            return []
        points = self.points
        points.append(value)
        self.since += 1
        if len(points) < points.maxlen or self.since < max(s.recent // 3, 1):  # type: ignore[operator]
            return []  # checked every few points: a sustained drop is not urgent
        self.since = 0
        listed = list(points)
        recent = sorted(listed[-s.recent :])[s.recent // 2]
        base_points = sorted(listed[: -s.recent])
        baseline = base_points[len(base_points) // 2]
        dropped = baseline > 0 and recent < baseline * (1 - s.drop)
        if not dropped:
            self.dropped = False
            return []
        if self.dropped:
            return []  # one alert per drop
        self.dropped = True
        return [
            Finding(
                self.name,
                "warning",
                s.metric,
                recent,
                _(
                    "{metric} fell to {value} (median of the last {recent}), {drop:.0%} "
                    "below its baseline {baseline}"
                ).format(
                    metric=s.metric,
                    value=_fmt(recent),
                    recent=s.recent,
                    drop=1 - recent / baseline,
                    baseline=_fmt(baseline),
                ),
                baseline=baseline,
            )
        ]


class EvalReboundRule(Rule):
    """Validation loss rising for ``evaluations`` evaluations in a row while the
    training loss (its mean between evaluations) does not rise (by more than
    ``train_tolerance``)."""

    name = "eval_rebound"
    state = ("last_eval", "rising", "train_sum", "train_count", "last_train_mean")

    def __init__(self, settings: EvalReboundSettings) -> None:
        self.settings = settings
        self.last_eval: Optional[float] = None
        self.rising = 0
        self.train_sum = 0.0
        self.train_count = 0
        self.last_train_mean: Optional[float] = None

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        train = values.get(s.train_metric)
        if train is not None and train - train == 0.0:
            self.train_sum += train
            self.train_count += 1
        value = values.get(s.metric)
        if value is None or value - value != 0.0:
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
        return [
            Finding(
                self.name,
                "warning",
                s.metric,
                value,
                _(
                    "{metric} rose for {evaluations} evaluations in a row to {value} while "
                    "{train_metric} did not rise"
                ).format(
                    metric=s.metric,
                    evaluations=s.evaluations,
                    value=_fmt(value),
                    train_metric=s.train_metric,
                ),
                baseline=previous_eval,
            )
        ]
