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
move an interval. Persistence counts steps and time alike, at any step length: a slow
*episode* opens at the first low interval and warns once its low intervals number at
least ``intervals`` and span at least ``min_seconds`` of training (an interval lasts its
median step times ``interval`` steps, from the logged values, so the offline watcher
judges a replay the same way): a scheduler hiccup on a busy host is neither. At fast
steps 2 s takes many more intervals than ``intervals``: with 10-step intervals, 17
intervals of a pipeline slowed to 12 ms a batch, 67 at 3 ms. The rule used to keep
only the last ``intervals + 1`` judgements, which never spanned its 1 s (then the
default) below 25 ms steps: it stayed silent on a rank whose store went from 4 to 12 ms
a batch (issue 38). The default, 2 s, is twice the longest healthy episode seen
(below); at realistic step lengths (hundreds of ms on Ascend) ``intervals`` decides,
not the seconds.

Healthy intervals inside an episode are tolerated: one, plus one for every
``intervals`` low ones after the first, so an episode is at least as dense as
``intervals`` low in every ``intervals + 1`` (the window the rule used to keep). A pause
of every rank (a busy host, a checkpoint) lets the slow pipeline fill its prefetch
buffer, and the next steps wait for nothing: with MindSpore's default 16 batches, a
pipeline 3x slower than the step gives about 24 steps, 2 to 3 healthy intervals, at any
step length. The episode ends, and the next one may warn again, at the first healthy
interval beyond that allowance (scattered slow intervals, each its own short episode,
never add up, however many of them fit in ``min_seconds`` at fast steps), or once it
has been healthy for ``intervals + 1`` intervals in a row spanning ``min_seconds``, as
long as a slowdown must last to be named (without it, a long episode, whose many low
intervals allow many healthy ones, would keep a new slowdown quiet for a third of its
length).

