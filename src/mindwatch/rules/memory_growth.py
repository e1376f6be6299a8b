"""``memory_growth``: a rank whose host memory keeps growing (a leak).

Each rank's sampler measures its own process's RSS over the last
``hardware.growth_window_s`` seconds (:mod:`mindwatch.hardware.growth`): the Theil-Sen
slope ``hw/rss_growth_mb_per_min`` and the share of rising samples
``hw/rss_rising_share``. Both are reduced with ``max``, so rank 0 sees the fastest
growth and ``ranks/rss_growth_mb_per_min_argmax`` names the rank it is on; a leaking
rank shows even when another rank's RSS is larger.

A leak is growth that does not stop: the slope above ``mb_per_min`` *and* most of the
window's samples rising (``rising_share``), on ``samples`` samples in a row spanning
``seconds`` of training. The warm-up is skipped (``skip_seconds``): graph compilation,
the dataset's workers and prefetch buffers, the allocator's first arenas all grow RSS
in the first seconds to minutes, then it plateaus.

The two statistics are reduced apart, so rank 0's rising share is the highest of any
rank's, not necessarily the fastest-growing rank's; a leaking rank rises on nearly every
sample, so its share is that highest one in practice, and the rank named is the one
whose slope is the largest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import Finding, Rule
from mindwatch.rules.sustained import (
    Sustained,
    SustainedSettings,
    TrainingClock,
    outlier_rank,
    sample_key,
)

__all__ = ["MemoryGrowthRule", "MemoryGrowthSettings"]

GROWTH = "hw/rss_growth_mb_per_min"
RISING = "hw/rss_rising_share"


class MemoryGrowthSettings(SustainedSettings):
    """``memory_growth``: a rank's host memory (RSS) growing steadily: a leak.

    The thresholds come from the noise of the statistic on healthy runs, measured with
    this package's own sampler (MindSpore 2.10 on CPU, graph mode):

    * a ``Model.train`` of a small CNN fed by a ``GeneratorDataset``, 240 s (95 steps
      of ~1.9 s on a busy 2-core host; ``period_s`` 1, so 80 samples, one per step at
      most): RSS 603.6 MB at the first sample, 613.4 MB at 10 s, 613.7 MB from 60 s
      to the end. Over 60 s windows the Theil-Sen slope is at most 0.42 MB/min once
      30 s have passed and 0.01 MB/min after 120 s (rising share then at most 0.18);
      in the first 30 s it reaches 41 MB/min, and the window holding the start-up
      525 MB/min with every sample rising;
    * the data-parallel job of the multi-card tests (``msrun``, 2 CPU workers, 0.5 s
      samples, 4 s window): 808 MB/min falling to 11 MB/min in the first 4.6 s (the
      start-up rise leaving the window), then 0.35 to 1.4 MB/min with 50 to 71 % of
      the samples rising (RSS creeping page by page).

    So a healthy run's slope stays below ~1.5 MB/min after its warm-up, and a creep can
    rise on most samples: 10 MB/min (7 times the worst healthy creep; 14 GB a day)
    *and* 75 % of the samples rising (a leak at every step rises on all of them; a
    one-off jump on one). The start-up rise stays in the statistic's window for
    ``hardware.growth_window_s`` (default 300 s) after it ends: the first
    ``skip_seconds`` plus ``seconds`` (120 + 300 s) outlast it, so it never alerts.
    Keep ``skip_seconds + seconds`` above ``hardware.growth_window_s`` when changing
    either."""

    mb_per_min: float = Field(
        default=10.0,
        gt=0,
        description="Warning when the growth (Theil-Sen slope of RSS over "
        "hardware.growth_window_s) stays above this many MB per minute.",
    )
    rising_share: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="... with at least this share of the window's samples rising (a "
        "steady leak: near 1; a healthy creep: up to ~0.7; a flat process: ~0).",
    )
    samples: int = Field(
        default=6,
        ge=1,
        le=10_000,
        description="Samples in a row that must show it (the telemetry arrives at most "
        "once per hardware.period_s).",
    )
    seconds: float = Field(
        default=300.0,
        ge=0,
        le=7 * 86_400,
        description="... also spanning at least this many seconds of training (from "
        "perf/step_time_ms): memory that grows for minutes and does not stop. At most "
        "604800 (a week).",
    )
    skip_seconds: float = Field(
        default=120.0,
        ge=0,
        le=7 * 86_400,
        description="Training seconds ignored from the first sample: compilation, the "
        "dataset's workers and the allocator's first arenas grow RSS before it plateaus. "
        "At most 604800 (a week).",
    )


class MemoryGrowthRule(Rule[MemoryGrowthSettings]):
    """``hw/rss_growth_mb_per_min`` above ``mb_per_min`` with ``hw/rss_rising_share`` at
    least ``rising_share``, for ``samples`` samples spanning ``seconds`` after the first
    ``skip_seconds``: a warning naming the rank that grows fastest (the argmax), once per
    episode (a new one needs a sample that does not grow)."""

    name = "memory_growth"
    settings_model = MemoryGrowthSettings
    causes = (
        N_(
            "a leak in the training script: a list or dict that keeps every step's "
            "tensors, losses or batches (keep Python floats, or only the last ones)"
        ),
        N_("a cache without a bound (a dataset's, a tokenizer's, a custom one)"),
        N_("the input pipeline's queues or workers growing (num_parallel_workers, prefetch)"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "growing": N_(
            "host memory (RSS) grows {growth} MB/min, {share} of the samples rising, "
            "for {count} samples ({seconds} s); threshold {threshold} MB/min"
        ),
    }
    state = ("raised", "first_ms")  # and the clock's and the run's (state_dict below)

    def __init__(self, settings: MemoryGrowthSettings) -> None:
        super().__init__(settings)
        self.clock = TrainingClock()
        self.run = Sustained()
        self.raised = False
        self.first_ms = -1.0  # training time of the first sample
        self.last_key: tuple[tuple[str, float], ...] = ()  # not state: only repeats

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "clock": self.clock.state_dict(),
            "run": self.run.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.clock.load_state_dict(state.get("clock") or {})
        self.run.load_state_dict(state.get("run") or {})

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        now = self.clock.tick(step, values)
        growth = self.finite(values, GROWTH)
        if growth is None:
            return []  # the common case: no sample at this step
        s = self.settings
        if self.first_ms < 0:
            self.first_ms = now
        if self.clock.known and now - self.first_ms < s.skip_seconds * 1000.0:
            return []
        share = self.finite(values, RISING)
        growing = growth > s.mb_per_min and share is not None and share >= s.rising_share
        key = sample_key(values)
        fresh, self.last_key = key != self.last_key, key
        self.run.update(growing, now, fresh=fresh)
        if not growing:
            self.raised = False
            return []
        if self.raised or not self.run.lasted(s, self.clock):
            return []
        self.raised = True
        message = self.message(
            "growing",
            growth=f"{growth:.3g}",
            share=f"{share:.0%}",
            count=self.run.count,
            seconds=f"{self.run.span_s:.0f}",
            threshold=f"{s.mb_per_min:g}",
        )
        extra = {
            "rising_share": share,
            "samples": self.run.count,
            "seconds": round(self.run.span_s, 3),
        }
        return [
            Finding(
                self.name,
                "warning",
                GROWTH,
                growth,
                message,
                s.mb_per_min,
                rank=outlier_rank(values, GROWTH),
                extra=extra,
            )
        ]
