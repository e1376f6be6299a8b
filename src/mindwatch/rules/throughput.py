"""``throughput_drop``: throughput well below the run's own baseline, and the part of
the step that grew (the input pipeline or compute)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any, ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt

__all__ = ["ThroughputDropRule", "ThroughputDropSettings"]


class ThroughputDropSettings(RuleSettings):
    """``throughput_drop``: the median of the last ``recent`` points well below the
    run's baseline, by more than ``drop`` and by more than ``zscore`` times the run's
    own point-to-point noise; names the part of the step that grew (input pipeline:
    ``perf/data_wait_ms``, or compute: ``perf/compute_ms``) and, under data
    parallelism, the rank."""

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
    deviations of those points (in log: a run on a jittery machine needs a larger drop).
    The alert names the part of the step that grew (``perf/data_wait_ms``: the input
    pipeline; ``perf/compute_ms``: compute) and its slowest rank when known."""

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
    state = ("points", "parts", "dropped", "skipped")

    def __init__(self, settings: ThroughputDropSettings) -> None:
        super().__init__(settings)
        size = settings.window + settings.recent
        self.points: deque[float] = deque(maxlen=size)
        self.parts: dict[str, deque[float]] = {tag: deque(maxlen=size) for tag in _PARTS}
        self.dropped = False
        self.skipped = 0
        self.base: Optional[float] = None  # the last baseline, for a cheap first test

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        value = self.finite(values, s.metric)
        if value is None or value <= 0:
            return []
        if self.skipped < s.skip:
            self.skipped += 1
            return []
        points = self.points
        points.append(value)
        for tag, series in self.parts.items():
            part = values.get(_REDUCED[tag], values.get(tag))
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
        message = self.message(
            "drop",
            metric=s.metric,
            value=fmt(recent),
            recent=s.recent,
            drop=f"{1 - recent / baseline:.0%}",
            baseline=fmt(baseline),
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
                shown = _REDUCED[tag] if _REDUCED[tag] in values else tag
                extra = {"part": part, "part_metric": shown, "part_ms": [was, now_ms]}
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
            self.name, "warning", s.metric, recent, message, baseline, rank=rank, extra=extra
        )
