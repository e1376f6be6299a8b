"""A rank's telemetry as its steps see it: the sampler, its probes, the latest sample.

:func:`open_telemetry` builds the probes the ``hardware`` section asks for (the host
counters; ``npu-smi`` where it exists, for this rank's device) and starts the sampler
thread. The steps read its latest sample, never a probe
(:class:`~mindwatch.metrics.steps.Telemetry`):

* :meth:`HardwareTelemetry.latest` under reduction: every rank's latest sample joins
  the last step of every interval (:class:`~mindwatch.aggregate.Aggregator`);
* :meth:`HardwareTelemetry.due` otherwise: the first step logged a period after the
  previous one that got it.

The first sample is *published* one period after the start: the rates (CPU %, disk and
network MB/s) need two reads, and a run shorter than one period gets no ``hw/`` curves
rather than a half-empty first point.

The framework adapter adds what only it can read (:meth:`HardwareTelemetry.add_probe`:
MindSpore's device memory) and this rank's device (:meth:`use_device`: the npu-smi
probe follows it). The sources in use, or why one gives nothing, go to ``run.json``
(``hardware``), with the node (host name) and device id; ``sources.disk`` is the disk
the disk rates are of (psutil's key of the one holding the run folder, or ``all
disks``), ``sources.net`` the interfaces the network rates are of.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Callable, Optional

from mindwatch.config.hardware import HardwareSettings
from mindwatch.hardware import npu_smi
from mindwatch.hardware.host import HostProbe
from mindwatch.hardware.sampler import Sampler
from mindwatch.run.ranks import env_device_id

__all__ = ["HardwareTelemetry", "open_telemetry"]

log = logging.getLogger(__name__)

Values = list[tuple[str, float]]
Probe = Callable[[], Mapping[str, float]]
Record = Callable[..., None]


class HardwareTelemetry:
    """The sampler of one rank and the latest sample as ``(tag, value)`` pairs."""

    def __init__(
        self,
        settings: HardwareSettings,
        path: Path,
        *,
        rank: int,
        record: Optional[Record] = None,
    ) -> None:
        self.settings = settings
        self.rank = rank
        self._record = record
        self._lock = threading.Lock()
        self._next_due: Optional[float] = None
        self.node = socket.gethostname()
        self.device_id: Optional[int] = env_device_id()
        self.sources: dict[str, str] = {}
        probes: dict[str, Probe] = {}
        if settings.host:
            host = HostProbe(path)
            probes["host"] = host
            self.sources["host"] = "psutil"
            # Which disk the disk rates are of (the one holding the run folder, or "all
            # disks"), and the network's: run.json says what the numbers measure.
            self.sources.update(host.sources)
        self._sampler = Sampler(probes, settings.period_s, growth_window_s=settings.growth_window_s)
        if settings.npu_smi:
            self._use_npu_smi()
        self._write_facts()

    # ------------------------------------------------------------ set-up (any thread)

    def add_probe(self, name: str, probe: Probe, source: str) -> None:
        """Sample ``probe`` too (e.g. the adapter's device memory), named ``source``."""
        self._sampler.add_probe(name, probe)
        self.sources[name] = source
        self._write_facts()

    def use_device(self, device_id: Optional[int], kind: str) -> None:
        """This rank's logical device (the framework's device id) and its kind; the
        npu-smi probe follows the device id."""
        moved = device_id != self.device_id
        self.device_id = device_id
        self.sources["device"] = kind
        if moved and self.settings.npu_smi:
            self._use_npu_smi()
        self._write_facts()

    def _use_npu_smi(self) -> None:
        """Sample npu-smi for this rank's device, if npu-smi exists (else say so once,
        in run.json: absent is not an error)."""
        executable = self.settings.npu_smi_path or "npu-smi"
        if not npu_smi.available(executable):
            self.sources["npu_smi"] = "not found (no Ascend NPU telemetry)"
            return
        device = self.device_id if self.device_id is not None else 0
        reader = npu_smi.NpuSmi(device, executable, timeout=self.settings.npu_smi_timeout_s)
        self._sampler.add_probe("npu_smi", reader.read)  # it replaces an earlier device's
        self.sources["npu_smi"] = f"npu-smi, device {device}"

    def _write_facts(self) -> None:
        if self._record is not None:
            self._record(
                hardware={
                    "node": self.node,
                    "device_id": self.device_id,
                    "period_s": self.settings.period_s,
                    "sources": dict(self.sources),
                }
            )

    # ------------------------------------------------------------ the steps' side

    def latest(self) -> Values:
        """The latest published sample's values (empty before the first)."""
        found = self._sampler.latest()
        return list(found.values.items()) if found is not None else []

    def due(self, wall: float) -> Values:
        """The latest sample's values if ``period_s`` passed since the step that got them
        last (one point per period), else nothing."""
        found = self._sampler.latest()
        if found is None:
            return []
        with self._lock:
            if self._next_due is not None and wall < self._next_due:
                return []
            self._next_due = wall + self.settings.period_s
        return list(found.values.items())

    @property
    def published(self) -> int:
        """How many samples the sampler has published so far."""
        return self._sampler.published

    def close(self) -> None:
        """Stop sampling (the latest sample stays readable for the last steps)."""
        self._sampler.close()


def open_telemetry(
    settings: HardwareSettings, path: Path, *, rank: int, record: Optional[Record] = None
) -> Optional[HardwareTelemetry]:
    """This rank's telemetry as ``settings`` asks, or None (off). Never raises: a
    telemetry that cannot start costs one warning, and training goes on without it."""
    if not settings.enabled:
        return None
    try:
        return HardwareTelemetry(settings, path, rank=rank, record=record)
    except Exception as exc:
        log.warning("mindwatch: hardware telemetry is off: it could not start (%r)", exc)
        return None
