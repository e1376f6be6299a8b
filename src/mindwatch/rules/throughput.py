"""``throughput_drop``: throughput well below the run's own baseline for seconds of
training, and the part of the step that grew (the input pipeline or compute)."""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping
from typing import Any, ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt
from mindwatch.rules.sustained import TrainingClock

__all__ = ["ThroughputDropRule", "ThroughputDropSettings"]


class ThroughputDropSettings(RuleSettings):
    """``throughput_drop``: the median of the last ``recent`` points well below the
    run's baseline, by more than ``drop`` and by more than ``zscore`` times the run's
    own point-to-point noise, and still so after ``min_seconds`` of training; names the
    part of the step that grew (input pipeline: ``perf/data_wait_ms``, or compute:
    ``perf/compute_ms``) and, under data parallelism, the rank."""

    metric: str = Field(default="perf/samples_per_s", description="Tag.")
    drop: float = Field(default=0.4, gt=0, lt=1, description="Smallest relative drop that alerts.")
    window: int = Field(
        default=200,
        ge=10,
        le=MAX_WINDOW,
        description="Baseline: median of this many points (at most 10000: they are kept "
        "and sorted on the pipeline's thread).",
    )
    recent: int = Field(
        default=12,
        ge=1,
        le=MAX_WINDOW,
        description="Compared: median of the last points (at most 10000).",
    )
    min_seconds: float = Field(
        default=2.0,
        ge=0,
        le=86_400,
        description="... and the drop must have lasted this many seconds of training "
        "(from perf/step_time_ms; a run that logs no step time is judged on the points "
        "alone): a drop a user wants to hear about lasts seconds, while 12 steps of 1 ms "
        "are one scheduler hiccup from another process. At most 86400 (a day).",
    )
    skip: int = Field(
        default=100,
        ge=0,
        description="First points ignored: compile time, and the input pipeline's "
        "prefetch buffer filled meanwhile, make the first steps faster or slower than the "
        "run's own pace.",
    )
    warmup: int = Field(default=20, ge=5, description="Baseline points needed after those.")
    zscore: float = Field(
        default=6.0,
        ge=0,
        description="The drop (in log) must also exceed this many robust standard "
        "deviations of the baseline's points: a jittery machine needs a larger drop.",
    )


_DATA_WAIT, _COMPUTE = "perf/data_wait_ms", "perf/compute_ms"
_PARTS = {_DATA_WAIT: "input pipeline", _COMPUTE: "compute"}
# Under synchronous data parallelism every rank waits for the slowest in the gradient
# all-reduce, inside its compute: a rank whose pipeline is slow makes the *others'*
# compute grow. The job is held by the largest data wait, and the rank that waited least
# in the collective (the least compute) shows the compute itself; rank 0 judges those
# spreads when the reduction gives them, its own values otherwise.
_REDUCED = {_DATA_WAIT: "ranks/data_wait_ms_max", _COMPUTE: "ranks/compute_ms_min"}


