"""What the hardware rules share: a condition *sustained* over samples and training time,
and the rule of a value at a warning or a critical level (:class:`LevelRule`).

The hardware values (``hw/...``, :mod:`mindwatch.hardware`) come from a sampler thread
that reads the probes every ``hardware.period_s`` seconds (default 5), and they join the
steps at most once per period: under the cross-rank reduction the latest sample joins
the last step of every interval (so a short interval repeats the same sample at several
steps), without it the first step logged a period after the previous one. A condition
is therefore judged sustained on two counts, both needed: a number of samples that
showed it in a row, and the training time they span. A sample repeated at several
steps (all its ``hw/`` values the same as at the previous point) counts once
(:func:`sample_key`); under the reduction a new sample on any rank makes a new point,
so a job of several ranks may count up to one sample per rank per period: the span in
training time is the stricter of the two counts.

That time is measured from the steps' own ``perf/step_time_ms`` (the wall time from one
step's end to the next, times the steps since the previous logged one), so
``mindwatch watch`` judges a replay exactly as the training process did. A run that
logs no step time is judged on the samples alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Optional, TypeVar

from pydantic import Field

from mindwatch.rules.base import Finding, Rule, RuleSettings, Stateful

__all__ = [
    "SEVERITIES",
    "LevelRule",
    "Sustained",
    "SustainedSettings",
    "TrainingClock",
    "outlier_rank",
    "sample_key",
]

STEP_TIME = "perf/step_time_ms"
SEVERITIES = ("warning", "critical")


def sample_key(values: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """What tells a new sample from the same one joining a later step: all its ``hw/``
    values (a new sample differs in at least one of them, the CPU % or a rate, nearly
    always; a genuinely new sample equal in all of them only delays a finding)."""
    return tuple((k, v) for k, v in values.items() if k.startswith("hw/"))


def outlier_rank(values: Mapping[str, float], tag: str) -> Optional[int]:
    """The rank ``ranks/<name>_argmax`` names for ``tag`` (``hw/x`` -> ``ranks/x_argmax``),
    or None (one process, or the value is missing)."""
    name = tag.split("/", 1)[1] if "/" in tag else tag
    found = values.get(f"ranks/{name}_argmax")
    if found is None or found - found != 0.0:
        return None
    return int(found)


class SustainedSettings(RuleSettings):
    """What every hardware rule shares: how long a condition must last."""

    samples: int = Field(
        default=3,
        ge=1,
        le=10_000,
        description="Samples in a row that must show it (the telemetry arrives at most "
        "once per hardware.period_s).",
    )
    seconds: float = Field(
        default=20.0,
        ge=0,
        le=7 * 86_400,
        description="... also spanning at least this many seconds of training, from the "
        "first of them (measured from perf/step_time_ms): a sample repeated at several "
        "steps is not a longer condition. At most 604800 (a week).",
    )


class TrainingClock(Stateful):
    """Training time so far, in ms, summed from the steps' ``perf/step_time_ms``."""

    state = ("ms", "last_step", "known")

    def __init__(self) -> None:
        self.ms = 0.0
        self.last_step = -1
        self.known = False  # a step time was seen: spans mean something

    def tick(self, step: int, values: Mapping[str, float]) -> float:
        """Advance to ``step``; the training time so far."""
        step_ms = values.get(STEP_TIME)
        if step_ms is not None and step_ms - step_ms == 0.0 and step_ms > 0:
            if self.last_step >= 0 and step > self.last_step:
                self.ms += step_ms * (step - self.last_step)
            self.known = True
        self.last_step = step
        return self.ms


