"""TFRecord framing: ``uint64 length | uint32 masked_crc(length) | data | uint32 masked_crc(data)``.

All integers are little-endian. The length header and its CRC depend only on the
length, so they are cached: scalar events of one tag have the same length every step.

:class:`RecordWriter` writes such records to a binary file object and counts the bytes;
it knows nothing of paths, folders or rotation (that is
:class:`~mindwatch.events.event_file.EventFile`'s work).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import BinaryIO

from mindwatch.events.crc import crc32c, masked_crc32c

__all__ = ["FOOTER_SIZE", "HEADER_SIZE", "RecordWriter", "frame"]

HEADER_SIZE = 12
FOOTER_SIZE = 4

_pack_q = struct.Struct("<Q").pack
_pack_i = struct.Struct("<I").pack
_header_cache: dict[int, bytes] = {}


def _header(length: int) -> bytes:
    header = _header_cache.get(length)
    if header is None:
        raw = _pack_q(length)
        header = raw + _pack_i(masked_crc32c(raw))
        if len(_header_cache) < 4096:
            _header_cache[length] = header
    return header


def frame(data: bytes) -> bytes:
    """Return ``data`` wrapped as one TFRecord."""
    header = _header_cache.get(len(data)) or _header(len(data))
    crc = crc32c(data)  # masked_crc32c inlined: this runs once per record
    return header + data + _pack_i((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


class RecordWriter:
    """TFRecords to a binary file object, which it owns from now on.

    The caller frames records as it makes them (:func:`frame`, e.g. on a worker thread,
    so that a batch is one ``write`` call) or hands raw data to :meth:`write`.
    :attr:`size` counts the bytes written through it, which is what the file holds when
    it was empty at the start (as a new event file is).
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.size = 0

    def write(self, data: bytes) -> None:
        """Write ``data`` as one record."""
        self.write_framed((frame(data),))

    def write_framed(self, records: Sequence[bytes]) -> None:
        """Write ``records``, each already framed, in one call."""
        data = records[0] if len(records) == 1 else b"".join(records)
        self._file.write(data)
        self.size += len(data)

    def flush(self) -> None:
        """Hand what was written to the OS."""
        self._file.flush()

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()
