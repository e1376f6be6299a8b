"""Hardware telemetry without MindSpore: probes read the host (and, from other modules,
the devices) into ``hw/...`` tags, and a :class:`Sampler` reads them on its own thread so
the training thread only takes the latest sample.

* :mod:`.host`: :class:`HostProbe`, this process's CPU and memory, the host's free
  memory, the run folder's disk and the network, with psutil;
* :mod:`.sampler`: :class:`Sampler`, each probe on its own worker under a time budget,
  the latest :class:`HardwareSample`, and per-rank RSS growth;
* :mod:`.growth`: :func:`growth_stats`, the Theil-Sen slope and rising share;
* :mod:`.npu_smi`: :class:`NpuSmi`, an Ascend NPU's table from ``npu-smi`` (parsed and
  tested on recorded outputs);
* :mod:`.telemetry`: :class:`HardwareTelemetry`, the sampler as a rank's steps see it
  (the ``hardware:`` section, :class:`~mindwatch.config.HardwareSettings`, builds it).
"""

from mindwatch.hardware.growth import MIN_SAMPLES, GrowthStats, growth_stats
from mindwatch.hardware.host import HostProbe
from mindwatch.hardware.sampler import HardwareSample, Probe, Sampler

__all__ = [
    "MIN_SAMPLES",
    "GrowthStats",
    "HardwareSample",
    "HostProbe",
    "Probe",
    "Sampler",
    "growth_stats",
]
