"""``EventFileWriter``: TensorBoard event files written from a background thread.

The caller's thread only appends a tuple to a ``collections.deque`` (atomic under the
GIL, no lock): about 0.2 us. A daemon thread encodes, frames and writes in batches, so
the training loop never waits on protobuf, CRC or the disk.

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
* **A vanished file is noticed.** Before each write the worker checks (``fstat`` of the
  open file against ``stat`` of its path: two system calls per batch, on its own
  thread) that the file is still the one in the folder. If the run folder was deleted
  or moved, or the file deleted or replaced, it warns once, creates the folder again
  and goes on in a new file there, so the points from then on are kept; it is counted
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

import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional, Union

import numpy as np

from mindwatch.common.waits import finite_seconds, wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.events.encoding import (
    encode_file_version,
    encode_graph,
    encode_scalar,
    encode_scalars,
    encode_session_start,
    encode_summary_values,
)
from mindwatch.events.records import frame
from mindwatch.events.summaries import (
    histogram_value,
    import_histogram_support,
    import_text_support,
    text_value,
)
from mindwatch.run import lifecycle
from mindwatch.run.layout import EVENT_FILE_PREFIX

__all__ = [
    "DEFAULT_FLUSH_SECS",
    "DEFAULT_MAX_QUEUE",
    "EventFileWriter",
    "LogDirError",
    "WriterStats",
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
_WRITE_BATCH_BYTES = 1 << 20

_SCALARS, _VALUES, _BUILD, _EVENT, _BARRIER = range(5)
_Item = tuple[int, float, int, Any]
_ValueBuilder = Callable[[], Sequence[bytes]]
PathLike = Union[str, "os.PathLike[str]"]

_file_counter = itertools.count()


class LogDirError(OSError):
    """The log folder cannot be created or written. The message names it and the fix."""


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


def absolute_logdir(path: Any) -> Path:
    """``path`` made absolute (``~`` expanded), or a LogDirError saying what is wrong
    with it: not a path at all, empty (which would silently mean the working folder),
    or holding a NUL character (which no file system takes)."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise LogDirError(
            f"the log folder must be a path (a str or pathlib.Path), got "
            f"{type(path).__name__}: {path!r:.60}. Pass logdir='runs/my_run'."
        ) from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise LogDirError(
            "the log folder is empty; pass one (logdir='runs/my_run', or '.' for the "
            "working folder)"
        )
    if "\0" in text:
        raise LogDirError(
            f"the log folder {text!r:.80} holds a NUL character, which no file system "
            "takes; check how the path was built"
        )
    return Path(os.path.abspath(os.path.expanduser(text)))


