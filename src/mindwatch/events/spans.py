"""Many TFRecords at once: framing and CRC checks with numpy, for reading a file whole.

:class:`~mindwatch.events.reader.RecordReader` reads a record at a time, which costs
about 1 us of Python a record before anything is decoded: on a file of one scalar per
event (torch's, tensorboardX's, MindFormers' writers) that is most of the time of a
read. Here the same checks are made on every record of a file together:

* **Framing** follows the lengths one record at a time only until they repeat (a
  training loop writes the same events again and again, so the lengths of its records
  are periodic: one length, or one per tag); then every further block of the period is
  checked at once, as strided numpy views of the buffer (each header must hold the
  expected length and its CRC), in chunks that grow while the pattern holds, so a
  pattern that breaks soon costs little. Where it breaks, one record at a time again.
* **Data CRCs** of records of one length are checked together: CRC32C is linear, so the
  CRC of a record is that of the group's first record XOR one table lookup per byte
  that differs from it (:func:`_position_tables`), and in such a group only the wall
  time, step and value bytes differ. Small groups and long records use the C CRC.

Nothing is trusted that the one-at-a-time reader would not trust: every header's CRC
and every record's data CRC is checked. Where a header fails, the reader's own search
for the next record takes over (:meth:`RecordReader._resync`), then the bulk framing
goes on from there.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import numpy.typing as npt

from mindwatch.events.crc import CRC32C_TABLE, crc32c, masked_crc32c

__all__ = ["FOOTER", "HEADER", "Spans", "by_length", "check_crcs", "frame"]

HEADER = 12  # uint64 length + uint32 masked crc of it
FOOTER = 4  # uint32 masked crc of the data
_MASK_DELTA = 0xA282EAD8

_WINDOW = 32  # records framed one at a time before looking for a period in their lengths
_MAX_PERIOD = 16  # records in one period (e.g. one event per tag, 16 tags)
_FIRST_CHUNK = 64  # blocks checked at once at first; four times as many each time after
_MIN_VECTOR = 16  # records of one length: fewer are CRC-checked one at a time
_MAX_VECTOR_LEN = 1024  # longer records are CRC-checked one at a time

_unpack_q = struct.Struct("<Q").unpack_from
_unpack_i = struct.Struct("<I").unpack_from
_length_crcs: dict[int, int] = {}

Ints = npt.NDArray[np.int64]
_Data = Union[bytes, mmap.mmap]  # a file's contents, read or memory-mapped


def _length_crc(length: int) -> int:
    """The masked CRC a header holds for ``length``."""
    crc = _length_crcs.get(length)
    if crc is None:
        crc = masked_crc32c(struct.pack("<Q", length))
        if len(_length_crcs) < 65536:
            _length_crcs[length] = crc
    return crc


@dataclass
class Spans:
    """Records as slices of one buffer: record ``i``'s data is
    ``data[starts[i] : starts[i] + lengths[i]]``; ``at[i]`` is where the record begins in
    its file (for messages naming an offset) and ``file[i]`` which file it is in, when
    spans of several files are joined (:meth:`join`)."""

    data: bytes
    starts: Ints
    lengths: Ints
    at: Ints
    file: Ints

    def __len__(self) -> int:
        return len(self.starts)

    def payload(self, i: int) -> bytes:
        start = int(self.starts[i])
        return self.data[start : start + int(self.lengths[i])]

    @classmethod
    def empty(cls) -> Spans:
        none = np.zeros(0, dtype=np.int64)
        return cls(b"", none, none, none, none)

    @classmethod
    def of(cls, payloads: list[bytes]) -> Spans:
        """Spans of records already read one at a time (their offsets unknown: -1)."""
        lengths = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=len(payloads))
        starts = np.zeros(len(payloads), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        unknown = np.full(len(payloads), -1, dtype=np.int64)
        return cls(b"".join(payloads), starts, lengths, unknown, np.zeros_like(starts))

    @classmethod
    def join(cls, parts: list[Spans]) -> Spans:
        """One :class:`Spans` of ``parts`` in order; ``file`` numbers them from 0."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.empty()
        shifts = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
        return cls(
            b"".join(p.data for p in parts),
            np.concatenate([p.starts + shift for p, shift in zip(parts, shifts)]),
            np.concatenate([p.lengths for p in parts]),
            np.concatenate([p.at for p in parts]),
            np.concatenate([np.full(len(p), k, dtype=np.int64) for k, p in enumerate(parts)]),
        )


@dataclass
class Framed:
    """What :func:`frame` found: the records (where each begins, its data length), where
    it stopped, and whether it stopped at a damaged header (else at the end: nothing
    more, or a record not complete yet)."""

    starts: Ints
    lengths: Ints
    stop: int
    damaged: bool


def frame(data: _Data, pos: int, end: int, limit: int) -> Framed:
    """The records of ``data[pos:end]`` whose headers are valid, up to the first one that
    is not (or the end); their data CRCs are not checked here (:func:`check_crcs`)."""
    starts_parts: list[Ints] = []
    length_parts: list[Ints] = []
    starts: list[int] = []
    lengths: list[int] = []
    look_at = _WINDOW
    damaged = False
    while end - pos >= HEADER:
        (length,) = _unpack_q(data, pos)
        if length > limit or _unpack_i(data, pos + 8)[0] != _length_crc(length):
            damaged = True
            break
        stop = pos + HEADER + length + FOOTER
        if stop > end:
            break  # not written completely yet
        starts.append(pos)
        lengths.append(length)
        pos = stop
        if len(lengths) >= look_at:
            run = _periodic_run(data, pos, end, lengths[-_WINDOW:])
            if run is None:
                look_at = len(lengths) + _WINDOW
                continue
            starts_parts.append(np.asarray(starts, dtype=np.int64))
            length_parts.append(np.asarray(lengths, dtype=np.int64))
            starts_parts.append(run[0])
            length_parts.append(run[1])
            pos = run[2]
            starts, lengths = [], []
            look_at = _WINDOW
    starts_parts.append(np.asarray(starts, dtype=np.int64))
    length_parts.append(np.asarray(lengths, dtype=np.int64))
    return Framed(np.concatenate(starts_parts), np.concatenate(length_parts), pos, damaged)