class Sustained(Stateful):
    """One condition's run of samples: how many in a row and since when."""

    state = ("count", "since_ms", "until_ms")

    def __init__(self) -> None:
        self.count = 0
        self.since_ms = 0.0  # training time of the first sample of the run
        self.until_ms = 0.0  # ... and of the last

    def update(self, on: bool, now_ms: float, *, fresh: bool = True) -> None:
        """One point: the condition ``on`` or not; ``fresh``: a new sample (a repeated
        one keeps the run going without counting)."""
        if not on:
            self.count = 0
            return
        if self.count == 0:
            self.since_ms = now_ms
            self.count = 1
        elif fresh:
            self.count += 1
        self.until_ms = now_ms

    @property
    def span_s(self) -> float:
        """The training time from the run's first sample to its last, in seconds."""
        return (self.until_ms - self.since_ms) / 1000.0 if self.count else 0.0

    def lasted(self, settings: SustainedSettings, clock: TrainingClock) -> bool:
        """``samples`` in a row spanning ``seconds`` (the samples alone, when the run
        logs no step time)."""
        if self.count < settings.samples:
            return False
        return not clock.known or self.span_s >= settings.seconds


S = TypeVar("S", bound=SustainedSettings)


class LevelRule(Rule[S]):
    """A device value at a warning or a critical level for ``samples`` samples spanning
    ``seconds``: one finding per level per episode (an episode ends with a sample at no
    level; a warning episode that turns critical raises the critical one too).

    A subclass declares the tag it reads, :meth:`levels` (its warning and critical
    thresholds; or :meth:`level` itself, for a value that is not a measure) and
    :meth:`describe` (the finding's message and threshold)."""

    tag: ClassVar[str] = ""
    state = ("raised",)  # and the clock's and the runs' (state_dict below)

    def __init__(self, settings: S) -> None:
        super().__init__(settings)
        self.clock = TrainingClock()
        self.runs = {severity: Sustained() for severity in SEVERITIES}
        self.raised = -1  # index in SEVERITIES of the highest raised this episode
        self.last_key: tuple[tuple[str, float], ...] = ()  # not state: only repeats

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "clock": self.clock.state_dict(),
            "runs": {key: run.state_dict() for key, run in self.runs.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.clock.load_state_dict(state.get("clock") or {})
        saved = state.get("runs") or {}
        for key, run in self.runs.items():
            run.load_state_dict(saved.get(key) or {})

    def value(self, values: Mapping[str, float]) -> Optional[float]:
        return self.finite(values, self.tag)

    def levels(self) -> tuple[float, float]:
        """The warning and the critical threshold (a value at or above one is at it)."""
        raise NotImplementedError

    def threshold(self, severity: str) -> float:
        """The threshold of ``severity``."""
        warning, critical = self.levels()
        return critical if severity == "critical" else warning

    def level(self, value: float) -> Optional[str]:
        """The severity ``value`` is at (:meth:`levels`), or None."""
        warning, critical = self.levels()
        if value >= critical:
            return "critical"
        return "warning" if value >= warning else None

    def describe(
        self, severity: str, value: float, run: Sustained, values: Mapping[str, float]
    ) -> tuple[str, float]:
        """The message of a finding at ``severity`` and the threshold it crossed."""
        raise NotImplementedError

    def details(self, value: float) -> dict[str, Any]:
        """What the finding's ``extra`` says besides the samples and seconds."""
        return {}

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        now = self.clock.tick(step, values)
        value = self.value(values)
        if value is None:
            return []  # the common case: no sample at this step
        level = self.level(value)
        at = SEVERITIES.index(level) if level is not None else -1
        key = sample_key(values)
        fresh, self.last_key = key != self.last_key, key
        for i, severity in enumerate(SEVERITIES):
            self.runs[severity].update(i <= at, now, fresh=fresh)
        if at < 0:
            self.raised = -1  # the episode is over
            return []
        for i in range(at, self.raised, -1):  # the highest sustained level not yet raised
            run = self.runs[SEVERITIES[i]]
            if run.lasted(self.settings, self.clock):
                self.raised = i
                severity = SEVERITIES[i]
                message, threshold = self.describe(severity, value, run, values)
                extra = {
                    **self.details(value),
                    "samples": run.count,
                    "seconds": round(run.span_s, 3),
                }
                rank = outlier_rank(values, self.tag)
                finding = Finding(self.name, severity, self.tag, value, message, threshold)
                finding.rank, finding.extra = rank, extra
                return [finding]
        return []
