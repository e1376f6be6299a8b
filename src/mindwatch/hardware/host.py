"""``HostProbe``: this process's CPU and memory, the host's free memory, and the disk and
network traffic that training competes for, read with psutil.

One call gives one reading, as a ``dict[str, float]`` of ``hw/...`` tags (the shape every
probe of :class:`~mindwatch.hardware.sampler.Sampler` returns). Decisions:

* **Rates from deltas between calls.** Disk and network counters are totals since boot
  and ``Process.cpu_percent`` measures since its previous call, so the first call only
  primes them and returns no rate; every later call gives the rate over the time since
  the one before (the sampler's period). No call ever sleeps to measure.
* **CPU % is this process's, across all its threads**: 100 means one core's worth of
  time, so a process keeping 4 cores busy reads 400 (psutil's convention, and the one
  ``top`` uses). The host's CPU is not read: on a shared machine it says little about
  this run.
* **The disk is the one holding** ``path`` (the run folder: where checkpoints and event
  files go), found by the mount that holds the path and that mount's device, matched to
  psutil's per-disk counters. Where that fails (an overlay or network file system, a
  container that hides ``/sys/block``), the whole host's totals are read instead;
  :attr:`HostProbe.sources` says which, so a report can say what the numbers are.
* **Network is the host's total over all interfaces** (``psutil.net_io_counters``):
  which interface carries the collectives is not knowable from here.
* **A counter psutil cannot give is absent, never an exception**: ``AccessDenied`` in a
  locked-down container, a per-disk key that vanished, ``NotImplementedError`` on an
  unusual platform. Each such counter logs one warning (the first time) and is left out
  of every reading after; the others go on.
* **MB are MiB** (2**20 bytes), as MindSpore's memory reports count them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Optional, TypeVar, Union

import psutil

from mindwatch.common.warn import WarnOnce

__all__ = ["MB", "HostProbe"]

_log = logging.getLogger(__name__)

MB = float(2**20)
"""Bytes in one MB as mindwatch reports memory and traffic (a MiB)."""

T = TypeVar("T")


class HostProbe:
    """Read the host counters of the disk holding ``path``; call it once per sample."""

    name = "host"
    """The name the sampler's warnings use for this probe."""

    def __init__(self, path: Union[str, os.PathLike[str]] = ".") -> None:
        self._warn = WarnOnce(_log)
        self._process = psutil.Process()
        self._path = os.path.realpath(os.fspath(path))
        self._disk_key: Optional[str] = None
        self.sources: dict[str, str] = {"net": "all interfaces"}
        """Where each rate comes from: ``sources["disk"]`` is the per-disk key (``sda``,
        ``nvme0n1p2``, ``dm-0``) or ``"all disks"`` when the path's disk could not be
        matched; ``sources["net"]`` is always ``"all interfaces"``."""
        self._disk_key = self._find_disk(self._path)
        self.sources["disk"] = self._disk_key if self._disk_key is not None else "all disks"
        self._last_time: Optional[float] = None
        self._last_disk: Optional[tuple[int, int]] = None
        self._last_net: Optional[tuple[int, int]] = None

    def __call__(self) -> dict[str, float]:
        """One reading; rates only from the second call on."""
        now = time.monotonic()
        elapsed = None if self._last_time is None else now - self._last_time
        self._last_time = now
        values: dict[str, float] = {}

        cpu = self._read("cpu_percent", lambda: self._process.cpu_percent(interval=None))
        if cpu is not None and elapsed is not None:
            values["hw/cpu_percent"] = float(cpu)
        rss = self._read("rss_mb", lambda: self._process.memory_info().rss)
        if rss is not None:
            values["hw/rss_mb"] = rss / MB
        available = self._read("host_mem_available_mb", lambda: psutil.virtual_memory().available)
        if available is not None:
            values["hw/host_mem_available_mb"] = available / MB

        disk = self._read("disk_io", self._disk_bytes)
        if disk is not None and self._last_disk is not None and elapsed:
            values["hw/disk_read_mb_s"] = _rate(disk[0], self._last_disk[0], elapsed)
            values["hw/disk_write_mb_s"] = _rate(disk[1], self._last_disk[1], elapsed)
        self._last_disk = disk

        net = self._read("net_io", self._net_bytes)
        if net is not None and self._last_net is not None and elapsed:
            values["hw/net_recv_mb_s"] = _rate(net[0], self._last_net[0], elapsed)
            values["hw/net_sent_mb_s"] = _rate(net[1], self._last_net[1], elapsed)
        self._last_net = net
        return values

    def _read(self, counter: str, read: Callable[[], T]) -> Optional[T]:
        """``read()``, or None with one warning (the first time) when psutil cannot give
        ``counter``; a counter that failed once is not asked again (it would fail again,
        and an ``AccessDenied`` may cost a system call each time)."""
        if counter in self._warn:
            return None
        try:
            return read()
        except Exception as exc:  # psutil.Error, OSError, NotImplementedError, KeyError...
            self._warn(
                counter,
                "mindwatch: hardware: %s is not available here (%s: %s); it is left out",
                counter,
                type(exc).__name__,
                exc,
            )
            return None

    def _disk_bytes(self) -> tuple[int, int]:
        if self._disk_key is not None:
            per_disk = psutil.disk_io_counters(perdisk=True)
            counters = per_disk[self._disk_key]  # KeyError if the disk went away
        else:
            total = psutil.disk_io_counters(perdisk=False)
            if total is None:  # psutil's answer on a host with no disks it can see
                raise NotImplementedError("psutil found no disk counters")
            counters = total
        return counters.read_bytes, counters.write_bytes

    @staticmethod
    def _net_bytes() -> tuple[int, int]:
        counters = psutil.net_io_counters(pernic=False)
        if counters is None:
            raise NotImplementedError("psutil found no network counters")
        return counters.bytes_recv, counters.bytes_sent

    def _find_disk(self, path: str) -> Optional[str]:
        """The per-disk counters' key of the device mounted where ``path`` lives, or None.

        The longest mount point that contains the path is its mount (``/data`` before
        ``/``); its device (``/dev/sda1``, ``/dev/mapper/vg-root``) is resolved through
        symlinks (``/dev/dm-0``) and its base name is psutil's key on Linux. Anything
        that does not match (``overlay``, ``tmpfs``, ``server:/export``) gives None.
        """
        try:
            partitions = psutil.disk_partitions(all=True)
            keys = set(psutil.disk_io_counters(perdisk=True))
        except Exception as exc:
            _log.warning(
                "mindwatch: hardware: cannot map %s to a disk (%s: %s); disk rates are "
                "the whole host's",
                path,
                type(exc).__name__,
                exc,
            )
            return None
        best: Optional[tuple[str, str]] = None  # (mount point, device)
        for part in partitions:
            mount = part.mountpoint.rstrip(os.sep) or os.sep
            inside = mount in (os.sep, path) or path.startswith(mount + os.sep)
            if inside and (best is None or len(mount) > len(best[0])):
                best = (mount, part.device)
        if best is None:
            return None
        for device in (best[1], os.path.realpath(best[1])):
            key = os.path.basename(device)
            if key in keys:
                return key
        return None


def _rate(now: int, before: int, elapsed: float) -> float:
    """MB/s between two counter readings; a counter that went back (a device reset, a
    32-bit wrap) reads as 0 for that interval rather than as a negative rate."""
    return max(now - before, 0) / MB / elapsed
