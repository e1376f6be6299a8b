"""The run folder's event files: where a writer's records go on disk.

:class:`EventFile` is the file a writer writes now, and what happens to it as a run
goes on; the records themselves go through a
:class:`~mindwatch.events.records.RecordWriter`. It raises ``OSError`` when a write
fails and leaves what to do about it to its caller
(:class:`~mindwatch.events.worker.EventWorker` counts and warns).

* **Names that sort in writing order.** TensorBoard reads a run's files in name order:
  ``events.out.tfevents.<stamp>.<host>.<pid>.<counter><suffix>``, the stamp never
  earlier than a file already in the folder (a resumed attempt's files come after the
  crashed one's, which its purge marker relies on), the counter zero-padded.
* **Rotation.** A new file is begun once the current one holds ``max_file_size`` bytes.
* **A vanished file is noticed.** Before each write, ``fstat`` of the open file against
  ``stat`` of its path (two system calls per batch, on the writer's thread) says whether
  it is still the one in the folder. If the run folder was deleted or moved, or the file
  deleted or replaced, it warns once, creates the folder again and goes on in a new file
  there; the old file leaves :attr:`EventFile.files`.
* **Closed safely.** :meth:`EventFile.close` flushes and ``fsync``\\ s; a file a write
  failed in is abandoned (:meth:`EventFile.abandon`: its torn tail reads like a file
  still being written) and the next write begins a new one.

The folder itself is made absolute and created by :func:`prepare_logdir`, which raises
:class:`LogDirError` naming it and the fix.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional, Union

from mindwatch.common.logdirs import local_path
from mindwatch.common.warn import WarnOnce
from mindwatch.events.encoding import encode_file_version
from mindwatch.events.records import RecordWriter
from mindwatch.run.layout import EVENT_FILE_PREFIX

__all__ = ["EventFile", "LogDirError", "PathLike", "absolute_logdir", "prepare_logdir"]

log = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

_file_counter = itertools.count()  # per process: two writers never make the same name


class LogDirError(OSError):
    """The log folder cannot be created or written. The message names it and the fix."""


def absolute_logdir(path: Any) -> Path:
    """``path`` made absolute (``~`` expanded, bytes decoded as the OS does, a
    ``file://`` URL read as its path), or a LogDirError saying what is wrong with it:
    not a path at all, empty (which would silently mean the working folder), holding a
    NUL character (which no file system takes), or a URL of a remote store (``s3://``,
    ``gs://``, ``hdfs://``...: :func:`mindwatch.common.logdirs.local_path`)."""
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
    try:
        text = local_path(text)  # file:// is a path; s3://... would be a folder 's3:'
    except ValueError as exc:
        raise LogDirError(str(exc)) from None
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


class EventFile:
    """The event file a run folder is written to now, begun again as needed.

    Args:
        logdir: the run folder (absolute; see :func:`prepare_logdir`).
        max_file_size: begin a new file once the current one holds this many bytes
            (``None``: never).
        suffix: appended to every file name.
        failed: told of an error the file survives (the ``fsync`` of a file rotated
            away failed: the records go on in the new one).
    """

    def __init__(
        self,
        logdir: Path,
        *,
        max_file_size: Optional[int],
        suffix: str,
        failed: Callable[[OSError], None],
    ) -> None:
        self.logdir = logdir
        self.max_file_size = max_file_size
        self._suffix = suffix
        self._failed = failed
        self.files: list[str] = []  # this run folder's files, in writing order
        self.files_vanished = 0
        self._sizes: dict[str, int] = {}  # the bytes each file holds at least
        self._out: Optional[RecordWriter] = None  # None after a write error, until reopened
        self._header_bytes = 0
        self._last_stamp = 0
        self._folder_id: Optional[tuple[int, int]] = None  # the run folder's (device, inode)
        self._warn = WarnOnce(log)

    def sizes(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """:attr:`files` and the bytes written to each (which a finished file holds at
        least), read together (the writer's thread may be adding one)."""
        files = tuple(self.files)
        return files, tuple(self._sizes.get(name, 0) for name in files)

    @property
    def where(self) -> str:
        """The open file, or the folder when none is open (what a warning names)."""
        return self.files[-1] if self._out is not None and self.files else str(self.logdir)

    def write(self, records: Sequence[bytes]) -> None:
        """Write ``records`` (framed; rotating as needed) and hand them to the OS."""
        vanished = self._vanished()
        if vanished is not None:
            self._begin_again(vanished)
        out = self._current()  # first: reopening after an error resets the size
        limit = self.max_file_size
        start = 0
        if limit is not None:
            size = out.size
            for i, record in enumerate(records):
                if size >= limit and size > self._header_bytes:
                    out.write_framed(records[start:i])
                    self._sizes[self.files[-1]] = out.size
                    self._rotate()
                    out = self._current()
                    size, start = out.size, i
                size += len(record)
        out.write_framed(records[start:] if start else records)
        out.flush()
        self._sizes[self.files[-1]] = out.size

    def open(self) -> None:
        """Begin a new file, its first record naming the format (OSError if it can't)."""
        counter = next(_file_counter)
        name = (
            f"{EVENT_FILE_PREFIX}{self._next_stamp():010d}.{socket.gethostname()}."
            f"{os.getpid()}.{counter:05d}{self._suffix}"
        )
        path = self.logdir / name
        handle = open(path, "ab")  # noqa: SIM115 - owned by the RecordWriter until close()
        out = RecordWriter(handle)
        try:
            out.write(encode_file_version(time.time()))
            out.flush()
        except OSError:
            # Don't leave an empty file behind for every retry while the disk is full.
            with contextlib.suppress(OSError):
                handle.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        self._out = out
        self._header_bytes = out.size
        self.files.append(str(path))
        self._sizes[str(path)] = out.size
        folder = os.stat(self.logdir)
        self._folder_id = (folder.st_dev, folder.st_ino)

    def abandon(self) -> None:
        """Close the file a write failed in, as it is; the next write begins a new one."""
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(OSError):
                out.close()

    def close(self) -> None:
        """Flush, ``fsync`` and close the file (closed even when that raises OSError)."""
        out, self._out = self._out, None
        if out is None:
            return
        try:
            out.flush()
            os.fsync(out.fileno())
        finally:
            with contextlib.suppress(OSError):
                out.close()

    def _current(self) -> RecordWriter:
        if self._out is None:
            self.open()
        assert self._out is not None
        return self._out

    def _rotate(self) -> None:
        try:
            self.close()
        except OSError as exc:  # the records go on in the next file
            self._failed(exc)
        self.open()

    def _next_stamp(self) -> int:
        """The time stamp for a new file name: now, or later than any file already in the
        folder, because readers take a run's files in name order and a resumed attempt's
        files must come after the crashed one's (its purge marker relies on that)."""
        stamp = max(int(time.time()), self._last_stamp)  # same stamp: the counter orders
        if not self.files:  # only the first file of this writer can meet older ones
            for existing in os.listdir(self.logdir):
                if existing.startswith(EVENT_FILE_PREFIX):
                    field = existing.split(".")[3]
                    if field.isdigit():
                        stamp = max(stamp, int(field) + 1)
        self._last_stamp = stamp
        return stamp

    def _vanished(self) -> Optional[str]:
        """What happened to the open file if it is no longer the one at its path (the
        run folder deleted or moved, the file deleted or replaced), else None."""
        out = self._out
        if out is None:
            # After a write error: a folder deleted meanwhile would fail every reopening.
            return None if self.logdir.is_dir() else "folder"
        try:
            held = os.fstat(out.fileno())
            there = os.stat(self.files[-1])
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

    def _begin_again(self, what: str) -> None:
        """The open file vanished: warn once, count it, and make the next write begin a
        new file in the run folder (created again if it is gone)."""
        self.files_vanished += 1
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(OSError):
                out.close()
            lost = self.files.pop()  # no longer in this run's folder
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