class ThroughputDropRule(Rule[ThroughputDropSettings]):
    """The median of the last ``recent`` points below the median of up to ``window``
    points before them by more than ``drop`` and by more than ``zscore`` robust standard
    deviations of those points (in log: a run on a jittery machine needs a larger drop),
    on every point for ``min_seconds`` of training (from ``perf/step_time_ms``). While
    a drop waits out that time its points are kept out of the baseline, so a drop
    longer than ``window`` points is not measured against itself. The alert names the
    part of the step that grew (``perf/data_wait_ms``: the input pipeline;
    ``perf/compute_ms``: compute) and its slowest rank when known; one alert per drop."""

    name = "throughput_drop"
    settings_model = ThroughputDropSettings
    causes = (
        N_("the input pipeline is slower (disk, decoding, num_parallel_workers)"),
        N_("another job on the same machine or card"),
        N_("checkpointing or evaluation running more often"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "drop": N_(
            "{metric} fell to {value} (median of the last {recent}), "
            "{drop} below its baseline {baseline}"
        ),
        "part": N_("{message}: {part} is slower ({metric} {before} -> {after} ms)"),
        "input pipeline": N_("the input pipeline"),
        "compute": N_("compute"),
    }
    # and the clock's (state_dict below)
    state = ("base", "fresh", "base_parts", "fresh_parts", "dropped", "skipped", "low", "since_ms")

    def __init__(self, settings: ThroughputDropSettings) -> None:
        super().__init__(settings)
        # The baseline's points, and the newer ones: the last ``recent``, or all since a
        # drop began while it waits out ``min_seconds`` (bounded by MAX_WINDOW).
        self.base: deque[float] = deque(maxlen=settings.window)
        self.fresh: deque[float] = deque(maxlen=MAX_WINDOW)
        self.base_parts = {tag: deque[float](maxlen=settings.window) for tag in _PARTS}
        self.fresh_parts = {tag: deque[float](maxlen=MAX_WINDOW) for tag in _PARTS}
        self.dropped = False  # alerted: quiet until the drop ends
        self.skipped = 0
        self.low = 0  # consecutive points the drop was seen on
        self.since_ms = 0.0  # training time before the first of them
        self.clock = TrainingClock()
        # ``base`` kept sorted (not state): its middle is the baseline's level, for the
        # cheap first test at every point. Not the level of the last full test: a run
        # that speeds up after it would be judged against its old, slower speed.
        self.ordered: list[float] = []
        self.cached: Optional[tuple[float, float]] = None  # _baseline(), until it changes

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "clock": self.clock.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.clock.load_state_dict(state.get("clock") or {})
        self.cached = None
        self.ordered = sorted(self.base)

    def _admit(self) -> None:
        """Points older than the last ``recent`` join the baseline."""
        fresh, keep, base, ordered = self.fresh, self.settings.recent, self.base, self.ordered
        while len(fresh) > keep:
            value = fresh.popleft()
            if len(base) == base.maxlen:
                del ordered[bisect.bisect_left(ordered, base[0])]
            base.append(value)
            bisect.insort(ordered, value)
            for tag, series in self.fresh_parts.items():
                self.base_parts[tag].append(series.popleft())
            self.cached = None

    def _baseline(self) -> tuple[float, float]:
        """The baseline's log median, and the robust standard deviation (1.4826 x the
        median absolute deviation from it) of the baseline's own rolling medians over a
        quarter of its points, at least ``recent``: the noise of the run's level over a
        stretch, not of one point. A drop must last ``min_seconds``, so what it is
        measured against is the run's sustained speed: a loaded machine's stalls of a
        few tens of steps in the baseline (seen: 5 ms steps taking 60 to 90 ms for 10
        to 20 steps at a time, at a load average of 5 on 2 cores) are no reason to miss
        a drop that lasts seconds, while a baseline whose level itself wanders still
        needs a larger drop. Kept until the baseline changes (it does not while a drop
        waits)."""
        if self.cached is None:
            logs = [math.log(v) for v in self.base]
            ordered = sorted(logs)
            center = ordered[len(ordered) // 2]
            n = min(max(self.settings.recent, len(logs) // 4), len(logs))
            half = n // 2
            medians = [sorted(logs[i : i + n])[min(half, n - 1)] for i in range(len(logs) - n + 1)]
            mad = sorted(abs(m - center) for m in medians)[len(medians) // 2]
            self.cached = (center, 1.4826 * mad)
        return self.cached

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        before_ms = self.clock.ms
        now_ms = self.clock.tick(step, values)
        value = self.finite(values, s.metric)
        if value is None or value <= 0 or not self._record(value, values):
            return []
        ordered = self.ordered  # at least ``warmup`` points: _record said so
        quiet = not (self.low or self.dropped)
        if quiet and value >= ordered[len(ordered) // 2] * (1 - s.drop):
            return []  # the common case: this point is not low, nothing to compute
        center, spread = self._baseline()
        baseline = math.exp(center)
        fresh = self.fresh  # may be long while a drop waits: index from its end
        recent = sorted(fresh[-i] for i in range(1, s.recent + 1))[s.recent // 2]
        fall = center - math.log(recent)
        if not (recent < baseline * (1 - s.drop) and fall > s.zscore * spread):
            self.low, self.dropped = 0, False
            self._admit()  # a dip shorter than min_seconds is the run's own history
            return []
        if not self.low:
            self.since_ms = before_ms
        self.low += 1
        lasted = (now_ms - self.since_ms) / 1000.0
        waiting = self.clock.known and lasted < s.min_seconds
        if self.dropped or waiting:
            if self.dropped:
                self._admit()
            return []  # alerted already, or not long enough: its points stay out
        self.dropped = True
        finding = self._finding(baseline, lasted, values)
        self._admit()
        return [finding]

    def _record(self, value: float, values: Mapping[str, float]) -> bool:
        """Keep the point (after the first ``skip``); whether there is enough to judge."""
        s = self.settings
        if self.skipped < s.skip:
            self.skipped += 1
            return False
        self.fresh.append(value)
        for tag, series in self.fresh_parts.items():
            part = values.get(_REDUCED[tag], values.get(tag))
            series.append(part if part is not None and part - part == 0.0 else math.nan)
        if not self.low:
            self._admit()
        return len(self.base) >= s.warmup and len(self.fresh) >= s.recent

    def _finding(self, baseline: float, lasted: float, values: Mapping[str, float]) -> Finding:
        """The drop: the median of every point since it began (the last ``recent``
        before it was first seen, and those while it lasted)."""
        s = self.settings
        fresh = sorted(self.fresh)
        value = fresh[len(fresh) // 2]
        message = self.message(
            "drop",
            metric=s.metric,
            value=fmt(value),
            recent=len(fresh),
            drop=f"{1 - value / baseline:.0%}",
            baseline=fmt(baseline),
        )
        grown: dict[str, tuple[float, float]] = {}
        for tag in _PARTS:
            now = [v for v in self.fresh_parts[tag] if not math.isnan(v)]
            before = [v for v in self.base_parts[tag] if not math.isnan(v)]
            if now and before:
                grown[tag] = (sorted(before)[len(before) // 2], sorted(now)[len(now) // 2])
        extra: dict[str, Any] = {"seconds": round(lasted, 3), "points": len(fresh)}
        rank = None
        if grown:
            tag = max(grown, key=lambda t: grown[t][1] - grown[t][0])
            was, now_ms = grown[tag]
            if now_ms > was:
                part = _PARTS[tag]
                shown = _REDUCED[tag] if _REDUCED[tag] in values else tag
                extra.update(part=part, part_metric=shown, part_ms=[was, now_ms])
                # The slow pipeline's rank; a slow-compute rank is the straggler rule's.
                outlier = values.get("ranks/data_wait_ms_argmax") if tag == _DATA_WAIT else None
                if outlier is not None and outlier - outlier == 0.0:
                    rank = int(outlier)
                message = self.message(
                    "part",
                    message=message,
                    part=self.message(part),
                    metric=shown,
                    before=f"{was:.3g}",
                    after=f"{now_ms:.3g}",
                )
        return Finding(
            self.name, "warning", s.metric, value, message, baseline, rank=rank, extra=extra
        )
