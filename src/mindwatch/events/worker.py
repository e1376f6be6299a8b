"""``EventWorker``: what an event writer's thread does with each queued entry.

The caller's thread queues plain tuples, ``(kind, wall_time, step, payload)``, which
hold only numbers, strings, bytes and tuples (docs/dev/architecture.md, "The hot path":
the garbage collector stops tracking them); their kinds are below. On the writer's
thread (a :class:`~mindwatch.common.handoff.Handoff` worker) this class encodes and
frames each one, keeps the records in a batch, and writes the batch to the
:class:`~mindwatch.events.event_file.EventFile` at a barrier, when the queue runs dry,
or once it holds a megabyte: one ``write`` call per batch, not one per record.

Failures degrade, never crash: an entry that cannot be encoded is one warning per kind
of error, and its points are counted; a write error (disk full, file too large, a
vanished network mount) is one warning per kind of failure naming the file and the
reason, the batch's points are counted as dropped, the damaged file is abandoned and
the next batch begins a new one; a later recovery is logged too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from mindwatch.common.warn import WarnOnce
from mindwatch.events.encoding import encode_scalar, encode_scalars, encode_summary_values
from mindwatch.events.event_file import EventFile
from mindwatch.events.records import frame

__all__ = ["BUILD", "EVENT", "MARKER", "SCALARS", "VALUES", "Entry", "EventWorker", "points"]

log = logging.getLogger(__name__)

# The kinds of queued entries, and their payloads: (tag, value) pairs, serialized
# Summary.Value entries, a function returning those (called here), a serialized Event
# (a graph), or a serialized Event that holds no points (a purge marker).
SCALARS, VALUES, BUILD, EVENT, MARKER = range(5)
Entry = tuple[int, float, int, Any]

_WRITE_BATCH_BYTES = 1 << 20


def points(entry: Entry) -> int:
    """The points an entry holds (what dropping it counts)."""
    kind = entry[0]
    if kind in (SCALARS, VALUES):
        return len(entry[3])
    return 0 if kind == MARKER else 1


def _encode(kind: int, wall: float, step: int, payload: Any) -> bytes:
    if kind == SCALARS:
        return encode_scalars(wall, step, payload)
    if kind == VALUES:
        return encode_summary_values(wall, step, payload)
    if kind == BUILD:
        return encode_summary_values(wall, step, payload())
    if kind in (EVENT, MARKER):
        return bytes(payload)
    raise ValueError(f"unknown queue item kind {kind}")


class EventWorker:
    """Encode queued entries and write them in batches to the run folder's event file.

    Its methods :meth:`process`, :meth:`commit`, :meth:`stop` and :meth:`died` are the
    hand-off's hooks; the counters are read (from any thread) for
    :class:`~mindwatch.events.writer.WriterStats`.
    """

    def __init__(self, logdir: Path, *, max_file_size: Optional[int], suffix: str) -> None:
        self.events = EventFile(
            logdir,
            max_file_size=max_file_size,
            suffix=suffix,
            failed=lambda exc: self._on_write_error(exc, 0),
        )
        self.records_written = 0
        self.lost = 0  # points lost here: not encoded, or a write failed
        self.errors = 0
        self._batch: list[bytes] = []
        self._batch_points = 0
        self._batch_bytes = 0
        self._failing: Optional[str] = None  # the last write error, until one works
        self._warn = WarnOnce(log)  # once per kind of trouble, not once per entry

    def process(self, entry: Entry) -> None:
        """Encode and frame one entry into the batch (written once it is large)."""
        kind, wall, step, payload = entry
        try:
            if kind == SCALARS and len(payload) == 1:  # the per-point fast path
                tag, value = payload[0]
                record = frame(encode_scalar(wall, step, tag, value))
                held = 1
            else:
                record = frame(_encode(kind, wall, step, payload))
                held = points(entry)
        except Exception as exc:  # a bad entry must not stop the others
            self._on_bad_entry(entry, exc)
            return
        self._batch.append(record)
        self._batch_points += held
        self._batch_bytes += len(record)
        if self._batch_bytes >= _WRITE_BATCH_BYTES:
            self.commit()

    def commit(self) -> None:
        """Write the batch and hand it to the OS."""
        records, held = self._batch, self._batch_points
        if records:
            self._batch, self._batch_points, self._batch_bytes = [], 0, 0
            self._commit(records, held)

    def stop(self, timeout: Optional[float] = None) -> None:
        """The last work: ``fsync`` and close the file (everything is written)."""
        self._close_file()

    def died(self) -> None:
        """The thread ends on an error nothing else caught: count it, and the batch's
        points (never written), and close the file as it is."""
        self.errors += 1
        self.lost += self._batch_points
        self._batch, self._batch_points, self._batch_bytes = [], 0, 0
        with contextlib.suppress(Exception):
            self._close_file()

    def _commit(self, records: Sequence[bytes], held: int) -> None:
        """Write ``records`` (holding ``held`` points); on failure count them as dropped."""
        try:
            self.events.write(records)
        except OSError as exc:
            self._on_write_error(exc, held)
            return
        self.records_written += len(records)
        if self._failing is not None:
            log.info("mindwatch: writing to %s works again", self.events.files[-1])
            self._failing = None

    def _close_file(self) -> None:
        try:
            self.events.close()
        except OSError as exc:
            self._on_write_error(exc, 0)

    def _on_bad_entry(self, entry: Entry, exc: Exception) -> None:
        self.errors += 1
        self.lost += points(entry)
        self._warn(
            f"encode {type(exc).__name__}",
            "mindwatch: could not encode an event at step %s, so it is dropped: %r "
            "(further such errors are counted, not shown)",
            entry[2],
            exc,
        )

    def _on_write_error(self, exc: OSError, held: int) -> None:
        self.errors += 1
        self.lost += held
        where = self.events.where
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
        self.events.abandon()
