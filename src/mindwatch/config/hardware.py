"""The ``hardware`` section: per-rank telemetry read on a sampler thread.

On by default where it is cheap: the host counters (psutil, tens of microseconds per
read) and MindSpore's runtime memory counters are read every ``period_s`` seconds on
mindwatch's own thread, never the training thread. ``npu-smi`` is asked only where it
exists (an Ascend host); elsewhere its values are absent, said once. Each source can
be switched off on its own::

    hardware:
      period_s: 10
      npu_smi: false        # e.g. a container whose npu-smi hangs
"""

from __future__ import annotations

from typing import Optional

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
        description="Seconds between two samples (at least 0.5: npu-smi alone takes tens "
        "to hundreds of milliseconds per query; at most 86400, a day).",
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
    npu_smi: bool = Field(
        default=True,
        description="Ascend NPU telemetry from npu-smi (AICore %, HBM, temperature, power, "
        "health) for this rank's device; absent, said once, where npu-smi is not found.",
    )
    npu_smi_path: Optional[str] = Field(
        default=None,
        min_length=1,
        description="The npu-smi executable (None: npu-smi on PATH; "
        "Ascend installs it as /usr/local/sbin/npu-smi).",
    )
    npu_smi_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=600,
        description="Longest wait for one npu-smi query, at most 600 s; a query that takes "
        "longer is killed and costs one warning (a hung driver never stalls the sampler).",
    )
    growth_window_s: float = Field(
        default=300.0,
        gt=0,
        le=DAY,
        description="Wall-time window in seconds (at most 86400, a day) of the per-rank "
        "memory-growth statistics (hw/rss_growth_mb_per_min, hw/rss_rising_share).",
    )