The noise at fast steps, measured under msrun on this 2-core machine while other jobs
kept it busy (load 5 to 25), replayed through the rule (its defaults unless said):
2-rank jobs bound by their compute (a store of 4 to 15 ms a batch, steps of 3.5 to 38
ms, median 12 to 20 ms; 9 jobs, 297 intervals judged) scored 0.63 and above, all but two
intervals 0.96 and above; 2-rank jobs bound by their input (a 20 ms store, steps of 20
ms; 3 jobs, 99 intervals) had single intervals down to 0.13, 5 low ones in all, never
more than 2 in a row, episodes ended by their allowance; 4-rank jobs (a store of 4 to
35 ms, steps of 28 to 38 ms; 6 jobs, 138 intervals) scored 0.69 and above; with 2-step
intervals, 2-rank jobs with a 4 ms store (steps of 12 to 14 ms; 3 jobs, 429 intervals)
0.82 and above. None warned. Later, under the whole test suite's load, a healthy
2-rank job (20 ms store) had 5 low intervals in a row, 1.06 s (rank 1's data wait
15.4 ms against 0.24 ms, steps of 21.6 ms): it warned with the 1 s then the default,
hence 2 s. A single interval crosses the threshold on a busy host: persistence, not
the threshold, keeps those quiet, and the threshold stays where a
pipeline that costs the job 60 % of a step is named (a store 3x slower than the step
scores 0, one 1.8x slower 0.2).

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
        "writes their median (the score is judged once per interval). Below about 8, "
        "a pause of every rank (a busy host) lets a slow pipeline refill its prefetch "
        "buffer (16 batches by default), and the 20-odd steps that then wait for "
        "nothing are more healthy intervals than an episode tolerates: the warning "
        "comes late or not at all.",
    )
    threshold: float = Field(
        default=0.4,
        gt=0,
        lt=1,
        description="Warning when the score (1 - (wait_max - wait_min - its baseline) / "
        "the run's step time) is below this: the slowest rank's data costs 60 % of a "
        "step more than the run's own spread between ranks (a store 3x slower than the "
        "step scores 0). Measured on a busy shared host: healthy drift down to 0.53 at "
        "30 ms steps; at steps of 4 to 40 ms single intervals down to 0.13, once 5 in a "
        "row, 1.06 s (intervals and min_seconds keep those quiet).",
    )
    intervals: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Low intervals a slow episode needs before it warns (one slow "
        "interval is noise). The episode tolerates one healthy interval, plus one for "
        "every this many low ones after its first (a pause lets the slow pipeline's "
        "buffer fill); it ends at a healthy interval beyond that, or once healthy for "
        "this many + 1 intervals in a row spanning min_seconds.",
    )
    min_seconds: float = Field(
        default=2.0,
        ge=0,
        le=86_400,
        description="... whose low intervals also span at least this many seconds of "
        "training (each interval its median step time x interval): a scheduler hiccup "
        "or a garbage collection on a busy host lasts tens to hundreds of milliseconds, "
        "and each interval's median already needs more than half its steps slow, but a "
        "healthy rank's loader on a shared host was seen stalled for 1.06 s (5 "
        "intervals of 21.6 ms steps): 2 s is twice that. At fast steps this takes more "
        "intervals (10-step intervals of 12 ms steps: 17). At most 86400 (a day).",
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
    """The input score below ``threshold`` on ``intervals`` intervals of an episode,
    spanning ``min_seconds`` of training: a warning naming the rank (the argmax of the
    data wait), the part, the score and the episode's low intervals and seconds, once
    per episode. An episode tolerates one healthy interval, plus one for every
    ``intervals`` low ones after its first; it ends at a healthy interval beyond that,
    or once healthy for ``intervals + 1`` intervals in a row spanning ``min_seconds``."""

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
    # The episode's attributes have names of their own: a state saved by a version that
    # kept a window of judgements (``low``, ``low_ms``: lists) is ignored, not misread.
    state = (
        "seen",
        "base",
        "base_step",
        "episode_low",
        "episode_low_ms",
        "episode_healthy",
        "calm",
        "calm_ms",
        "raised",
        "bench_slow",
        "bench_raised",
        "bench_seen",
    )

    def __init__(self, settings: StragglerSettings) -> None:
        super().__init__(settings)
        self.seen = 0  # intervals seen
        # The open episode (none while episode_low is 0): its low intervals and their
        # training time, its healthy intervals, and the healthy ones in a row at its end.
        # Counters, not a window of the last judgements: at fast steps the intervals
        # that span min_seconds are many more than intervals + 1.
        self.episode_low = 0
        self.episode_low_ms = 0.0
        self.episode_healthy = 0
        self.calm = 0
        self.calm_ms = 0.0
        self.raised = False  # the open episode has alerted
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
        # The interval's training time: the steps its median was taken over, at that
        # median (the offline watcher replays the same values, so it judges the same).
        interval_ms = step_ms * s.interval
        if score >= s.threshold:
            self._healthy(interval_ms)
            return []
        self.episode_low += 1  # (the first opens an episode)
        self.episode_low_ms += interval_ms
        self.calm, self.calm_ms = 0, 0.0
        count, span_ms = self.episode_low, self.episode_low_ms
        if self.raised or count < s.intervals or span_ms < s.min_seconds * 1000.0:
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
            # The episode so far: its low intervals, their training time, and the
            # healthy intervals it tolerated.
            "intervals": count,
            "seconds": round(span_ms / 1000.0, 3),
            "healthy_intervals": self.episode_healthy,
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

    def _healthy(self, interval_ms: float) -> None:
        """A healthy interval: inside an episode, tolerated or the episode's end."""
        if not self.episode_low:
            return  # no episode open
        s = self.settings
        self.episode_healthy += 1
        self.calm += 1
        self.calm_ms += interval_ms
        # Too many healthy intervals for a slow episode: more than one, plus one for
        # every `intervals` low ones after the first (the density of `intervals` low
        # intervals in every intervals + 1). Scattered hiccups never add up.
        sparse = self.episode_healthy * s.intervals > self.episode_low + s.intervals - 1
        # Or back to pace for as long as a slowdown must last to be named: what bounds
        # how long a long episode, whose many low intervals tolerate many healthy ones,
        # keeps a new slowdown from alerting again.
        recovered = self.calm > s.intervals and self.calm_ms >= s.min_seconds * 1000.0
        if sparse or recovered:
            self.episode_low, self.episode_low_ms, self.episode_healthy = 0, 0.0, 0
            self.calm, self.calm_ms = 0, 0.0
            self.raised = False  # the episode is over: the next one may alert
