"""Reading event files back: records -> events -> items, losslessly and incrementally.

A stack of small iterators, as in TensorBoard's own loader, minus its sampling:

* :class:`RecordReader` - the TFRecord framing of one file, every CRC checked. A last
  record that is not complete yet (the file is still being written) ends the read
  without error, and the next read starts there. A damaged record is skipped with a
  warning naming the file and the offset; a damaged length makes the reader search for
  the next valid record header. A length is never trusted for allocation: records are
  sliced out of a memory map of the file, so a length of 2**60 costs nothing.
  :meth:`RecordReader.read_spans` does the same for a whole file at once, framing and
  CRC-checking many records together with numpy (:mod:`mindwatch.events.spans`).
* :class:`RunReader` - every event file of one run folder in name order (as
  TensorBoard reads them), decoded into plain items: :class:`Scalar`,
  :class:`Histogram`, :class:`Text`, :class:`HParams`, and :class:`Purge` for
  TensorBoard's ``SessionLog.START`` restart marker, which voids every earlier point
  at or after its step (a resumed run). Calling :meth:`RunReader.read` again returns
  only what was appended or added since.

Scalars are recognised as ``simple_value`` (TensorBoard's v1 format, torch's,
tensorboardX's and mindwatch's writers) and as rank-0 tensors of the ``scalars``
plugin (TensorBoard's v2 ``tf.summary.scalar``).
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from mindwatch.common.invocation import command_line
from mindwatch.events.crc import CRC32C_TABLE, crc32c
from mindwatch.events.spans import Spans, check_crcs, frame
from mindwatch.events.steporder import is_step_axis, steps_out_of_order

__all__ = [
    "HParams",
    "Histogram",
    "Item",
    "Purge",
    "RecordReader",
    "RunReader",
    "Scalar",
    "Text",
    "event_files",
    "find_runs",
    "without_purged",
]

log = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

HEADER = 12  # uint64 length + uint32 masked crc of it
FOOTER = 4  # uint32 masked crc of the data
# A longer record is taken as a damaged length (TensorBoard's own limit is 2 GiB - 1 per
# protobuf; mindwatch rotates files at max_file_size).
DEFAULT_MAX_RECORD_BYTES = 1 << 30
_MASK_DELTA = 0xA282EAD8
_unpack_q = struct.Struct("<Q").unpack_from
_unpack_i = struct.Struct("<I").unpack_from
_WARNINGS_PER_FILE = 5
# Twelve zero bytes are never a record header: length 0 has the masked CRC 0x07980329,
# not 0 (tests/events/test_reader_resync.py checks it). A zero-filled region (what power
# loss leaves at a file's end) is therefore skipped in one scan, this many bytes a step.
_ZERO_HEADER = bytes(HEADER)
_ZERO_SCAN = 1 << 16
# Where damage holds small integers (an int64 array, a copied checkpoint), nearly every
# eighth byte starts a plausible length and the one-candidate-at-a-time search would
# cost ~3 us a candidate (0.4 s per MB). After this many candidates in a row fail, the
# search checks the headers of a whole chunk at once with numpy (:func:`_header_hits`)
# and returns to the one-at-a-time search after a chunk where candidates were sparse.
_DENSE_AFTER = 64
_DENSE_CHUNK = 1 << 20
_SPARSE = _DENSE_CHUNK // 256


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _zero_high_bytes(limit: int) -> int:
    """How many of a length's top bytes must be zero for it to be at most ``limit``
    (4 for the default 1 GiB): a header candidate lacking them is no record, so the
    search for one can jump from one run of that many zero bytes to the next."""
    return max(0, 8 - (limit.bit_length() + 7) // 8)


def _slicing_tables() -> npt.NDArray[np.uint32]:
    """CRC32C's "slicing-by-8" tables: row ``j`` is the CRC contribution of a byte
    followed by ``j`` zero bytes, so the CRC of 8 bytes is the XOR of 8 independent
    lookups (and a zero byte contributes nothing: every row maps 0 to 0)."""
    rows = [np.array(CRC32C_TABLE, dtype=np.uint32)]
    for _ in range(7):
        prev = rows[-1]
        rows.append((prev >> np.uint32(8)) ^ rows[0][prev & np.uint32(0xFF)])
    return np.stack(rows)


_SLICES = _slicing_tables()


def _header_hits(chunk: bytes, high: int, limit: int) -> tuple[npt.NDArray[np.int64], int]:
    """The offsets in ``chunk`` whose 12 bytes are a valid record header (a length of at
    most ``limit`` and the masked CRC32C of it), and how many offsets had the ``high``
    zero top bytes that made them candidates. Every offset that leaves a whole header in
    ``chunk`` is judged, all at once: the CRC of a candidate's length is the XOR of one
    table lookup per non-zero byte (:func:`_slicing_tables`)."""
    buf = np.frombuffer(chunk, dtype=np.uint8)
    n = len(buf) - HEADER + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64), 0
    plausible = np.ones(n, dtype=bool)
    for k in range(8 - high, 8):
        plausible &= buf[k : k + n] == 0
    at = np.flatnonzero(plausible)
    header = np.lib.stride_tricks.sliding_window_view(buf, HEADER)[at]  # one row each
    crc = np.zeros(len(at), dtype=np.uint32)
    for k in range(8 - high):  # the length's bytes that may be non-zero
        # The CRC's initial value 0xFFFFFFFF is XORed into the first four bytes.
        byte = header[:, k]
        crc ^= np.take(_SLICES[7 - k], byte ^ 0xFF if k < 4 else byte)
    for k in range(8 - high, 4):  # a zero byte among the first four still meets 0xFF
        crc ^= _SLICES[7 - k][0xFF]
    crc ^= np.uint32(0xFFFFFFFF)
    masked = ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)
    stored = np.ascontiguousarray(header[:, 8:]).view("<u4")[:, 0]
    hit = np.flatnonzero(masked == stored)  # few: a chance match is 1 in 2**32
    length = np.ascontiguousarray(header[hit, :8]).view("<u8")[:, 0]
    hit = hit[length <= limit]
    return at[hit].astype(np.int64), len(at)


@dataclass
class RecordStats:
    """What one :class:`RecordReader` has seen so far.

    ``corrupt`` counts damaged regions (contiguous damage is one region, however many
    records it spans); ``corrupt_regions`` holds each one's ``(offset, length)``, and
    ``records_before_damage`` the number of records read before the first one (what
    TensorBoard's own reader shows of the file: it stops at the first damage).
    """

    records: int = 0
    corrupt: int = 0
    skipped_bytes: int = 0
    corrupt_offsets: list[int] = field(default_factory=list)
    corrupt_regions: list[tuple[int, int]] = field(default_factory=list)
    records_before_damage: Optional[int] = None


class RecordReader:
    """The CRC-checked records of one TFRecord file, from ``offset`` on.

    Damage costs about what reading as many bytes of good records costs: the search for
    the next record header skips runs of zero bytes in bulk and only looks at places
    where a plausible length could start (:func:`_zero_high_bytes`), so a zero-filled,
    0xFF-filled or random tail is passed at memory speed, with a CRC computed only where
    a header could really be; where such places are dense (small integers), a megabyte
    of them is judged at once (:func:`_header_hits`). A header found after damage counts
    only when its record's data CRC matches too (or the record is still incomplete: being
    written), so a chance match inside garbage cannot make the reader jump over good
    records.

    Each damaged region is one warning naming the file, the offset and its length (at
    most five per file; the rest are counted in :attr:`stats`).

    Args:
        path: the file.
        offset: where to start (a previous reader's :attr:`offset`).
        max_record_bytes: longer lengths are treated as damage.
        warn: warn about damage (off for callers that report it themselves).
    """

    def __init__(
        self,
        path: PathLike,
        offset: int = 0,
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        warn: bool = True,
    ) -> None:
        self.path = Path(path)
        self.offset = offset
        self.max_record_bytes = max_record_bytes
        self.warn = warn
        self.stats = RecordStats()
        self._pending: Optional[list[Any]] = None  # the damaged region being passed

    def read(self) -> Iterator[bytes]:
        """Yield every complete record after :attr:`offset` and advance it past them."""
        try:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size <= self.offset:
                    return
                with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    yield from self._records(data, len(data))
        except FileNotFoundError:
            return  # rotated away or deleted between listing and reading
        finally:
            self._report_damage()

    def read_spans(self) -> Spans:
        """Every complete record after :attr:`offset`, all at once, as :meth:`read`
        returns them one at a time (same checks, same warnings, same :attr:`stats`), but
        framed and CRC-checked many records together (:mod:`mindwatch.events.spans`):
        for reading a file whole. The bytes of the records are copied out of the file's
        memory map in one piece per undamaged stretch (damage is not copied)."""
        try:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size <= self.offset:
                    return Spans.empty()
                with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    return self._spans(data)
        except FileNotFoundError:
            return Spans.empty()  # rotated away or deleted between listing and reading
        finally:
            self._report_damage()

    def _spans(self, data: mmap.mmap) -> Spans:
        chunks: list[bytes] = []
        starts: list[npt.NDArray[np.int64]] = []
        lengths: list[npt.NDArray[np.int64]] = []
        at: list[npt.NDArray[np.int64]] = []
        copied = 0  # bytes in chunks so far
        pos, end = self.offset, len(data)
        while True:
            found = frame(data, pos, end, self.max_record_bytes)
            if len(found.starts):
                first = int(found.starts[0])
                chunk = data[first : found.stop]
                ok = check_crcs(chunk, found.starts - first, found.lengths)
                self._count(found.starts, found.lengths, ok)
                chunks.append(chunk)
                starts.append(found.starts[ok] - first + copied + HEADER)
                lengths.append(found.lengths[ok])
                at.append(found.starts[ok])
                copied += len(chunk)
            pos = self.offset = found.stop
            if not found.damaged:
                break
            pos = self._resync(data, pos, end, "a damaged record header")
        if not chunks:
            return Spans.empty()
        offsets = np.concatenate(at)
        return Spans(
            chunks[0] if len(chunks) == 1 else b"".join(chunks),
            np.concatenate(starts),
            np.concatenate(lengths),
            offsets,
            np.zeros_like(offsets),
        )

    def _count(
        self, at: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], ok: npt.NDArray[np.bool_]
    ) -> None:
        """Account for framed records as :meth:`_records` does one at a time: good ones
        counted, each one failing its data CRC reported as damage, in file order."""
        stats = self.stats
        done = -1
        for i in np.flatnonzero(~ok).tolist():
            if i - done > 1:
                stats.records += i - done - 1
                if self._pending is not None:
                    self._report_damage()  # the damaged region ended before this one
            length = HEADER + int(lengths[i]) + FOOTER
            self._corrupt(int(at[i]), length, "a record whose data fails its CRC")
            done = i
        if len(ok) - done > 1:
            stats.records += len(ok) - done - 1
            if self._pending is not None:
                self._report_damage()

    def _records(self, data: mmap.mmap, end: int) -> Iterator[bytes]:
        pos = self.offset
        limit = self.max_record_bytes
        while end - pos >= HEADER:
            (length,) = _unpack_q(data, pos)
            (length_crc,) = _unpack_i(data, pos + 8)
            if length > limit or _masked(crc32c(data[pos : pos + 8])) != length_crc:
                pos = self._resync(data, pos, end, "a damaged record header")
                continue
            stop = pos + HEADER + length
            if stop + FOOTER > end:
                break  # not written completely yet: the next read continues here
            payload = data[pos + HEADER : stop]
            (data_crc,) = _unpack_i(data, stop)
            if _masked(crc32c(payload)) != data_crc:
                self._corrupt(pos, stop + FOOTER - pos, "a record whose data fails its CRC")
                pos = stop + FOOTER
                self.offset = pos
                continue
            pos = stop + FOOTER
            self.offset = pos
            self.stats.records += 1
            if self._pending is not None:
                self._report_damage()  # the damaged region ended here
            yield payload

    def _resync(self, data: mmap.mmap, pos: int, end: int, what: str) -> int:
        """The offset of the next record after ``pos`` (or where to retry, near ``end``)."""
        found = self._next_record(data, pos + 1, end)
        # Nothing valid follows: the rest is damage, except its last HEADER - 1 bytes,
        # which may be the start of a record still being written (the next read retries).
        skip_to = found if found is not None else max(end - HEADER + 1, pos + 1)
        self._corrupt(pos, skip_to - pos, what)
        self.offset = skip_to
        return skip_to

    def _next_record(self, data: mmap.mmap, start: int, end: int) -> Optional[int]:
        """The first offset at or after ``start`` holding a valid record (both CRCs), or
        the valid header of one not complete yet; None if there is none."""
        limit = self.max_record_bytes
        high = _zero_high_bytes(limit)
        zeros = bytes(high)
        last = end - HEADER  # the last offset a whole header fits at
        candidate = start
        misses = 0
        while candidate <= last:
            if misses >= _DENSE_AFTER:
                found, candidate, dense = self._dense_chunk(data, candidate, end, high)
                if found is not None:
                    return found
                if not dense:  # back to one candidate at a time
                    misses = 0
                continue
            if high:
                # The next place whose length has its top bytes zero (C speed: no CRC,
                # no Python per byte); 0xFF or random garbage rarely has one.
                at = data.find(zeros, candidate + 8 - high, last + 8)
                if at < 0:
                    return None
                candidate = at - (8 - high)
            header = data[candidate : candidate + HEADER]
            if header == _ZERO_HEADER:
                # Inside a run of zeros: the next candidate is the first whose header
                # holds a byte of what follows the run.
                candidate = max(candidate + 1, self._after_zeros(data, candidate, end) - HEADER + 1)
                misses = 0
                continue
            (length,) = _unpack_q(header, 0)
            if (
                length <= limit
                and _masked(crc32c(header[:8])) == _unpack_i(header, 8)[0]
                and self._whole_or_growing(data, candidate, length, end)
            ):
                return candidate
            candidate += 1
            misses += 1
        return None

    @staticmethod
    def _whole_or_growing(data: mmap.mmap, at: int, length: int, end: int) -> bool:
        """Whether the valid header at ``at`` starts a record whose data CRC matches, or
        one not complete yet (still being written)."""
        stop = at + HEADER + length
        if stop + FOOTER > end:
            return True
        (stored,) = _unpack_i(data, stop)
        return bool(_masked(crc32c(data[at + HEADER : stop])) == stored)

    def _dense_chunk(
        self, data: mmap.mmap, start: int, end: int, high: int
    ) -> tuple[Optional[int], int, bool]:
        """Look for a record in the chunk from ``start`` with :func:`_header_hits`:
        (the record's offset or None, where to go on, whether candidates were dense
        there). A run of zeros is left to the bulk zero skip."""
        if data[start : start + HEADER] == _ZERO_HEADER:
            return None, start, False
        stop = min(start + _DENSE_CHUNK, end - HEADER + 1)  # offsets judged: [start, stop)
        chunk = data[start : stop + HEADER - 1]
        hits, plausible = _header_hits(chunk, high, self.max_record_bytes)
        for hit in hits.tolist():
            at = start + hit
            (length,) = _unpack_q(data, at)
            if self._whole_or_growing(data, at, length, end):
                return at, at, True
        return None, stop, plausible >= _SPARSE

    @staticmethod
    def _after_zeros(data: mmap.mmap, pos: int, end: int) -> int:
        """The offset of the first non-zero byte at or after ``pos`` (``end`` if none)."""
        while pos < end:
            chunk = data[pos : min(pos + _ZERO_SCAN, end)]
            rest = chunk.lstrip(b"\0")
            if rest:
                return pos + len(chunk) - len(rest)
            pos += len(chunk)
        return end

    def skip_record(self, what: str, at: Optional[int] = None) -> None:
        """Count the record just returned (or the one at offset ``at``) as damage (its
        CRCs pass, its contents do not parse): for the layers above, which decode it."""
        self._report_damage()
        self._corrupt(self.offset if at is None or at < 0 else at, 0, what)
        self._report_damage()

    def _corrupt(self, offset: int, length: int, what: str) -> None:
        stats = self.stats
        pending = self._pending
        if pending is not None and pending[0] + pending[1] == offset:
            # Damage right after damage (a record failing its CRC, then no header): one
            # region, one warning.
            pending[1] += length
            stats.skipped_bytes += length
            stats.corrupt_regions[-1] = (pending[0], pending[1])
            return
        self._report_damage()
        if stats.records_before_damage is None:
            stats.records_before_damage = stats.records
        stats.corrupt += 1
        stats.skipped_bytes += length
        stats.corrupt_offsets.append(offset)
        stats.corrupt_regions.append((offset, length))
        self._pending = [offset, length, what, stats.corrupt]

    def _report_damage(self) -> None:
        """Warn about the damaged region just passed (once its length is known)."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        offset, length, what, number = pending
        if self.warn and number <= _WARNINGS_PER_FILE:
            log.warning(
                "mindwatch: %s: %s at byte offset %d; skipped %d bytes and read on%s",
                self.path,
                what,
                offset,
                length,
                " (further damage in this file is counted, not shown)"
                if number == _WARNINGS_PER_FILE
                else "",
            )


# ---------------------------------------------------------------------- items


@dataclass(frozen=True)
class Scalar:
    tag: str
    step: int
    wall_time: float
    value: float


@dataclass(frozen=True)
class Histogram:
    tag: str
    step: int
    wall_time: float
    min: float
    max: float
    num: float
    sum: float
    sum_squares: float
    bucket_limit: tuple[float, ...]
    bucket: tuple[float, ...]


@dataclass(frozen=True)
class Text:
    tag: str
    step: int
    wall_time: float
    text: str


@dataclass(frozen=True)
class HParams:
    """A run's hyperparameters (the HPARAMS plugin's session start)."""

    step: int
    wall_time: float
    hparams: dict[str, Any]


@dataclass(frozen=True)
class Purge:
    """TensorBoard's restart marker: earlier items at ``step`` or later are void."""

    step: int
    wall_time: float


Item = Union[Scalar, Histogram, Text, HParams, Purge]
# tags, steps, wall times, values
Columns = tuple[
    npt.NDArray[np.object_], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]
]

