"""The one collective mindwatch needs, and a guard that keeps it from hanging training.

mindwatch calls ``all_reduce`` (sum or max of one flat vector per rank) every interval
(:mod:`mindwatch.aggregate.allreduce`), and ``all_gather`` once at start-up, for what
only each rank knows (:mod:`mindwatch.aggregate.startup`). Any
framework can provide it (:class:`Collective`); the MindSpore one is
``mindwatch.mindspore.MindSporeCollective``, and ``mindwatch.testing.LocalGroup``
simulates one with threads.

:class:`CollectiveGuard` runs the call on a daemon thread while the training thread
waits for it with a timeout. Collectives must be issued in the same order on every
rank, so the training thread still waits (it may not start the next step's gradient
all-reduce while ours is in flight); the timeout is what turns "a peer died" into a
warning instead of a hang. After one failure the guard is *broken* and never issues
another collective: the peers' state is unknown, and a later call could pair with a
different collective on another rank.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any, Callable, Generic, Optional, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from mindwatch.common.waits import wait_seconds

__all__ = ["AggregationError", "Collective", "CollectiveGuard", "CorruptSliceError"]

Floats = npt.NDArray[np.float64]
T = TypeVar("T")


class Collective(Protocol):
    """What mindwatch needs from a framework's communication layer."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    def all_gather(self, vector: Floats) -> Floats:
        """Every rank's ``vector`` (all of the same length), stacked: ``(world, n)``.
        Start-up only (one-off per-rank facts): its size grows with the world."""
        ...

    def all_reduce(self, vector: Floats, op: str) -> Floats:
        """The element-wise ``op`` ("sum" or "max") of every rank's ``vector`` (all of
        the same length); float32 precision is enough (integers stay below 2^24)."""
        ...


class AggregationError(RuntimeError):
    """A reduction did not complete: timed out, failed, or its data was not trusted."""


class CorruptSliceError(ValueError):
    """A collective's result that is not mindwatch's: another collective ran at the same
    moment on some rank, or the ranks no longer reduce at the same steps."""


class _Job(Generic[T]):
    def __init__(
        self, collect: Optional[Callable[[], T]], after: Optional[Callable[[T], None]]
    ) -> None:
        self.collect = collect  # None: a marker for sync(), or a stop request
        self.after = after
        self.started = threading.Event()
        self.done = threading.Event()
        self.result: Optional[T] = None
        self.error: Optional[BaseException] = None
        self.abandoned = False


class CollectiveGuard:
    """Run collectives on one daemon thread; the caller waits at most ``timeout`` seconds.

    The timeout counts from the moment the collective starts (not while it waits behind
    the previous job's writing), so it measures the other ranks, not this one. A job
    the caller gave up on before it started is never started.

    A plain daemon thread, not an executor: a collective stuck on a dead peer must not
    block interpreter exit.
    """

    def __init__(self, name: str = "mindwatch-collective") -> None:
        self.broken: Optional[str] = None
        self._jobs: queue.SimpleQueue[_Job[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_collective = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call(
        self,
        collect: Callable[[], T],
        timeout: float,
        after: Optional[Callable[[T], None]] = None,
    ) -> T:
        """Run ``collect()`` on the collective thread and return its result.

        ``after(result)`` then runs on that thread too, once the caller is released
        (decoding and writing need not hold up training). Raises
        :class:`AggregationError` on timeout, on an exception from ``collect``, or if
        the guard is broken; the guard is then broken for good.
        """
        if self.broken is not None:
            raise AggregationError(self.broken)
        if self._stopped:
            raise AggregationError("the monitor is closed")
        job: _Job[T] = _Job(collect, after)
        self._jobs.put(job)
        # First the previous job's after() (this rank's own writing, bounded by the
        # writers' max_block_secs), then the collective itself, each within `timeout`.
        wait = wait_seconds(timeout)
        if not (job.started.wait(wait) and job.done.wait(wait)):
            with self._lock:  # the answer may have arrived just now: then it counts
                job.abandoned = not job.done.is_set()
        if job.abandoned:
            self.broken = (
                f"no answer from the other ranks within {timeout:g} s "
                "(a rank died, hangs, or does not run mindwatch)"
            )
            raise AggregationError(self.broken)
        if job.error is not None:
            self.broken = f"{type(job.error).__name__}: {job.error}"
            raise AggregationError(self.broken) from job.error
        return job.result  # type: ignore[return-value]

    def sync(self, timeout: float) -> bool:
        """Wait until every job handed over so far, ``after`` included, has finished.

        A collective stuck on a dead peer is not waited for: its job never writes.
        """
        with self._lock:
            if self._stopped:
                return not self._thread.is_alive()
            if self.broken is not None and self._in_collective:
                return False
        marker: _Job[None] = _Job(None, None)
        self._jobs.put(marker)
        return marker.done.wait(wait_seconds(timeout))

    def stop(self) -> None:
        """End the thread once the jobs handed over so far are done (a thread stuck in a
        collective on a dead peer stays, as a daemon).

        A thread that is not stuck is joined (briefly): it has run MindSpore operations,
        and a thread still ending while the interpreter and MindSpore's runtime shut
        down is a needless risk at exit."""
        with self._lock:
            self._stopped = True
            stuck = self.broken is not None and self._in_collective
        self._jobs.put(_STOP)
        if not stuck and self._thread is not threading.current_thread():
            self._thread.join(_JOIN_SECS)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            with self._lock:
                if job.abandoned:  # the caller gave up before it started: do not issue it
                    job.done.set()
                    continue
                self._in_collective = job.collect is not None
                job.started.set()
            try:
                if job.collect is not None:
                    job.result = job.collect()
            except BaseException as exc:  # reported to the caller, never raised here
                job.error = exc
            with self._lock:
                self._in_collective = False
                abandoned = job.abandoned
                job.done.set()
            if job.after is not None and job.error is None and not abandoned:
                # after() reports its own failures; nothing may kill this thread
                with contextlib.suppress(Exception):
                    job.after(job.result)


_STOP: _Job[None] = _Job(None, None)
_JOIN_SECS = 2.0  # the jobs before the stop are done (sync): only the thread's own end
