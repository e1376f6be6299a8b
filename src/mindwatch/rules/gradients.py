"""``grad_explosion`` and ``grad_vanishing``: the global gradient norm far above its
running level and its own spread for several steps (or at once, far enough), or near
zero for several steps."""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping
from typing import Any, ClassVar, Optional

from pydantic import AliasChoices, Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt
from mindwatch.rules.sustained import TrainingClock

__all__ = [
    "GradExplosionRule",
    "GradExplosionSettings",
    "GradVanishingRule",
    "GradVanishingSettings",
]


class GradExplosionSettings(RuleSettings):
    """``grad_explosion``: the global gradient norm many times its running median and
    far outside its own run's spread, for several steps (scale free: what is "large"
    depends on the model and the loss scale); or above absolute thresholds when
    ``warning`` / ``critical`` are set (the seeds' 10 and 20)."""

    metric: str = Field(default="train/grad_norm", description="Tag.")
    factor: float = Field(
        default=10.0, gt=1, description="Warning above this many times the running median."
    )
    critical_factor: float = Field(
        default=100.0,
        gt=1,
        description="Critical above this many times the running median, at once (no "
        "persistence needed).",
    )
    zscore: float = Field(
        default=6.0,
        ge=0,
        description="Both levels: the log of the norm must also be this many robust "
        "standard deviations (1.4826 x the median absolute deviation of the window's log "
        "norms) above their median. A run whose norm swings widely from step to step "
        "(small or heavy-tailed batches) needs a larger jump.",
    )
    points: int = Field(
        default=3,
        ge=1,
        le=MAX_WINDOW,
        description="Warning: points in a row out of the run's range: the first above "
        "factor and zscore, the next at least half as far out in log (sqrt(factor) "
        "times the median, zscore / 2 deviations). A single outlier step is the spike "
        "rule's business, not an explosion.",
    )
    min_seconds: float = Field(
        default=0.0,
        ge=0,
        le=86_400,
        description="Warning: ... also lasting at least this many seconds of training "
        "(from perf/step_time_ms; a run that logs no step time is judged on the points "
        "alone). 0 by default: a gradient norm means the same at any step time, and a "
        "layer whose gradient is 50x from step 300 must warn within 3 steps (the "
        "forensics need the onset in their window) even at 5 ms steps. At most 86400 "
        "(a day).",
    )
    window: int = Field(
        default=100,
        ge=3,
        le=MAX_WINDOW,
        description="Points the running median is taken from (at most 10000: they are "
        "kept sorted on the pipeline's thread).",
    )
    warmup: int = Field(
        default=10, ge=1, description="Points seen before the relative test may fire."
    )
    warning: Optional[float] = Field(
        default=None,
        gt=0,
        validation_alias=AliasChoices("warning", "threshold"),
        description="Absolute warning threshold (alias: threshold; None: relative). "
        "Setting it (or critical) replaces the relative test; each point is judged "
        "alone.",
    )
    critical: Optional[float] = Field(
        default=None,
        gt=0,
        description="Absolute critical threshold (None: twice warning, or relative).",
    )


