"""TFRecord framing: ``uint64 length | uint32 masked_crc(length) | data | uint32 masked_crc(data)``.

All integers are little-endian. The length header and its CRC depend only on the
length, so they are cached: scalar events of one tag have the same length every step.
"""

from __future__ import annotations

import struct

from mindwatch.events.crc import crc32c, masked_crc32c

__all__ = ["FOOTER_SIZE", "HEADER_SIZE", "frame"]

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