# TensorFlow DataType enum values used by scalar and text tensors.
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_STRING, _DT_INT64, _DT_HALF = 1, 2, 3, 7, 9, 19
_DTYPES = {
    _DT_FLOAT: np.float32,
    _DT_DOUBLE: np.float64,
    _DT_INT32: np.int32,
    _DT_INT64: np.int64,
    _DT_HALF: np.float16,
}


def _tensor_scalar(tensor: Any) -> Optional[float]:
    """The single number in a TensorProto, or None if it holds something else."""
    dims = tensor.tensor_shape.dim
    if any(d.size != 1 for d in dims):
        return None
    dtype = _DTYPES.get(tensor.dtype)
    if dtype is None:
        return None
    if tensor.tensor_content:
        values = np.frombuffer(tensor.tensor_content, dtype=dtype)
        return float(values[0]) if values.size == 1 else None
    for repeated in (tensor.float_val, tensor.double_val, tensor.int_val, tensor.int64_val):
        if len(repeated) == 1:
            return float(repeated[0])
    if tensor.dtype == _DT_HALF and len(tensor.half_val) == 1:
        return float(np.array([tensor.half_val[0]], dtype=np.uint16).view(np.float16)[0])
    return None


def _hparams(content: bytes) -> Optional[dict[str, Any]]:
    from tensorboard.plugins.hparams import plugin_data_pb2

    data = plugin_data_pb2.HParamsPluginData.FromString(content)
    if not data.HasField("session_start_info"):
        return None
    out: dict[str, Any] = {}
    for name, value in data.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        out[name] = getattr(value, kind) if kind else None
    return out