def prepare_logdir(path: PathLike) -> Path:
    """Return ``path`` as an absolute folder, created if missing, or raise LogDirError."""
    folder = absolute_logdir(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LogDirError(
            f"cannot create log folder '{folder}': {exc.strerror or exc}. "
            "Choose a folder you can write to (the logdir / summary_dir setting), "
            "or create it first."
        ) from exc
    if not folder.is_dir():
        raise LogDirError(f"log folder '{folder}' exists but is not a folder. Choose another path.")
    return folder


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
    # Set by the worker only (class defaults: the first file's open sets the sizes up).
    _vanished = 0
    _sizes: Optional[dict[str, int]] = None
    _folder_id: Optional[tuple[int, int]] = None  # the run folder's (device, inode)

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
        # Below this queue length an add is a bare append: no wake-up, no room check.
        self._fast_limit = min(_HIGH_WATER, self.max_queue)
        # The worker signals room once the queue is below this (hysteresis, so a
        # blocked caller is woken once per batch of work, not once per item).
        self._room_at = max(self.max_queue - max(self.max_queue // 8, 1), 0)
        self._room = threading.Event()
        self._blocked = False
        self._stalled = False
        self._suffix = filename_suffix
        self._queue: deque[_Item] = deque()
        self._wake = threading.Event()
        self._stop = False
        self._closed = False
        self._close_lock = threading.RLock()  # close() may re-enter from a signal handler
        self._dropped = 0
        self._records = 0
        self._errors = 0
        self._failing: Optional[str] = None
        self._died: Optional[str] = None  # the worker ended on an unexpected error
        self._warn = WarnOnce(log)  # once per kind of trouble, not once per item
        self._files: list[str] = []
        self._file: Optional[BinaryIO] = None  # None after a write error, until reopened
        self._file_bytes = self._header_bytes = 0
        self._last_stamp = 0
        # Open the first file here, on the caller's thread: an unwritable folder must
        # fail now, before training starts, not as a warning from the worker later.
        try:
            self._open_file()
            if purge_step is not None:
                self._write_records([frame(encode_session_start(time.time(), int(purge_step)))])
        except OSError as exc:
            raise LogDirError(
                f"cannot write event files in '{self.logdir}': {exc.strerror or exc}. "
                "Choose a folder you can write to (the logdir / summary_dir setting)."
            ) from exc
        self._thread = threading.Thread(
            target=self._run, name=f"mindwatch-writer-{self.logdir.name}", daemon=True
        )
        self._thread.start()
        lifecycle.register(self)

    # ------------------------------------------------------------------ caller side

    def _enqueue(self, item: _Item, points: int) -> None:
        queue = self._queue
        n = len(queue)
        if n >= self.max_queue and not self._wait_for_room():
            self._drop(points)
            return
        if self._closed or self._died is not None:
            self._drop(points)
            return
        queue.append(item)
        if n >= _HIGH_WATER and not self._wake.is_set():
            self._wake.set()

    def _wait_for_room(self) -> bool:
        """Wait (bounded) until the queue has room; False if it has none."""
        if self._stalled or self._closed or not self._thread.is_alive():
            return False
        deadline = time.monotonic() + self.max_block_secs
        while len(self._queue) >= self.max_queue:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._stalled = True  # drop without waiting until the worker catches up
                return False
            self._room.clear()
            self._blocked = True
            self._wake.set()
            self._room.wait(wait_seconds(remaining))
        return True

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
        if len(queue) < self._fast_limit and not self._closed:  # the hot path: one append
            queue.append((_SCALARS, wall_time or time.time(), step, scalars))
            return
        self._enqueue((_SCALARS, wall_time or time.time(), step, scalars), len(scalars))

    def add_scalar(
        self, tag: str, value: float, step: int, wall_time: Optional[float] = None
    ) -> None:
        """Log one scalar. ``value`` is converted with ``float()`` now (TypeError if it can't)."""
        item = (_SCALARS, wall_time or time.time(), step, ((tag, float(value)),))
        queue = self._queue
        if len(queue) < self._fast_limit and not self._closed:  # the hot path: one append
            queue.append(item)
            return
        self._enqueue(item, 1)

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
        self._enqueue((_VALUES, wall_time or time.time(), step, values), len(values))

    def add_values_later(
        self, step: int, build: _ValueBuilder, wall_time: Optional[float] = None
    ) -> None:
        """Log the ``Summary.Value`` entries ``build()`` returns, calling it on the worker."""
        self._enqueue((_BUILD, wall_time or time.time(), step, build), 1)

    def add_graph(self, graph_def: bytes, wall_time: Optional[float] = None) -> None:
        """Log a serialized TensorBoard ``GraphDef`` (the GRAPHS tab shows the last one)."""
        self._enqueue((_EVENT, 0.0, 0, encode_graph(wall_time or time.time(), graph_def)), 1)

    def add_session_start(self, step: int, wall_time: Optional[float] = None) -> None:
        """Mark a restart at ``step``: TensorBoard hides earlier points at ``>= step``."""
        self._enqueue((_EVENT, 0.0, 0, encode_session_start(wall_time or time.time(), step)), 0)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Block until everything logged so far is in the OS. Returns False on timeout.

        Write errors do not make it fail: they are warned about and counted in
        :attr:`stats` (``points_dropped``, ``write_errors``).
        """
        if self._closed or self._died is not None or not self._thread.is_alive():
            return True
        done = threading.Event()
        self._queue.append((_BARRIER, 0.0, 0, done))
        self._wake.set()
        if not self._thread.is_alive() or self._died is not None:  # it ended meanwhile
            done.set()
        return done.wait(wait_seconds(timeout))

    def close(self, timeout: Optional[float] = None) -> None:
        """Write everything, fsync and close the file. Idempotent; safe from any thread.

        A barrier: returns when everything logged is on disk, or after ``timeout``
        seconds (``None``: no limit) with a warning saying the rest may be lost. Exit and
        SIGTERM use a limit (:data:`~mindwatch.run.lifecycle.EXIT_TIMEOUT_SECS`) so a
        hung network file system cannot keep a finished job alive.
        """
        with self._close_lock:
            first = not self._closed
            self._closed = True  # new items are dropped (and counted) from here on
            self._stop = True
            self._wake.set()
            self._room.set()
        # Every caller waits, not only the first: a SIGTERM handler closing the writer
        # while the program's own close() runs must not return before the data is out.
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(wait_seconds(timeout))
            if self._thread.is_alive():
                log.warning(
                    "mindwatch: the writer for %s did not finish within %s s (is the disk "
                    "hung?); %d queued items may not reach it",
                    self.logdir,
                    timeout,
                    len(self._queue),
                )
        if not first:
            return
        lifecycle.unregister(self)
        if self._died is not None:
            self._discard_queue()  # appended in the instant before the hot path saw it
        if self._dropped and self.summarize_drops:
            log.warning(
                "mindwatch: %d points were not written to %s (%d write errors; "
                "see the first warning above for the reason)",
                self._dropped,
                self.logdir,
                self._errors,
            )

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stats(self) -> WriterStats:
        files = tuple(self._files)
        sizes = self._sizes or {}
        return WriterStats(
            records_written=self._records,
            points_dropped=self._dropped,
            write_errors=self._errors,
            files=files,
            file_bytes=tuple(sizes.get(name, 0) for name in files),
            files_vanished=self._vanished,
        )

    def __enter__(self) -> EventFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drop(self, points: int) -> None:
        self._dropped += points
        if self._died is not None:
            return  # said once, when the worker ended
        if "dropping" not in self._warn:
            reason = (
                "the writer is closed"
                if self._closed
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

    # ------------------------------------------------------------------ worker side

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait(wait_seconds(self.flush_secs))
                self._wake.clear()
                stopping = self._stop
                self._drain()
                if stopping:
                    break
            self._finish()
        except BaseException as exc:  # a dead worker must not be silent
            self._on_worker_death(exc)

    def _on_worker_death(self, exc: BaseException) -> None:
        """The worker ends on an error nothing else caught (a bug, an encoder raising a
        BaseException): say so once, count it (``write_errors``, and every point it
        leaves behind in ``points_dropped``: run.json must not say 0), and from now on
        drop and count new points at once instead of queueing them for nobody."""
        self._died = f"{type(exc).__name__}: {exc}"[:300]
        self._fast_limit = 0  # every add takes the slow path, which drops and counts
        self._errors += 1
        self._discard_queue()
        with contextlib.suppress(Exception):
            self._close_file()
        log.warning(
            "mindwatch: the event writer for %s stopped on an unexpected error (%s); %d "
            "points logged but not written are lost, and points logged from now on are "
            "dropped and counted (points_dropped and write_errors in run.json). Training "
            "continues.",
            self.logdir,
            self._died,
            self._dropped,
        )

    def _discard_queue(self) -> int:
        """Count what waits in the queue as dropped and release its barriers; the
        points counted."""
        lost = 0
        while self._queue:
            kind, _, _, payload = self._queue.popleft()
            if kind == _BARRIER:
                payload.set()
            else:
                lost += len(payload) if kind in (_SCALARS, _VALUES) else 1
        self._dropped += lost
        self._room.set()  # a caller waiting for room must not wait for a dead worker
        return lost

    def _drain(self) -> None:
        queue = self._queue
        pending: list[bytes] = []
        pending_bytes = 0
        points = 0
        try:
            while queue:
                for _ in range(_CHUNK):
                    if not queue:
                        break
                    kind, wall, step, payload = queue.popleft()
                    if kind == _BARRIER:
                        self._commit(pending, points)
                        pending, pending_bytes, points = [], 0, 0
                        payload.set()
                        continue
                    try:
                        if kind == _SCALARS and len(payload) == 1:  # the per-point fast path
                            tag, value = payload[0]
                            record = frame(encode_scalar(wall, step, tag, value))
                            points += 1
                        else:
                            record = frame(self._encode(kind, wall, step, payload))
                            points += len(payload) if kind in (_SCALARS, _VALUES) else 1
                    except Exception as exc:  # a bad item must not stop the others
                        self._on_bad_item(kind, step, payload, exc)
                        continue
                    except BaseException:  # it ends the worker (see _run): lost too
                        points += len(payload) if kind in (_SCALARS, _VALUES) else 1
                        raise
                    pending.append(record)
                    pending_bytes += len(record)
                if pending_bytes >= _WRITE_BATCH_BYTES:
                    self._commit(pending, points)
                    pending, pending_bytes, points = [], 0, 0
                if self._blocked and len(queue) < self._room_at:
                    self._blocked = False
                    self._room.set()
                time.sleep(0)  # let the training thread run between chunks
            self._commit(pending, points)
        except BaseException:
            self._dropped += points  # taken from the queue, never written
            raise
        self._stalled = False  # caught up: callers may wait for room again
        if self._blocked:
            self._blocked = False
            self._room.set()

    def _on_bad_item(self, kind: int, step: int, payload: Any, exc: Exception) -> None:
        self._errors += 1
        self._dropped += len(payload) if kind in (_SCALARS, _VALUES) else 1
        self._warn(
            f"encode {type(exc).__name__}",
            "mindwatch: could not encode an event at step %s, so it is dropped: %r "
            "(further such errors are counted, not shown)",
            step,
            exc,
        )

    @staticmethod
    def _encode(kind: int, wall: float, step: int, payload: Any) -> bytes:
        if kind == _SCALARS:
            return encode_scalars(wall, step, payload)
        if kind == _VALUES:
            return encode_summary_values(wall, step, payload)
        if kind == _BUILD:
            return encode_summary_values(wall, step, payload())
        if kind == _EVENT:
            return bytes(payload)
        raise ValueError(f"unknown queue item kind {kind}")

    def _commit(self, records: list[bytes], points: int) -> None:
        """Write ``records`` and hand them to the OS; on failure count them as dropped."""
        if not records:
            return
        vanished = self._vanished_file()
        if vanished is not None:
            self._start_again(vanished)
        try:
            self._write_records(records)
        except OSError as exc:
            self._on_write_error(exc, points)
            return
        self._records += len(records)
        if self._failing is not None:
            log.info("mindwatch: writing to %s works again", self._files[-1])
            self._failing = None

    def _vanished_file(self) -> Optional[str]:
        """What happened to the open file if it is no longer the one at its path (the
        run folder deleted or moved, the file deleted or replaced), else None."""
        handle = self._file
        if handle is None:
            # After a write error: a folder deleted meanwhile would fail every reopening.
            return None if self.logdir.is_dir() else "folder"
        try:
            held = os.fstat(handle.fileno())
            there = os.stat(self._files[-1])
        except FileNotFoundError:
            there = None
        except OSError:
            return None  # cannot tell (a hung mount): the write itself will say
        if there is not None and (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino):
            return None  # still the file at its path (an unlinked one has no path)
        # Gone or replaced. The folder too? (Another writer, run.json's, may have made
        # it again meanwhile: a new inode says so.)
        try:
            folder = os.stat(self.logdir)
        except OSError:
            return "folder"
        return "file" if (folder.st_dev, folder.st_ino) == self._folder_id else "folder"

    def _start_again(self, what: str) -> None:
        """The open file vanished: warn once, count it, and make the next write begin a
        new file in the run folder (created again if it is gone)."""
        self._vanished += 1
        handle, self._file = self._file, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()
            lost = self._files.pop()  # no longer in this run's folder
            if self._sizes is not None:
                self._sizes.pop(lost, None)
        else:
            lost = str(self.logdir)
        with contextlib.suppress(OSError):  # if this fails, opening the file will say why
            self.logdir.mkdir(parents=True, exist_ok=True)
        happened = (
            f"the run folder {self.logdir} was deleted or moved"
            if what == "folder"
            else f"the event file {lost} was deleted or replaced"
        )
        self._warn(
            "vanished",
            "mindwatch: %s while training wrote to it; the points from now on go to a new "
            "event file in %s (created again), and those written before stay in the old "
            "file, wherever it went (counted as event_files_vanished in run.json)",
            happened,
            self.logdir,
        )

    def _on_write_error(self, exc: OSError, points: int) -> None:
        self._errors += 1
        self._dropped += points
        where = self._files[-1] if self._file is not None and self._files else str(self.logdir)
        message = f"{exc.strerror or exc} (errno {exc.errno})"
        self._failing = message
        # One warning per kind of failure: a disk that stays full must not flood the
        # training log. Later failures are counted and summed up at close().
        first = self._warn(
            f"write {message}",
            "mindwatch: writing events to %s failed: %s. Training continues; "
            "these points are dropped and the next ones go to a new file.",
            where,
            message,
        )
        if not first:
            log.debug("mindwatch: writing events to %s failed again: %s", where, message)
        # Abandon the damaged file: its torn tail reads like a file still being written.
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _write_records(self, records: Iterable[bytes]) -> None:
        """Write ``records`` (rotating as needed) and hand them to the OS."""
        handle = self._current()  # first: reopening after an error resets the size
        batch: list[bytes] = []
        size = self._file_bytes
        limit = self.max_file_size
        for record in records:
            if limit is not None and size >= limit and size > self._header_bytes:
                handle.write(b"".join(batch))
                batch = []
                self._note_size(size)
                self._rotate()
                handle = self._current()
                size = self._file_bytes
            batch.append(record)
            size += len(record)
        handle.write(b"".join(batch))
        handle.flush()
        self._file_bytes = size
        self._note_size(size)

    def _note_size(self, size: int) -> None:
        """The bytes the current file holds (a finished file must hold at least these)."""
        if self._sizes is None:
            self._sizes = {}
        self._sizes[self._files[-1]] = size

    def _current(self) -> BinaryIO:
        if self._file is None:
            self._open_file()
        assert self._file is not None
        return self._file

    def _next_stamp(self) -> int:
        """The time stamp for a new file name: now, or later than any file already in the
        folder, because readers take a run's files in name order and a resumed attempt's
        files must come after the crashed one's (its purge marker relies on that)."""
        stamp = max(int(time.time()), self._last_stamp)  # same stamp: the counter orders
        if not self._files:  # only the first file of this writer can meet older ones
            for existing in os.listdir(self.logdir):
                if existing.startswith(EVENT_FILE_PREFIX):
                    field = existing.split(".")[3]
                    if field.isdigit():
                        stamp = max(stamp, int(field) + 1)
        self._last_stamp = stamp
        return stamp

    def _open_file(self) -> None:
        counter = next(_file_counter)
        name = (
            f"{EVENT_FILE_PREFIX}{self._next_stamp():010d}.{socket.gethostname()}."
            f"{os.getpid()}.{counter:05d}{self._suffix}"
        )
        path = self.logdir / name
        handle = open(path, "ab")  # noqa: SIM115 - owned by the writer until close()
        try:
            header = frame(encode_file_version(time.time()))
            handle.write(header)
            handle.flush()
        except OSError:
            # Don't leave an empty file behind for every retry while the disk is full.
            with contextlib.suppress(OSError):
                handle.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        self._file = handle
        self._file_bytes = self._header_bytes = len(header)
        self._files.append(str(path))
        self._note_size(len(header))
        folder = os.stat(self.logdir)
        self._folder_id = (folder.st_dev, folder.st_ino)

    def _rotate(self) -> None:
        self._close_file()
        self._open_file()

    def _close_file(self) -> None:
        handle, self._file = self._file, None
        if handle is None:
            return
        try:
            handle.flush()
            os.fsync(handle.fileno())
        except OSError as exc:
            self._on_write_error(exc, 0)
        finally:
            with contextlib.suppress(OSError):
                handle.close()

    def _finish(self) -> None:
        self._drain()  # anything a caller appended while close() was starting
        self._close_file()
        # Release anyone still waiting on a barrier queued after close(), and count
        # what arrived too late to be written.
        while self._queue:
            kind, _, _, payload = self._queue.popleft()
            if kind == _BARRIER:
                payload.set()
            else:
                self._dropped += len(payload) if kind in (_SCALARS, _VALUES) else 1
