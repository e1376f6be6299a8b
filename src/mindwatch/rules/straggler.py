"""``straggler``: under synchronous data parallelism, the rank whose input pipeline holds
the others up.

Every rank waits for the slowest one in the gradient all-reduce, so step time and
``perf/compute_ms`` are nearly equal on every rank and their argmax names whichever rank
happened to be a hair slower. The wait for the next batch happens *before* a rank joins
the all-reduce, so it is not equalised: the rank with a slow pipeline waits for data
while the others wait inside the collective. Each rank writes, on the last step of each
of its intervals, the median data wait of that interval's steps
(``straggler/input_wait_ms``, reduced with ``max``) and the interval's median step time
(``straggler/step_ms``); rank 0 gets the spread ``ranks/input_wait_ms_max``, ``_min``
and ``_argmax``. The score, in the style of NVIDIA Resiliency Extension's straggler
detector, is ``1 - (gap - baseline) / baseline_step``, where ``gap`` is ``wait_max -
wait_min`` (how long the slowest rank was held up by its own data beyond the fastest),
``baseline`` the run's own gap over its first intervals and ``baseline_step`` their
median step time: the extra wait the slowest rank's pipeline costs, as a share of the
run's own step. The run's step, not the interval's: a slow pipeline stretches the step
it is judged by, which kept the score of a rank 3x slower above 0.33 whatever the
slowdown; against the run's own step it falls to 0. The threshold (0.4: the job is 1.6x
slower through one rank's data) comes from the noise: a healthy input-bound 4-rank CPU
job whose slowest rank's wait drifted from 7 ms to 19 ms over 100 steps of 30 ms scored
0.53-0.6, a rank whose store became 3x slower scored 0 (2 and 4 ranks). The baseline
matters: in a job whose every rank's pipeline is the bottleneck, one rank waits most of
each step from the start (the one whose batch comes last; the others' prefetch buffers
fill while they wait for it in the all-reduce), which waits alone cannot tell from a
rank slow from the first step (measured under msrun: healthy input-bound jobs with 2 and
4 CPU workers showed a gap of 60 % and 50 % of the step). So the rule judges a pipeline
that became slower than the run's own pace; a rank slow from the start shows in the
report's Ranks table, not as an alert. Waits alone cannot tell either a rank's pipeline
becoming slower from every rank's becoming slower at once (a shared file system): then
too one rank, the one whose batch comes last, is named, and ``throughput_drop`` says the
input pipeline is slower.

Medians, not means, so one slow batch (a file opened, a garbage collection) does not
move an interval; and the score must be low on ``intervals`` of the last ``intervals +
1`` intervals, spanning at least ``min_seconds`` of training (counted from the measured
step times, so the offline watcher judges a replay the same way): a scheduler hiccup on
a busy host is neither.

A slow *compute* rank does not show in any of those: it computes longer and waits less
in the all-reduce, and only the profiler splits the two inside the graph. Every
``bench_every_s`` seconds every rank runs a fixed micro-benchmark at the same step
(:mod:`mindwatch.mindspore.compute_probe`) and writes its time as ``straggler/bench_ms``
(reduced with ``max``); the compute score is the other ranks' mean time over the slowest
rank's (nvidia-resiliency-ext's *relative* score, with the mean of the others where it
uses their median: the reduction gives the mean, the maximum and the number of ranks,
``straggler/bench_ranks``), and it must be low on ``bench_rounds`` runs in a row naming
the same rank. The others' mean rather than the fastest rank: on a shared host one of
many ranks is often fast for a moment, and the fastest of 4 healthy ranks on 2 busy
cores was about twice as fast as the slowest on most runs, where the others' mean over
the slowest scored 0.45-0.78 (a rank starved by busy neighbours: 0.18-0.33).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import Finding, Rule, RuleSettings

__all__ = [
    "BENCH",
    "BENCH_RANKS",
    "INDIVIDUAL",
    "INPUT_WAIT",
    "STEP",
    "StragglerRule",
    "StragglerSettings",
]

# The tags this rule reads, written per rank by mindwatch.metrics.straggler (the interval
# medians) and the adapter's micro-benchmark (mindwatch.mindspore.compute_probe).
INPUT_WAIT = "straggler/input_wait_ms"
STEP = "straggler/step_ms"
BENCH = "straggler/bench_ms"  # this rank's benchmark time, reduced with max (argmax)
BENCH_RANKS = "straggler/bench_ranks"  # the ranks that ran it (rank 0's count, once)
INDIVIDUAL = "straggler/bench_individual"  # this rank's best time / this one, 0..1
_SPREAD = "ranks/input_wait_ms"
_BENCH_SPREAD = "ranks/bench_ms"


class StragglerSettings(RuleSettings):
    """``straggler``: one rank's input pipeline holding the data-parallel job up.

    Needs several ranks: on one rank there is no spread and the rule stays silent."""

    interval: int = Field(
        default=10,
        ge=2,
        le=10_000,
        description="Steps per measurement: each rank keeps this many data waits and "
        "writes their median (the score is judged once per interval).",
    )
    threshold: float = Field(
        default=0.4,
        gt=0,
        lt=1,
        description="Warning when the score (1 - (wait_max - wait_min - its baseline) / "
        "the run's step time) is below this: the slowest rank's data costs 60 % of a "
        "step more than the run's own spread between ranks (measured healthy drift on "
        "a shared host: scores down to 0.53).",
    )
    intervals: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Low intervals needed among the last intervals + 1 (one slow "
        "interval is noise; one healthy interval inside a slow episode does not end it).",
    )
    min_seconds: float = Field(
        default=1.0,
        ge=0,
        le=86_400,
        description="... also spanning at least this many seconds of training (from the "
        "measured step times): a scheduler hiccup or a garbage collection on a busy "
        "host lasts tens to hundreds of milliseconds, and each interval's median "
        "already needs more than half its steps slow. At most 86400 (a day).",
    )
    bench_every_s: float = Field(
        default=30.0,
        ge=0,
        le=86_400,
        description="Seconds between two runs of the compute micro-benchmark on every rank "
        "(a fixed MatMul timed on the device, about 25 ms on the training thread, 0.1 % "
        "of the time at 30 s; 0: never). Every rank runs it right after the same "
        "reduction, once mindwatch's own threads are idle. At most 86400 (a day).",
    )
    bench_threshold: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="Warning when the compute score (the other ranks' mean benchmark "
        "time / the slowest rank's) is below this on bench_rounds runs in a row, with the same "
        "slowest rank: a rank at half the others' speed. Set from the noise of healthy "
        "CPU jobs on a shared host (single runs down to 0.38, never three in a row below "
        "0.5); on dedicated Ascend cards 0.75 (nvidia-resiliency-ext's) catches a "
        "throttled card sooner.",
    )
    bench_rounds: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Benchmark runs in a row needed: a host busy for a moment slows one "
        "run on one rank, a slow card or a starved process slows every run on the same "
        "rank. The first `skip` runs are not judged (the job is still warming up).",
    )
    baseline: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Intervals after the skipped ones that set the run's own spread "
        "(the median of their wait_max - wait_min); the score judges the rise above it. "
        "A job whose every rank's pipeline is the bottleneck has one rank "
        "waiting each step (the one whose batch comes last; the others' buffers fill up) "
        "from the start: that is the job's pace, not a straggler.",
    )
    skip: int = Field(
        default=2,
        ge=0,
        description="First intervals ignored: compile time and the prefetch buffer "
        "filling make the first steps' waits unlike the run's own.",
    )


class StragglerRule(Rule[StragglerSettings]):
    """The input score below ``threshold`` on ``intervals`` of the last ``intervals + 1``
    intervals, spanning ``min_seconds``: a warning naming the rank (the argmax of the
    data wait), the part and the score, once per episode (an episode ends when the
    last ``intervals + 1`` intervals are all healthy)."""

    name = "straggler"
    settings_model = StragglerSettings
    causes = (
        N_(
            "that rank's input pipeline is slower: its disk or file system, decoding, "
            "num_parallel_workers, or a host busier than the others"
        ),
        N_("that rank's data shard is heavier (longer samples, larger images)"),
        N_(
            "for a compute straggler: that card throttles (temperature, power) or is "
            "failing, or other processes share that rank's cores or card"
        ),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "input": N_(
            "rank {rank} is the straggler: its input pipeline holds the others up "
            "(score {score} below {threshold} for {intervals} intervals, {seconds} s; "
            "data wait {wait_max} ms against {wait_min} ms on the fastest rank, "
            "step {step_ms} ms)"
        ),
        "compute": N_(
            "rank {rank} is the straggler: its compute is slower (score {score} below "
            "{threshold} on {rounds} micro-benchmark runs in a row; a fixed MatMul took "
            "{bench_max} ms there against {bench_others} ms on the other ranks)"
        ),
    }
    state = (
        "seen",
        "base",
        "base_step",
        "low",
        "low_ms",
        "raised",
        "bench_slow",
        "bench_raised",
        "bench_seen",
    )

    def __init__(self, settings: StragglerSettings) -> None:
        super().__init__(settings)
        self.seen = 0  # intervals seen
        # The last intervals + 1 judgements (1.0 low, 0.0 healthy) and the training time
        # of each: one healthy interval in a slow episode (a busy host making every
        # rank's compute as slow as the pipeline for a moment) does not reset it.
        self.low: deque[float] = deque(maxlen=settings.intervals + 1)
        self.low_ms: deque[float] = deque(maxlen=settings.intervals + 1)
        self.raised = False
        self.base: list[float] = []  # the spread (ms) of the first judged intervals
        self.base_step: list[float] = []  # and their step time (ms)
        # The slowest rank of each of the last bench_rounds low benchmark runs.
        self.bench_slow: deque[float] = deque(maxlen=settings.bench_rounds)
        self.bench_raised = False
        self.bench_seen = 0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        found = self._compute(values) if BENCH in values else []
        if STEP not in values:
            return found  # the common case: not an interval's last step
        return found + self._input(values)

    @classmethod
    def _others(cls, values: Mapping[str, float], slowest: float) -> Optional[float]:
        """The mean benchmark time of every rank but the slowest (the fastest rank's
        when the count or the mean is missing)."""
        ranks = cls.finite(values, BENCH_RANKS)
        mean = cls.finite(values, f"{_BENCH_SPREAD}_mean")
        if ranks is None or mean is None or ranks < 2:
            return cls.finite(values, f"{_BENCH_SPREAD}_min")
        return max(0.0, (ranks * mean - slowest) / (ranks - 1))

    def _compute(self, values: Mapping[str, float]) -> list[Finding]:
        """The micro-benchmark's spread: the other ranks' mean time over the slowest's."""
        s = self.settings
        slowest = self.finite(values, f"{_BENCH_SPREAD}_max")
        argmax = self.finite(values, f"{_BENCH_SPREAD}_argmax")
        if slowest is None or argmax is None or slowest <= 0:
            return []  # one rank: no spread
        others = self._others(values, slowest)
        if others is None:
            return []
        self.bench_seen += 1
        if self.bench_seen <= s.skip:
            return []
        score = min(1.0, others / slowest)
        if score >= s.bench_threshold:
            self.bench_slow.clear()
            self.bench_raised = False
            return []
        self.bench_slow.append(argmax)
        slow = self.bench_slow
        if self.bench_raised or len(slow) < s.bench_rounds or len(set(slow)) > 1:
            return []
        self.bench_raised = True
        rank = int(argmax)
        message = self.message(
            "compute",
            rank=rank,
            score=f"{score:.2f}",
            threshold=f"{s.bench_threshold:.2f}",
            rounds=len(slow),
            bench_max=f"{slowest:.3g}",
            bench_others=f"{others:.3g}",
        )
        extra = {"part": "compute", "score": score, "bench_ms": [others, slowest]}
        metric = "straggler/compute_score"
        return [
            Finding(
                self.name,
                "warning",
                metric,
                score,
                message,
                s.bench_threshold,
                rank=rank,
                extra=extra,
            )
        ]

    def _input(self, values: Mapping[str, float]) -> list[Finding]:
        s = self.settings
        step_ms = self.finite(values, STEP)
        wait_max = self.finite(values, f"{_SPREAD}_max")
        wait_min = self.finite(values, f"{_SPREAD}_min")
        argmax = self.finite(values, f"{_SPREAD}_argmax")
        if step_ms is None or wait_max is None or wait_min is None or step_ms <= 0:
            return []
        self.seen += 1
        if self.seen <= s.skip:
            return []
        gap = max(0.0, wait_max - wait_min)
        if len(self.base) < s.baseline:
            # The run's own spread and step (ms), before it is judged.
            self.base.append(gap)
            self.base_step.append(step_ms)
            return []
        base = sorted(self.base)[len(self.base) // 2]
        base_step = sorted(self.base_step)[len(self.base_step) // 2]
        score = 1.0 - min(1.0, max(0.0, gap - base) / base_step)
        low = score < s.threshold
        self.low.append(1.0 if low else 0.0)
        self.low_ms.append(step_ms * s.interval if low else 0.0)
        if not any(self.low):
            self.raised = False  # the episode is over: a new one may alert
        count, span_ms = int(sum(self.low)), sum(self.low_ms)
        if not low or self.raised or count < s.intervals or span_ms < s.min_seconds * 1000.0:
            return []
        self.raised = True
        rank: Optional[int] = int(argmax) if argmax is not None else None
        message = self.message(
            "input",
            rank=rank if rank is not None else "?",
            score=f"{score:.2f}",
            threshold=f"{s.threshold:.2f}",
            intervals=count,
            seconds=f"{span_ms / 1000.0:.1f}",
            wait_max=f"{wait_max:.3g}",
            wait_min=f"{wait_min:.3g}",
            step_ms=f"{step_ms:.3g}",
        )
        extra = {
            "part": "input pipeline",
            "score": score,
            "baseline_gap_ms": base,
            "baseline_step_ms": base_step,
            "wait_ms": [wait_min, wait_max],
            "step_ms": step_ms,
        }
        return [
            Finding(
                self.name,
                "warning",
                "straggler/input_score",
                score,
                message,
                s.threshold,
                rank=rank,
                extra=extra,
            )
        ]
