"""Masked CRC32C, as TFRecord framing uses it.

The C implementation from the ``crc32c`` package (SSE4.2 where the CPU has it) costs
about 70 ns for a scalar record; tensorboard's pure-Python fallback costs about 4 us,
which alone would be 20x our whole per-point budget. The pure-Python table version
below is kept so the package still works where the wheel is unavailable; ``BACKEND``
says which one is active.
"""

from __future__ import annotations

from typing import Callable, Union

__all__ = ["BACKEND", "CRC32C_TABLE", "crc32c", "masked_crc32c"]

_Buffer = Union[bytes, bytearray, memoryview]

_MASK_DELTA = 0xA282EAD8


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()
CRC32C_TABLE: tuple[int, ...] = tuple(_TABLE)  # for vectorised CRCs (events.reader)


def _crc32c_py(data: _Buffer) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c: Callable[[_Buffer], int]
try:
    from crc32c import crc32c as _crc32c_c

    crc32c = _crc32c_c
    BACKEND = "c"
except ImportError:  # pragma: no cover - exercised only without the wheel
    crc32c = _crc32c_py
    BACKEND = "python"


def masked_crc32c(data: _Buffer) -> int:
    """Return the CRC32C of ``data``, rotated and offset as TFRecord requires."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
