"""The ``hardware`` section: per-rank telemetry read on a sampler thread.

On by default where it is cheap: the host counters (psutil, tens of microseconds per
read) and MindSpore's runtime memory counters are read every ``period_s`` seconds on
mindwatch's own thread, never the training thread. Each source can be switched off on
its own::

    hardware:
      period_s: 10
      device_memory: false
"""

from __future__ import annotations

from pydantic import Field

from mindwatch.config.settings import DAY, Settings

__all__ = ["HardwareSettings"]


class HardwareSettings(Settings):
    """Which telemetry each rank samples, and how often."""

    enabled: bool = Field(
        default=True,
        description="Sample hardware telemetry on every rank (hw/... curves); false: none "
        "of the sources below.",
    )
    period_s: float = Field(
        default=5.0,
        ge=0.5,
        le=DAY,
        description="Seconds between two samples (at least 0.5: a device query such as "
        "npu-smi takes tens to hundreds of milliseconds; at most 86400, a day).",
    )
    host: bool = Field(
        default=True,
        description="The process's CPU % and RSS, the host's available memory, disk and "
        "network rates (psutil).",
    )
    device_memory: bool = Field(
        default=True,
        description="MindSpore's runtime memory counters (allocated, reserved, peak) where "
        "the backend reports them (Ascend, GPU; CPU reports none).",
    )
    growth_window_s: float = Field(
        default=300.0,
        gt=0,
        le=DAY,
        description="Wall-time window in seconds (at most 86400, a day) of the per-rank "
        "memory-growth statistics (hw/rss_growth_mb_per_min, hw/rss_rising_share).",
    )