class RunReader:
    """Every event file of one run folder, decoded into items, incrementally.

    ``read()`` returns the items of the files as TensorBoard orders them (file name,
    then position); a later ``read()`` returns only what was appended or added since.
    """

    def __init__(self, folder: PathLike, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES):
        self.folder = Path(folder)
        self.max_record_bytes = max_record_bytes
        self._readers: dict[str, RecordReader] = {}
        self._plugins: dict[str, str] = {}  # tag -> plugin name, from its first metadata
        self._order_warned = False

    @property
    def offsets(self) -> dict[str, int]:
        """File name -> bytes read so far (e.g. to save and resume a watcher's state)."""
        return {name: reader.offset for name, reader in self._readers.items()}

    def seek(self, offsets: dict[str, int], plugins: Optional[dict[str, str]] = None) -> None:
        """Continue from saved :attr:`offsets` (and :attr:`plugins`) instead of the start."""
        for name, offset in offsets.items():
            self._reader(name).offset = int(offset)
        if plugins:
            self._plugins.update(plugins)

    @property
    def plugins(self) -> dict[str, str]:
        return dict(self._plugins)

    @property
    def corrupt_records(self) -> int:
        return sum(r.stats.corrupt for r in self._readers.values())

    def _reader(self, name: str) -> RecordReader:
        reader = self._readers.get(name)
        if reader is None:
            path = self.folder / name
            reader = RecordReader(path, max_record_bytes=self.max_record_bytes)
            self._readers[name] = reader
        return reader

    def read(self) -> Iterator[Item]:
        """Yield the items not returned before."""
        from tensorboard.compat.proto.event_pb2 import Event

        parse = Event.FromString
        for name in event_files(self.folder):
            reader = self._reader(name)
            for payload in reader.read():
                try:
                    event = parse(payload)
                except Exception:  # a record with a valid CRC but not an Event
                    reader.skip_record("a record that is not an event")
                    continue
                yield from self._items(event)

    def scalar_columns(
        self,
    ) -> tuple[
        npt.NDArray[np.object_],
        npt.NDArray[np.int64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
    ]:
        """The new scalars as columns ``(tags, steps, wall_times, values)``, purges applied.

        The fast path of :func:`mindwatch.read_scalars`: runs of same-shaped scalar
        events are decoded many at a time (:mod:`mindwatch.events.fastscalars`), the
        rest with protobuf, and the points put back in reading order. A purge marker
        voids the points read before it in this call; points returned by an earlier
        call cannot be taken back, so incremental readers that must honour purges use
        :meth:`read`.
        """
        from tensorboard.compat.proto.event_pb2 import Event

        from mindwatch.events.fastscalars import decode_spans

        names = event_files(self.folder)
        readers = [self._reader(name) for name in names]
        spans = Spans.join([reader.read_spans() for reader in readers])
        fast = decode_spans(spans)
        tag_index = {tag: i for i, tag in enumerate(fast.tags)}
        records: list[int] = []
        positions: list[int] = []
        tag_ids: list[int] = []
        steps: list[int] = []
        walls: list[float] = []
        values: list[float] = []
        purges: list[tuple[int, int]] = []
        parse = Event.FromString
        plugins = self._plugins
        data = spans.data
        left = np.flatnonzero(~fast.handled)
        for i, start, length in zip(
            left.tolist(), spans.starts[left].tolist(), spans.lengths[left].tolist()
        ):
            try:
                event = parse(data[start : start + length])
            except Exception:
                reader = readers[int(spans.file[i])]
                reader.skip_record("a record that is not an event", int(spans.at[i]))
                continue
            what = event.WhichOneof("what")
            if what == "session_log" and event.session_log.status == 1:
                purges.append((i, event.step))
                continue
            if what != "summary":
                continue
            step, wall = event.step, event.wall_time
            for j, value in enumerate(event.summary.value):
                kind = value.WhichOneof("value")
                tag = value.tag
                if value.HasField("metadata") and tag not in plugins:
                    plugins[tag] = value.metadata.plugin_data.plugin_name
                if kind == "simple_value":
                    number: Optional[float] = value.simple_value
                elif kind == "tensor" and plugins.get(tag) == "scalars":
                    number = _tensor_scalar(value.tensor)
                else:
                    number = None
                if number is None:
                    continue
                records.append(i)
                positions.append(j)
                tag_ids.append(tag_index.setdefault(tag, len(tag_index)))
                steps.append(step)
                walls.append(wall)
                values.append(number)
        record = np.concatenate([fast.record, np.asarray(records, dtype=np.int64)])
        position = np.concatenate([fast.position, np.asarray(positions, dtype=np.int64)])
        tag_col = np.concatenate([fast.tag, np.asarray(tag_ids, dtype=np.int64)])
        step_col = np.concatenate([fast.step, np.asarray(steps, dtype=np.int64)])
        wall_col = np.concatenate([fast.wall, np.asarray(walls, dtype=np.float64)])
        value_col = np.concatenate([fast.value, np.asarray(values, dtype=np.float64)])
        order = _reading_order(record, position, len(spans))
        keep = np.ones(len(order), dtype=bool)
        record, step_col = record[order], step_col[order]
        for at, purge_step in purges:  # TensorBoard's restart marker voids earlier points
            keep &= ~((record < at) & (step_col >= purge_step))
        order = order[keep]
        table = np.empty(len(tag_index), dtype=object)
        for tag, i in tag_index.items():
            table[i] = tag
        if not self._order_warned:
            file_col = spans.file[record[keep]]
            self._warn_step_order(file_col, tag_col[order], step_col[keep], table, names)
        return (
            table[tag_col[order]] if len(table) else np.zeros(0, dtype=object),
            step_col[keep],
            wall_col[order],
            value_col[order],
        )

    def _warn_step_order(
        self,
        files: npt.NDArray[np.int64],
        tags: npt.NDArray[np.int64],
        steps: npt.NDArray[np.int64],
        table: npt.NDArray[np.object_],
        names: list[str],
    ) -> None:
        """Warn once if a tag's steps go back or repeat within one file (the points
        TensorBoard keeps: purges applied), naming the file, the tag and the steps."""
        if not len(steps):
            return
        axis = np.array([is_step_axis(str(tag)) for tag in table], dtype=bool)
        on_steps = axis[tags]
        groups = files[on_steps] * len(table) + tags[on_steps]
        found = steps_out_of_order(groups, steps[on_steps])
        if not found:
            return
        self._order_warned = True
        first = found[0]
        path = self.folder / names[first.group // len(table)]
        others = len(found) - 1
        log.warning(
            "mindwatch: %s: %s, with no restart marker: TensorBoard draws the curve folding "
            "back over itself and report/compare statistics mix both%s. A resumed run "
            "should write the restart marker (mindwatch: resume_step=N; torch: "
            "SummaryWriter(purge_step=N)), or each attempt its own folder; "
            "`%s` says more",
            path,
            first.describe(str(table[first.group % len(table)])),
            f" (and {others} more tag" + ("s" if others > 1 else "") + ")" if others else "",
            command_line("doctor", self.folder),
        )

    def _items(self, event: Any) -> Iterator[Item]:
        what = event.WhichOneof("what")
        if what == "summary":
            step, wall = event.step, event.wall_time
            plugins = self._plugins
            for value in event.summary.value:
                tag = value.tag
                if value.HasField("metadata") and tag not in plugins:
                    plugins[tag] = value.metadata.plugin_data.plugin_name
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    yield Scalar(tag, step, wall, value.simple_value)
                elif kind == "histo":
                    h = value.histo
                    yield Histogram(
                        tag,
                        step,
                        wall,
                        h.min,
                        h.max,
                        h.num,
                        h.sum,
                        h.sum_squares,
                        tuple(h.bucket_limit),
                        tuple(h.bucket),
                    )
                elif kind == "tensor":
                    yield from self._tensor_item(tag, step, wall, value)
        elif what == "session_log" and event.session_log.status == 1:  # SessionLog.START
            yield Purge(event.step, event.wall_time)

    def _tensor_item(self, tag: str, step: int, wall: float, value: Any) -> Iterator[Item]:
        plugin = self._plugins.get(tag, "")
        tensor = value.tensor
        if plugin == "scalars":
            number = _tensor_scalar(tensor)
            if number is not None:
                yield Scalar(tag, step, wall, number)
        elif plugin == "text" and tensor.dtype == _DT_STRING and tensor.string_val:
            yield Text(tag, step, wall, tensor.string_val[0].decode("utf-8", "replace"))
        elif plugin == "hparams" and value.HasField("metadata"):
            hparams = _hparams(value.metadata.plugin_data.content)
            if hparams is not None:
                yield HParams(step, wall, hparams)


def _reading_order(
    record: npt.NDArray[np.int64], position: npt.NDArray[np.int64], records: int
) -> npt.NDArray[np.int64]:
    """The permutation putting points in reading order: by record, then by their place in
    it. Each (record, place) is one point, so where the keys are dense (one or a few
    scalars an event) each point's slot is known without sorting."""
    width = int(position.max(initial=0)) + 1
    key = record * width + position
    if records * width <= 4 * len(key) + 1024:
        slot = np.full(records * width, -1, dtype=np.int64)
        slot[key] = np.arange(len(key), dtype=np.int64)
        return slot[slot >= 0]
    return np.argsort(key, kind="stable")


def without_purged(items: Iterable[Item]) -> list[Item]:
    """``items`` with every point a later :class:`Purge` voided taken out (and the purge
    markers themselves), as TensorBoard shows a run: for readers that read a run once."""
    kept: list[Item] = []
    for item in items:
        if isinstance(item, Purge):
            kept = [i for i in kept if isinstance(i, HParams) or i.step < item.step]
        else:
            kept.append(item)
    return kept


def event_files(folder: PathLike) -> list[str]:
    """Names of the event files directly in ``folder``, in TensorBoard's reading order."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if "tfevents" in n and os.path.isfile(Path(folder) / n))


def find_runs(logdir: PathLike) -> list[tuple[str, Path]]:
    """``(run name, folder)`` for every folder below ``logdir`` holding event files.

    Run names are paths relative to ``logdir`` with ``/``, ``"."`` for ``logdir``
    itself, as TensorBoard names them.
    """
    root = Path(logdir)
    runs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if any("tfevents" in name for name in filenames):
            relative = Path(dirpath).relative_to(root).as_posix()
            runs.append((relative or ".", Path(dirpath)))
    return runs
