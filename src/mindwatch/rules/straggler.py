"""``straggler``: under synchronous data parallelism, the rank whose input pipeline
holds the others up.

Every rank waits for the slowest one in the gradient all-reduce, so step time and
``perf/compute_ms`` are nearly equal on every rank and their argmax names whichever
rank happened to be a hair slower. The wait for the next batch happens *before* a rank
joins the all-reduce, so it is not equalised: the rank with a slow pipeline waits for
data while the others wait inside the collective. Each rank writes, on the last step of
each of its intervals, the median data wait of that interval's steps
(``straggler/input_wait_ms``, reduced with ``max``) and the interval's median step time
(``straggler/step_ms``); rank 0 gets the spread ``ranks/input_wait_ms_max``, ``_min``
and ``_argmax``. The score, in the style of NVIDIA Resiliency Extension's straggler
detector, is ``1 - (wait_max - wait_min) / step_ms``: the share of the step the slowest
rank was not held up by its own data beyond the fastest rank.

Medians, not means, so one slow batch (a file opened, a garbage collection) does not
move an interval; and the score must stay low on ``intervals`` consecutive intervals
spanning at least ``min_seconds`` of training (counted from the measured step times,
so the offline watcher judges a replay the same way): a scheduler hiccup on a busy host
is neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Optional

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import Finding, Rule, RuleSettings

__all__ = ["INPUT_WAIT", "STEP", "StragglerRule", "StragglerSettings"]

INPUT_WAIT = "straggler/input_wait_ms"
STEP = "straggler/step_ms"
_SPREAD = "ranks/input_wait_ms"


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
        default=0.75,
        gt=0,
        lt=1,
        description="Warning when the score (1 - (wait_max - wait_min) / step time) stays "
        "below this: the slowest rank spends more than a quarter of each step waiting "
        "for its own data beyond what the fastest rank waits.",
    )
    intervals: int = Field(
        default=3,
        ge=1,
        description="Consecutive low intervals needed (one slow interval is noise).",
    )
    min_seconds: float = Field(
        default=1.0,
        ge=0,
        description="... also spanning at least this many seconds of training (from the "
        "measured step times): a scheduler hiccup or a garbage collection on a busy "
        "host lasts tens to hundreds of milliseconds, and each interval's median "
        "already needs more than half its steps slow.",
    )
    skip: int = Field(
        default=2,
        ge=0,
        description="First intervals ignored: compile time and the prefetch buffer "
        "filling make the first steps' waits unlike the run's own.",
    )


class StragglerRule(Rule[StragglerSettings]):
    """The input score below ``threshold`` on ``intervals`` consecutive intervals
    spanning ``min_seconds``: a warning naming the rank (the argmax of the data wait),
    the part and the score, once per episode (a new one needs a healthy interval)."""

    name = "straggler"
    settings_model = StragglerSettings
    causes = (
        N_(
            "that rank's input pipeline is slower: its disk or file system, decoding, "
            "num_parallel_workers, or a host busier than the others"
        ),
        N_("that rank's data shard is heavier (longer samples, larger images)"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "input": N_(
            "rank {rank} is the straggler: its input pipeline holds the others up "
            "(score {score} below {threshold} for {intervals} intervals, {seconds} s; "
            "data wait {wait_max} ms against {wait_min} ms on the fastest rank, "
            "step {step_ms} ms)"
        ),
    }
    state = ("seen", "low", "low_ms", "raised")

    def __init__(self, settings: StragglerSettings) -> None:
        super().__init__(settings)
        self.seen = 0  # intervals seen
        self.low = 0  # consecutive low intervals
        self.low_ms = 0.0  # training time they span
        self.raised = False

    @staticmethod
    def score(wait_max: float, wait_min: float, step_ms: float) -> float:
        """``1 - (wait_max - wait_min) / step_ms``, clipped to 0..1."""
        return min(1.0, max(0.0, 1.0 - (wait_max - wait_min) / step_ms))

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        if STEP not in values:
            return []  # the common case: not an interval's last step
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
        score = self.score(wait_max, wait_min, step_ms)
        if score >= s.threshold:
            self.low, self.low_ms, self.raised = 0, 0.0, False
            return []
        self.low += 1
        self.low_ms += step_ms * s.interval
        if self.raised or self.low < s.intervals or self.low_ms < s.min_seconds * 1000.0:
            return []
        self.raised = True
        rank: Optional[int] = int(argmax) if argmax is not None else None
        message = self.message(
            "input",
            rank=rank if rank is not None else "?",
            score=f"{score:.2f}",
            threshold=f"{s.threshold:.2f}",
            intervals=self.low,
            seconds=f"{self.low_ms / 1000.0:.1f}",
            wait_max=f"{wait_max:.3g}",
            wait_min=f"{wait_min:.3g}",
            step_ms=f"{step_ms:.3g}",
        )
        extra = {
            "part": "input pipeline",
            "score": score,
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
