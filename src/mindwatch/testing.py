"""Test helpers that ship with the package (for mindwatch's tests and yours).

:class:`LocalGroup` simulates a data-parallel job's collective with threads in one
process: start one thread per rank, give each its ``group.member(rank)`` as the
``collective`` of its :class:`mindwatch.Monitor`, and the monitors reduce across the
"ranks" exactly as they would across ``msrun`` workers. A member that stops calling
(its thread just returns) leaves the others waiting, as a dead worker does.

:class:`MemorySink` keeps what a monitor's pipeline hands its sinks
(``monitor.add_sink(sink)``), for assertions without reading files.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

__all__ = ["LocalCollective", "LocalGroup", "MemorySink"]

Floats = npt.NDArray[np.float64]


class LocalGroup:
    """``world_size`` simulated ranks sharing their collectives (a barrier and slots:
    an all-reduce is an all-gather reduced on every rank)."""

    def __init__(self, world_size: int, *, timeout: Optional[float] = None) -> None:
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self.world_size = world_size
        self.timeout = timeout  # like a backend's own collective timeout (None: none)
        self._slots: list[Optional[Floats]] = [None] * world_size
        self._barrier = threading.Barrier(world_size)
        self.calls = 0  # collectives completed (all-gathers and all-reduces)
        self.attempts = [0] * world_size  # collectives each rank entered

    def member(self, rank: int) -> LocalCollective:
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), got {rank}")
        return LocalCollective(self, rank)

    def _all_gather(self, rank: int, vector: Floats) -> Floats:
        self.attempts[rank] += 1
        self._slots[rank] = np.array(vector, dtype=np.float64, copy=True)
        index = self._barrier.wait(self.timeout)  # everyone has written
        if index == 0:
            self.calls += 1
        sizes = {slot.shape for slot in self._slots if slot is not None}
        if len(sizes) != 1:
            raise RuntimeError(f"all_gather with different lengths: {sorted(sizes)}")
        result = np.stack([slot for slot in self._slots if slot is not None])
        self._barrier.wait(self.timeout)  # everyone has read before anyone writes again
        return result

    def _all_reduce(self, rank: int, vector: Floats, op: str) -> Floats:
        if op not in ("sum", "max"):
            raise ValueError(f"all_reduce op must be 'sum' or 'max', got {op!r}")
        stacked = self._all_gather(rank, vector)
        with np.errstate(invalid="ignore", over="ignore"):
            out: Floats = stacked.sum(axis=0) if op == "sum" else stacked.max(axis=0)
        return out


class LocalCollective:
    """One simulated rank's view of a :class:`LocalGroup` (a ``Collective``)."""

    def __init__(self, group: LocalGroup, rank: int) -> None:
        self._group = group
        self.rank = rank
        self.world_size = group.world_size

    def all_gather(self, vector: Floats) -> Floats:
        return self._group._all_gather(self.rank, vector)

    def all_reduce(self, vector: Floats, op: str) -> Floats:
        return self._group._all_reduce(self.rank, vector, op)


class MemorySink:
    """A :class:`~mindwatch.sinks.Sink` that keeps every item in :attr:`items`."""

    name = "memory"

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.closed = False

    def write(self, item: Any) -> None:
        self.items.append(item)

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self, timeout: Optional[float] = None) -> None:
        self.closed = True

    def of(self, kind: type) -> list[Any]:
        """The items of one kind (e.g. ``mindwatch.sinks.items.StepValues``)."""
        return [item for item in self.items if isinstance(item, kind)]
