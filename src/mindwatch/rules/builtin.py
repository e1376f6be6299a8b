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
    """The global gradient norm ``factor`` times its running median (``critical_factor``
    for critical), after ``warmup`` points; or above absolute ``warning`` / ``critical``
    when the settings give them. Relative by default: the first steps of a healthy run
    often have norms of 10 or more, and what is large depends on the model."""

    name = "grad_explosion"
    state = ("recent", "seen")

    def __init__(self, settings: GradExplosionSettings) -> None:
        self.settings = settings
        self.absolute: Optional[tuple[float, float]] = None
        if settings.warning is not None or settings.critical is not None:
            warning = settings.warning or settings.critical / 2  # type: ignore[operator]
            self.absolute = (warning, settings.critical or 2 * warning)
        self.recent: deque[float] = deque(maxlen=settings.window)
        self.seen = 0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = values.get(s.metric)
        if value is None or value - value != 0.0:
            return []
        if self.absolute is not None:
            warning, critical = self.absolute
            if not value > warning:
                return []
            severity = "critical" if value > critical else "warning"
            limit = critical if severity == "critical" else warning
            text = _("gradient norm {value} is above {limit}")
            message = text.format(value=_fmt(value), limit=_fmt(limit))
            return [Finding(self.name, severity, s.metric, value, message, baseline=limit)]
        found = []
        if self.seen >= s.warmup and self.recent:
            ordered = sorted(self.recent)
            median = ordered[len(ordered) // 2]
            if median > 0 and value > s.factor * median:
                severity = "critical" if value > s.critical_factor * median else "warning"
                text = _("gradient norm {value} is {ratio}x its running median {median}")
                message = text.format(
                    value=_fmt(value), ratio=f"{value / median:.0f}", median=_fmt(median)
                )
                found.append(Finding(self.name, severity, s.metric, value, message, median))
        self.recent.append(value)
        self.seen += 1
        return found


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
    """No improvement of the best smoothed value (EMA over ``smoothing`` points) in
    ``steps`` steps; with ``steps`` None, in ``patience`` x the steps the run took to
    reach that best (at least ``min_steps``), so a short run's plateau is found in it.
    An improvement must beat ``min_delta`` (relative) and twice the EMA's own noise, so
    noise around a flat loss does not pass for progress."""

    name = "plateau"
    state = ("ema", "spread", "best", "best_step", "first_step", "reported")

    def __init__(self, settings: PlateauSettings) -> None:
        self.settings = settings
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
        raw = values.get(s.metric)
        if raw is None or raw - raw != 0.0:
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
        text = _("smoothed {metric} has not improved on {best} (step {best_step}) in {steps} steps")
        message = text.format(
            metric=s.metric, best=_fmt(best), best_step=self.best_step, steps=step - self.best_step
        )
        return [Finding(self.name, s.severity, s.metric, value, message, baseline=best)]


class DivergenceRule(Rule):
    """The smoothed value (EMA) ``rise`` above its minimum, and well beyond its own
    noise, for ``steps`` points in a row.

    Span and duration adapt to the run: by default the EMA spans a third of the points
    seen (10 to 100) and the rise must last a tenth of them (10 to 50), so a run of a few
    hundred steps is judged on tens of points, a long run on a hundred. The noise is the
    mean point-to-point change of the raw value, scaled to the EMA's spread.
    """

    name = "divergence"
    state = ("ema", "minimum", "seen", "above", "change", "last")

    def __init__(self, settings: DivergenceSettings) -> None:
        self.settings = settings
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
        value = values.get(s.metric)
        if value is None or value - value != 0.0:
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
        text = _(
            "smoothed {metric} {value} has stayed {rise:.0%} above its minimum {minimum} "
            "for {steps} points"
        )
        message = text.format(
            metric=s.metric, value=_fmt(ema), rise=ema / low - 1, minimum=_fmt(low), steps=needed
        )
        return [Finding(self.name, "warning", s.metric, ema, message, baseline=low)]


_DATA_WAIT, _COMPUTE = "perf/data_wait_ms", "perf/compute_ms"
_PARTS = {_DATA_WAIT: "input pipeline", _COMPUTE: "compute"}


class ThroughputDropRule(Rule):
    """The median of the last ``recent`` points below the median of up to ``window``
    points before them by more than ``drop`` and by more than ``zscore`` robust standard
    deviations of those points (in log: a run on a jittery machine needs a larger drop).
    The alert names the part of the step that grew (``perf/data_wait_ms``: the input
    pipeline; ``perf/compute_ms``: compute) and its slowest rank when known."""

    name = "throughput_drop"
    state = ("points", "parts", "dropped", "skipped")

    def __init__(self, settings: ThroughputDropSettings) -> None:
        self.settings = settings
        size = settings.window + settings.recent
        self.points: deque[float] = deque(maxlen=size)
        self.parts: dict[str, deque[float]] = {tag: deque(maxlen=size) for tag in _PARTS}
        self.dropped = False
        self.skipped = 0
        self.base: Optional[float] = None  # the last baseline, for a cheap first test

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = values.get(s.metric)
        if value is None or value - value != 0.0 or value <= 0:
            return []
        if self.skipped < s.skip:
            self.skipped += 1
            return []
        points = self.points
        points.append(value)
        for tag, series in self.parts.items():
            part = values.get(tag)
            series.append(part if part is not None and part - part == 0.0 else math.nan)
        if len(points) < s.warmup + s.recent:
            return []
        base = self.base
        if base is not None and value >= base * (1 - s.drop) and not self.dropped:
            return []  # the common case: this point is not low, nothing to compute
        listed = list(points)
        recent = sorted(listed[-s.recent :])[s.recent // 2]
        logs = sorted(math.log(v) for v in listed[: -s.recent])
        center = logs[len(logs) // 2]
        self.base = baseline = math.exp(center)
        mad = sorted(abs(x - center) for x in logs)[len(logs) // 2]
        fall = center - math.log(recent)
        dropped = recent < baseline * (1 - s.drop) and fall > s.zscore * 1.4826 * mad
        was, self.dropped = self.dropped, dropped
        if not dropped or was:
            return []  # one alert per drop
        return [self._finding(recent, baseline, values)]

    def _finding(self, recent: float, baseline: float, values: Mapping[str, float]) -> Finding:
        s = self.settings
        text = _(
            "{metric} fell to {value} (median of the last {recent}), "
            "{drop} below its baseline {baseline}"
        )
        message = text.format(
            metric=s.metric,
            value=_fmt(recent),
            recent=s.recent,
            drop=f"{1 - recent / baseline:.0%}",
            baseline=_fmt(baseline),
        )
        grown: dict[str, tuple[float, float]] = {}
        for tag, series in self.parts.items():
            listed = list(series)
            now = [v for v in listed[-s.recent :] if not math.isnan(v)]
            before = [v for v in listed[: -s.recent] if not math.isnan(v)]
            if now and before:
                grown[tag] = (sorted(before)[len(before) // 2], sorted(now)[len(now) // 2])
        extra: dict[str, Any] = {}
        rank = None
        if grown:
            tag = max(grown, key=lambda t: grown[t][1] - grown[t][0])
            was, now_ms = grown[tag]
            if now_ms > was:
                part = _PARTS[tag]
                extra = {"part": part, "part_metric": tag, "part_ms": [was, now_ms]}
                outlier = values.get(f"ranks/{tag.split('/', 1)[1]}_argmax")
                if outlier is not None and outlier - outlier == 0.0:
                    rank = int(outlier)
                where = _("the input pipeline") if part == "input pipeline" else _("compute")
                text = _("{message}: {part} is slower ({metric} {before} -> {after} ms)")
                message = text.format(
                    message=message,
                    part=where,
                    metric=tag,
                    before=f"{was:.3g}",
                    after=f"{now_ms:.3g}",
                )
        return Finding(
            self.name, "warning", s.metric, recent, message, baseline, rank=rank, extra=extra
        )


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
