"""``EventFileWriter``: TensorBoard event files written from a background thread.

The caller's thread only appends a tuple to a ``collections.deque`` (atomic under the
GIL, no lock): about 0.2 us. A daemon thread encodes, frames and writes in batches, so
the training loop never waits on protobuf, CRC or the disk. Three parts, as in
TensorBoard's own writer: this class (what callers log, and the queue with its thread,
a :class:`~mindwatch.common.handoff.Handoff`), the
:class:`~mindwatch.events.worker.EventWorker` on that thread (encoding, batches,
failures), and the :class:`~mindwatch.events.event_file.EventFile` with its
:class:`~mindwatch.events.records.RecordWriter` (names, rotation, framing).

Guarantees:

* **Bounded flush delay.** Everything enqueued reaches the OS at most ``flush_secs``
  after it was logged (the worker wakes earlier when the queue passes a high-water
  mark). A process killed with SIGKILL keeps everything up to ``flush_secs`` before
  the kill; the half-written last record such a kill can leave is one every
  TensorBoard reader tolerates.
* **Barriers.** :meth:`flush` returns when everything logged before the call is in the
  OS; :meth:`close` also ``fsync``\\ s and closes the file. Both also run at interpreter
  exit and on SIGTERM (see :mod:`mindwatch.run.lifecycle`).
* **Bounded memory, bounded waiting, explicit drop policy.** At most ``max_queue``
  items wait for the worker. When the queue is full (a burst faster than the worker
  can encode, or a stalled disk), the caller waits for room, but never longer than
  ``max_block_secs`` in total: if that wait times out, the writer is marked stalled,
  and new items are dropped at once, without waiting, until the worker has caught up.
  So a stalled disk costs training one bounded wait, not one per step. Dropped points
  are counted (:attr:`stats`) and reported as a warning when dropping starts and again
  at ``close()``; items already queued are never dropped.
* **Failures degrade, never crash.** A write error (disk full, file too large, a
  vanished network mount) is logged once with the file and the reason; the records of
  that batch are counted as dropped; the damaged file is closed (readers treat its
  torn tail like a file still being written) and the next batch starts a new file.
  Training goes on. A later recovery is logged too. A worker that ends on an error
  nothing else caught (a bug) is one warning and a write error; from then on new points
  are dropped and counted at once, so ``run.json`` never says 0 after a loss.
* **A vanished file is noticed.** Before each write the worker checks that the file is
  still the one in the folder. If the run folder was deleted or moved, or the file
  deleted or replaced, it warns once, creates the folder again and goes on in a new file
  there, so the points from then on are kept; it is counted
  (:attr:`WriterStats.files_vanished`, ``event_files_vanished`` in ``run.json``), and
  the old file leaves :attr:`WriterStats.files`.
* **Absolute paths.** The folder is resolved when the writer is created, so a later
  ``os.chdir`` does not move the output. Its parents are created; a folder that can't
  be created or written raises :class:`LogDirError` naming it, before any training.
* **Rotation.** A new file is started when the current one reaches ``max_file_size``
  bytes. File names sort in writing order (the counter is zero-padded), which is the
  order TensorBoard reads them in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from mindwatch.common.handoff import Handoff
from mindwatch.common.waits import finite_seconds, wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.events.encoding import encode_graph, encode_session_start
from mindwatch.events.event_file import LogDirError, PathLike, absolute_logdir, prepare_logdir
from mindwatch.events.records import frame
from mindwatch.events.summaries import (
    histogram_value,
    import_histogram_support,
    import_text_support,
    text_value,
)
from mindwatch.events.worker import (
    BUILD,
    EVENT,
    MARKER,
    SCALARS,
    VALUES,
    Entry,
    EventWorker,
    points,
)
from mindwatch.run import lifecycle

__all__ = [
    "DEFAULT_FLUSH_SECS",
    "DEFAULT_MAX_QUEUE",
    "EventFileWriter",
    "LogDirError",
    "PathLike",
    "WriterStats",
    "absolute_logdir",
    "prepare_logdir",
]

log = logging.getLogger(__name__)

DEFAULT_FLUSH_SECS = 2.0
DEFAULT_MAX_QUEUE = 100_000
DEFAULT_MAX_BLOCK_SECS = 1.0
# Wake the worker early once this many items wait, so a burst is encoded while the
# caller goes on instead of piling up for a whole flush interval.
_HIGH_WATER = 4096
# Items encoded per GIL hold; sleep(0) between chunks keeps the caller's worst stall
# under about a millisecond (perf-anchors: 5.2 ms -> 0.7 ms).
_CHUNK = 256

_ValueBuilder = Callable[[], Sequence[bytes]]


@dataclass(frozen=True)
class WriterStats:
    """Counters of one writer, for reports and tests.

    ``file_bytes``: the bytes written to each of ``files`` (the same order), which a
    finished file holds at least (``mindwatch doctor`` checks it); ``files_vanished``:
    how often the open file was found deleted, moved or replaced (and a new one begun).
    """

    records_written: int
    points_dropped: int
    write_errors: int
    files: tuple[str, ...]
    file_bytes: tuple[int, ...] = ()
    files_vanished: int = 0


def _now_or(wall_time: Optional[float]) -> float:
    """``wall_time``, or now when None (0, the epoch, is a wall time too)."""
    return time.time() if wall_time is None else wall_time


class EventFileWriter:
    """Write TensorBoard event files for one run folder from a background thread.

    ``summarize_drops``: whether :meth:`close` logs how many points were dropped (an
    owner that sums several writers, such as :class:`~mindwatch.Monitor`, turns it off
    and gives one total itself).

    Args:
        logdir: the run folder; created with its parents; resolved to an absolute path.
        flush_secs: longest time between logging a value and handing it to the OS.
        max_file_size: start a new file once the current one reaches this many bytes
            (``None``: never rotate).
        max_queue: items waiting for the worker; when full, the caller waits for room.
        max_block_secs: longest such wait; after it, new items are dropped (and counted)
            until the worker catches up.
        filename_suffix: appended to every file name.
        purge_step: when resuming at this step, hide points at ``>= purge_step`` that
            earlier files of this run folder hold (TensorBoard's ``SessionLog.START``).
    """

    summarize_drops = True

    def __init__(
        self,
        logdir: PathLike,
        *,
        flush_secs: float = DEFAULT_FLUSH_SECS,
        max_file_size: Optional[int] = None,
        max_queue: int = DEFAULT_MAX_QUEUE,
        max_block_secs: float = DEFAULT_MAX_BLOCK_SECS,
        filename_suffix: str = "",
        purge_step: Optional[int] = None,
    ) -> None:
        # Finite, or a wait on them kills the worker (OverflowError) or the caller.
        flush_secs = finite_seconds("flush_secs", flush_secs, positive=True)
        max_block_secs = finite_seconds("max_block_secs", max(max_block_secs, 0.0))
        if max_file_size is not None and max_file_size < 1024:
            raise ValueError(f"max_file_size must be >= 1024 bytes, got {max_file_size!r}")
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue!r}")
        self.logdir = prepare_logdir(logdir)
        self.flush_secs = float(flush_secs)
        self.max_file_size = max_file_size
        self.max_queue = int(max_queue)
        self.max_block_secs = max(float(max_block_secs), 0.0)
        self._warn = WarnOnce(log)
        self._worker = worker = EventWorker(
            self.logdir, max_file_size=max_file_size, suffix=filename_suffix
        )
        # Open the first file here, on the caller's thread: an unwritable folder must
        # fail now, before training starts, not as a warning from the worker later.
        try:
            worker.events.open()
            if purge_step is not None:
                worker.events.write([frame(encode_session_start(time.time(), int(purge_step)))])
        except OSError as exc:
            raise LogDirError(
                f"cannot write event files in '{self.logdir}': {exc.strerror or exc}. "
                "Choose a folder you can write to (the logdir / summary_dir setting)."
            ) from exc
        self._handoff: Handoff[Entry] = Handoff(
            name=f"mindwatch-writer-{self.logdir.name}",
            points=points,
            process=worker.process,
            commit=worker.commit,
            stop=worker.stop,
            dropped=self._dropping,
            died=self._on_worker_death,
            max_queue=self.max_queue,
            max_block_secs=self.max_block_secs,
            period=self.flush_secs,
            wake_at=_HIGH_WATER,
            # Room again once the worker has taken an eighth (hysteresis, so a blocked
            # caller is woken once per batch of work, not once per item).
            room_at=max(self.max_queue - max(self.max_queue // 8, 1), 0),
            chunk=_CHUNK,
        )
        # The hot path's own reference: below the hand-off's fast_limit, an add is a
        # bare append (no wake-up, no room check); closed or dead, the limit is 0.
        self._queue = self._handoff.queue
        self._handoff.start()
        lifecycle.register(self)

    # ------------------------------------------------------------------ caller side

    def add_scalars(
        self,
        step: int,
        scalars: Sequence[tuple[str, float]],
        wall_time: Optional[float] = None,
    ) -> None:
        """Log ``(tag, value)`` pairs at ``step`` as one event. Values must be floats."""
        if type(scalars) is not tuple:
            # Queued items hold only tuples and numbers, which the garbage collector stops
            # tracking: a backlog then never swells its old generation (whose full
            # collections cost tens of milliseconds beside a framework's large heap).
            scalars = tuple(scalars)
        queue = self._queue
        # A wall time of 0 (the epoch, which torch's tests pass) is a wall time, not "now".
        wall = time.time() if wall_time is None else wall_time
        if len(queue) < self._handoff.fast_limit:  # the hot path: one append
            queue.append((SCALARS, wall, step, scalars))
            return
        self._handoff.put((SCALARS, wall, step, scalars))

    def add_scalar(
        self, tag: str, value: float, step: int, wall_time: Optional[float] = None
    ) -> None:
        """Log one scalar. ``value`` is converted with ``float()`` now (TypeError if it can't)."""
        item = (SCALARS, _now_or(wall_time), step, ((tag, float(value)),))
        queue = self._queue
        if len(queue) < self._handoff.fast_limit:  # the hot path: one append
            queue.append(item)
            return
        self._handoff.put(item)

    def add_histogram(
        self,
        tag: str,
        values: Any,
        step: int,
        wall_time: Optional[float] = None,
        buckets: int = 30,
        *,
        copy: bool = True,
    ) -> None:
        """Log a histogram of ``values``; bucketed in the background, so the array is
        copied now (``copy=False``: the caller hands over a copy it will not change)."""
        data = np.array(values, copy=True) if copy else np.asarray(values)
        import_histogram_support()
        self.add_values_later(step, lambda: [histogram_value(tag, data, buckets)], wall_time)

    def add_text(self, tag: str, text: str, step: int, wall_time: Optional[float] = None) -> None:
        """Log markdown text (TensorBoard's TEXT tab)."""
        import_text_support()
        self.add_values_later(step, lambda: [text_value(tag, text)], wall_time)

    def add_values(
        self, step: int, values: Sequence[bytes], wall_time: Optional[float] = None
    ) -> None:
        """Log ready-made serialized ``Summary.Value`` entries as one event."""
        self._handoff.put((VALUES, _now_or(wall_time), step, values))

    def add_values_later(
        self, step: int, build: _ValueBuilder, wall_time: Optional[float] = None
    ) -> None:
        """Log the ``Summary.Value`` entries ``build()`` returns, calling it on the worker."""
        self._handoff.put((BUILD, _now_or(wall_time), step, build))

    def add_graph(self, graph_def: bytes, wall_time: Optional[float] = None) -> None:
        """Log a serialized TensorBoard ``GraphDef`` (the GRAPHS tab shows the last one)."""
        self._handoff.put((EVENT, 0.0, 0, encode_graph(_now_or(wall_time), graph_def)))

    def add_session_start(self, step: int, wall_time: Optional[float] = None) -> None:
        """Mark a restart at ``step``: TensorBoard hides earlier points at ``>= step``."""
        self._handoff.put((MARKER, 0.0, 0, encode_session_start(_now_or(wall_time), step)))

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Block until everything logged so far is in the OS. Returns False on timeout.

        Write errors do not make it fail: they are warned about and counted in
        :attr:`stats` (``points_dropped``, ``write_errors``).
        """
        return self._handoff.barrier().wait(wait_seconds(timeout))

    def close(self, timeout: Optional[float] = None) -> None:
        """Write everything, fsync and close the file. Idempotent; safe from any thread.

        A barrier: returns when everything logged is on disk, or after ``timeout``
        seconds (``None``: no limit) with a warning saying the rest may be lost. Exit and
        SIGTERM use a limit (:data:`~mindwatch.run.lifecycle.EXIT_TIMEOUT_SECS`) so a
        hung network file system cannot keep a finished job alive.
        """
        first = self._handoff.close(timeout)  # every caller waits, not only the first
        if self._handoff.running:
            log.warning(
                "mindwatch: the writer for %s did not finish within %s s (is the disk "
                "hung?); %d queued items may not reach it",
                self.logdir,
                timeout,
                self._handoff.pending(),
            )
        if not first:
            return
        lifecycle.unregister(self)
        stats = self.stats
        if stats.points_dropped and self.summarize_drops:
            log.warning(
                "mindwatch: %d points were not written to %s (%d write errors; "
                "see the first warning above for the reason)",
                stats.points_dropped,
                self.logdir,
                stats.write_errors,
            )

    @property
    def closed(self) -> bool:
        return self._handoff.closed

    @property
    def stats(self) -> WriterStats:
        worker = self._worker
        files, sizes = worker.events.sizes()
        return WriterStats(
            records_written=worker.records_written,
            points_dropped=self._handoff.dropped + worker.lost,
            write_errors=worker.errors,
            files=files,
            file_bytes=sizes,
            files_vanished=worker.events.files_vanished,
        )

    def __enter__(self) -> EventFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ hand-off hooks

    def _dropping(self, count: int) -> None:
        """New points were dropped on the caller's thread: say so once."""
        if "dropping" in self._warn:
            return
        reason = (
            "the writer is closed"
            if self._handoff.closed
            else (
                f"{self.max_queue} items have waited for the disk for more than "
                f"{self.max_block_secs:g} s (max_queue, max_block_secs)"
            )
        )
        self._warn(
            "dropping",
            "mindwatch: dropping new points for %s because %s; training continues. "
            "The total is reported at close().",
            self.logdir,
            reason,
        )

    def _on_worker_death(self, exc: BaseException) -> None:
        """The worker ended on an error nothing else caught (a bug, an encoder raising a
        BaseException): what it left behind is counted (``write_errors``, and every
        point in ``points_dropped``: run.json must not say 0); say so once. The hand-off
        drops and counts new points at once from now on."""
        self._worker.died()
        log.warning(
            "mindwatch: the event writer for %s stopped on an unexpected error (%s); %d "
            "points logged but not written are lost, and points logged from now on are "
            "dropped and counted (points_dropped and write_errors in run.json). Training "
            "continues.",
            self.logdir,
            self._handoff.died,
            self.stats.points_dropped,
        )