def _periodic_run(
    data: _Data, pos: int, end: int, recent: list[int]
) -> Optional[tuple[Ints, Ints, int]]:
    """If ``recent`` lengths repeat with a period, the records from ``pos`` on that
    continue it (starts, lengths, where they stop), every header checked; else None."""
    for period in range(1, min(_MAX_PERIOD, len(recent) // 2) + 1):
        if recent[:-period] == recent[period:]:
            break
    else:
        return None
    block = recent[-period:]
    sizes = [HEADER + length + FOOTER for length in block]
    size = sum(sizes)
    offsets = np.cumsum([0, *sizes[:-1]])
    total = (end - pos) // size  # whole blocks in the data
    done = 0
    chunk = _FIRST_CHUNK
    while done < total:
        n = min(chunk, total - done)
        good = np.ones(n, dtype=bool)
        for offset, length in zip(offsets.tolist(), block):
            at = pos + done * size + offset
            lengths: npt.NDArray[np.uint64] = np.ndarray(
                (n,), dtype="<u8", buffer=data, offset=at, strides=(size,)
            )
            crcs: npt.NDArray[np.uint32] = np.ndarray(
                (n,), dtype="<u4", buffer=data, offset=at + 8, strides=(size,)
            )
            good &= (lengths == length) & (crcs == _length_crc(length))
        if not good.all():
            done += int(np.argmin(good))
            break
        done += n
        chunk *= 4
    if not done:
        return None
    block_starts = pos + np.arange(done, dtype=np.int64)[:, None] * size + offsets[None, :]
    lengths_out = np.tile(np.asarray(block, dtype=np.int64), done)
    return block_starts.ravel().astype(np.int64), lengths_out, pos + done * size


_tables: list[npt.NDArray[np.uint32]] = [np.array(CRC32C_TABLE, dtype=np.uint32)]


def _position_tables(length: int) -> npt.NDArray[np.uint32]:
    """Row ``j``: the CRC32C (no initial value, no final XOR) of byte ``b`` at place ``j``
    of a ``length``-byte message of zeros otherwise, for every ``b``."""
    while len(_tables) < length:
        prev = _tables[-1]
        _tables.append((prev >> np.uint32(8)) ^ _tables[0][prev & np.uint32(0xFF)])
    return np.stack(_tables[length - 1 :: -1])


_table_cache: dict[int, npt.NDArray[np.uint32]] = {}


def _tables_for(length: int) -> npt.NDArray[np.uint32]:
    tables = _table_cache.get(length)
    if tables is None:
        tables = _position_tables(length)
        if len(_table_cache) < 64:
            _table_cache[length] = tables
    return tables


def by_length(lengths: Ints) -> list[tuple[int, Ints]]:
    """``(length, the indices of the records of that length, ascending)`` for each
    length in ``lengths``."""
    if not len(lengths):
        return []
    distinct = np.unique(lengths)
    if len(distinct) <= 32:  # the usual case: a mask per length beats a sort
        return [(int(v), np.flatnonzero(lengths == v)) for v in distinct]
    order = np.argsort(lengths, kind="stable")
    ordered = lengths[order]
    bounds = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    return [
        (int(ordered[a]), order[a:b])
        for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), len(lengths)])
    ]


def check_crcs(data: bytes, starts: Ints, lengths: Ints) -> npt.NDArray[np.bool_]:
    """Whether each record (beginning at ``starts``, its data ``lengths`` long) holds
    the masked CRC32C of its data."""
    n = len(starts)
    ok = np.ones(n, dtype=bool)
    if not n:
        return ok
    buf = np.frombuffer(data, dtype=np.uint8)
    view = memoryview(data)
    for length, members in by_length(lengths):
        if len(members) < _MIN_VECTOR or length > _MAX_VECTOR_LEN or length == 0:
            for i, start in zip(members.tolist(), starts[members].tolist()):
                data_start = start + HEADER
                crc = crc32c(view[data_start : data_start + length])
                masked = (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
                ok[i] = masked == _unpack_i(data, data_start + length)[0]
            continue
        windows = np.lib.stride_tricks.sliding_window_view(buf, length + FOOTER)
        rows = windows[starts[members] + HEADER]  # one record's data and footer a row
        stored = np.ascontiguousarray(rows[:, length:]).view("<u4")[:, 0]
        body = rows[:, :length]
        first = body[0]
        diff = body ^ first
        varying = np.flatnonzero(diff.any(axis=0))
        crcs = np.full(len(members), crc32c(first.tobytes()), dtype=np.uint32)
        tables = _tables_for(length)
        for j in varying.tolist():
            crcs ^= tables[j][diff[:, j]]
        masked_v = ((crcs >> np.uint32(15)) | (crcs << np.uint32(17))) + np.uint32(_MASK_DELTA)
        ok[members] = masked_v == stored
    return ok