class GradExplosionRule(Rule[GradExplosionSettings]):
    """The global gradient norm judged against its own recent history (the last
    ``window`` points, after ``warmup``): its ratio to their median, and its robust
    z-score, the distance of its log from their log median in units of their spread.

    * critical: above ``critical_factor`` times the median and ``zscore`` deviations
      out, at once;
    * warning: above ``factor`` times the median and ``zscore`` deviations out, and
      the points after it still half as far out in log (above ``sqrt(factor)`` times
      the median and ``zscore / 2`` deviations), ``points`` points in a row, spanning
      ``min_seconds`` of training when set (measured from ``perf/step_time_ms``). One
      heavy-tailed batch makes a one-step outlier, and the norm is back the next step;
      an explosion stays out, though it may hover about 10x.

    The points of a run that may become an explosion are kept out of the history until
    it ends or fires (a long run of large norms must not become its own baseline); then
    they join it. With absolute ``warning`` / ``critical`` settings each point is judged
    alone against them. Relative by default: the first steps of a healthy run often
    have norms of 10 or more, and what is large depends on the model."""

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
    state = ("recent", "seen", "held", "run_ms")  # and the clock's (state_dict below)

    def __init__(self, settings: GradExplosionSettings) -> None:
        super().__init__(settings)
        self.absolute: Optional[tuple[float, float]] = None
        if settings.warning is not None or settings.critical is not None:
            warning = settings.warning or settings.critical / 2  # type: ignore[operator]
            self.absolute = (warning, settings.critical or 2 * warning)
        self.recent: deque[float] = deque(maxlen=settings.window)
        self.ordered: list[float] = []  # ``recent`` sorted, kept so (not state)
        self.seen = 0
        # The current run of large points, kept out of ``recent`` until it ends or
        # fires (bounded: a run longer than MAX_WINDOW points keeps its last ones).
        self.held: deque[float] = deque(maxlen=MAX_WINDOW)
        self.run_ms = 0.0  # training time when the point before the run ended
        self.clock = TrainingClock()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "clock": self.clock.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.clock.load_state_dict(state.get("clock") or {})
        self.ordered = sorted(self.recent)

    def _remember(self, value: float) -> None:
        """``value`` joins the history (the oldest point leaves it when it is full)."""
        recent, ordered = self.recent, self.ordered
        if len(recent) == recent.maxlen:
            del ordered[bisect.bisect_left(ordered, recent[0])]
        recent.append(value)
        bisect.insort(ordered, value)

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        before_ms = self.clock.ms
        now_ms = self.clock.tick(step, values)
        value = self.finite(values, s.metric)
        if value is None:
            return []
        if self.absolute is not None:
            return self._absolute(value)
        found: list[Finding] = []
        if self.seen >= s.warmup and self.recent:
            ordered = self.ordered
            median = ordered[len(ordered) // 2]
            # A run starts with a point out on both tests, and goes on while its points
            # stay half as far out (in log) on both: a norm hovering about 10x is one
            # explosion, a heavy-tailed step followed by a normal one is none.
            part = 0.5 if self.held else 1.0
            if median > 0 and value > s.factor**part * median and self._far(value, median, part):
                if not self.held:
                    self.run_ms = before_ms
                self.held.append(value)
                ratio = value / median
                lasted = (now_ms - self.run_ms) / 1000.0
                if ratio > s.critical_factor:
                    severity: Optional[str] = "critical"
                elif len(self.held) >= s.points and (
                    not self.clock.known or lasted >= s.min_seconds
                ):
                    severity = "warning"
                else:
                    severity = None
                if severity is None:
                    self.seen += 1
                    return []  # held back: the history stays the one before the run
                message = self.message(
                    "relative", value=fmt(value), ratio=f"{ratio:.0f}", median=fmt(median)
                )
                extra = {"points": len(self.held), "seconds": round(lasted, 3)}
                found.append(
                    Finding(self.name, severity, s.metric, value, message, median, extra=extra)
                )
        for held in self.held:  # the run ended or fired: its points are history
            self._remember(held)
        self.held.clear()
        self._remember(value)
        self.seen += 1
        return found

    def _far(self, value: float, median: float, part: float = 1.0) -> bool:
        """``value``'s log at least ``part`` x ``zscore`` robust deviations above the
        window's."""
        center = math.log(median)
        deviations = sorted(abs(math.log(v) - center) for v in self.recent if v > 0)
        spread = 1.4826 * deviations[len(deviations) // 2]
        return math.log(value) - center >= part * self.settings.zscore * spread

    def _absolute(self, value: float) -> list[Finding]:
        s = self.settings
        warning, critical = self.absolute  # type: ignore[misc]
        if not value > warning:
            return []
        severity = "critical" if value > critical else "warning"
        limit = critical if severity == "critical" else warning
        message = self.message("absolute", value=fmt(value), limit=fmt(limit))
        return [Finding(self.name, severity, s.metric, value, message, baseline=limit)]


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
