"""A small protobuf wire-format decoder, for formats whose ``.proto`` we do not ship.

MindSpore's summary files are protobuf messages of MindSpore's own schema
(``mindspore.irpb``). Reading them must not need MindSpore (the core imports none), so
:mod:`mindwatch.mssummary.format` decodes them from the wire format, which is stable and
self-delimiting, with this module: :func:`fields` splits a message into its fields by
number, and the helpers interpret a field's raw value as the type the schema gives it.
Damage raises :class:`WireError`; callers skip the record.
"""

from __future__ import annotations

import struct
from typing import Any, Union

import numpy as np

__all__ = [
    "Fields",
    "Raw",
    "WireError",
    "blob",
    "doubles",
    "fields",
    "first",
    "floats",
    "message",
    "messages",
    "read_varint",
    "signed",
    "text",
    "uint",
    "varints",
]

Raw = Union[int, bytes]
Fields = dict[int, list[Raw]]

_MASK64 = (1 << 64) - 1
_unpack_d = struct.Struct("<d").unpack
_unpack_f = struct.Struct("<f").unpack


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``data[pos:]`` and the position after it (WireError if damaged)."""
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _MASK64, pos  # as protobuf: a 10th byte's extra bits are dropped
        shift += 7


def fields(data: bytes) -> Fields:
    """Every field of one message: ``{number: [raw value, ...]}`` in wire order.

    Varints come back as ``int``; fixed64, fixed32 and length-delimited values as
    ``bytes`` (interpret them with the helpers below; a length-delimited value may be a
    string, a nested message or a packed repeated field).
    """
    out: Fields = {}
    pos, end = 0, len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Raw
        if wire == 0:
            value, pos = read_varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = read_varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise WireError(f"unsupported wire type {wire} for field {number}")
        if pos > end or number == 0:
            raise WireError("field runs past the end of the message")
        out.setdefault(number, []).append(value)
    return out


def first(msg: Fields, number: int, default: Raw = b"") -> Raw:
    """The last value of a non-repeated field (protobuf's "last one wins"), or ``default``."""
    values = msg.get(number)
    return values[-1] if values else default


def message(msg: Fields, number: int) -> Fields:
    """A nested message field, decoded (empty if absent).

    Several occurrences merge as protobuf merges them, which for the wire format is the
    concatenation of their bytes.
    """
    parts = msg.get(number, [])
    if any(not isinstance(part, bytes) for part in parts):
        raise WireError(f"field {number} should be a message")
    return fields(b"".join(part for part in parts if isinstance(part, bytes)))


def messages(msg: Fields, number: int) -> list[Fields]:
    """A repeated message field, each element decoded."""
    out = []
    for raw in msg.get(number, []):
        if not isinstance(raw, bytes):
            raise WireError(f"field {number} should be a message")
        out.append(fields(raw))
    return out


def blob(msg: Fields, number: int) -> bytes:
    """A ``bytes`` / ``string`` field's raw value (empty if absent)."""
    value = first(msg, number)
    if not isinstance(value, bytes):
        raise WireError(f"field {number} should be length-delimited")
    return value


def text(msg: Fields, number: int) -> str:
    return blob(msg, number).decode("utf-8", "replace")


def uint(msg: Fields, number: int) -> int:
    """A scalar varint field (``uint``, ``enum``, ``bool``), 0 if absent."""
    value = first(msg, number, 0)
    if not isinstance(value, int):
        raise WireError(f"field {number} should be a varint")
    return value


def signed(value: Raw) -> int:
    """An ``int64`` / ``int32`` varint as a signed number (two's complement)."""
    if not isinstance(value, int):
        raise WireError("expected a varint")
    return value - (1 << 64) if value >= 1 << 63 else value


def double(value: Raw) -> float:
    if not isinstance(value, bytes) or len(value) != 8:
        raise WireError("expected a 64-bit value")
    result: float = _unpack_d(value)[0]
    return result


def float32(value: Raw) -> float:
    if not isinstance(value, bytes) or len(value) != 4:
        raise WireError("expected a 32-bit value")
    result: float = _unpack_f(value)[0]
    return result


def _packed(values: list[Raw], width: int, dtype: str) -> np.ndarray[Any, Any]:
    """A repeated fixed-width field, packed (one bytes value) or not (one per element)."""
    blob = b"".join(v for v in values if isinstance(v, bytes))
    if len(blob) % width or len(blob) != sum(len(v) for v in values if isinstance(v, bytes)):
        raise WireError("packed field length is not a multiple of its element size")
    if any(isinstance(v, int) for v in values):
        raise WireError("expected fixed-width values")
    return np.frombuffer(blob, dtype=dtype)


def floats(msg: Fields, number: int) -> np.ndarray[Any, Any]:
    """A ``repeated float`` field as a float32 array."""
    return _packed(msg.get(number, []), 4, "<f4")


def doubles(msg: Fields, number: int) -> np.ndarray[Any, Any]:
    """A ``repeated double`` field as a float64 array."""
    return _packed(msg.get(number, []), 8, "<f8")


def varints(msg: Fields, number: int) -> list[int]:
    """A ``repeated int64/int32/uint64/bool/enum`` field, packed or not (unsigned)."""
    out: list[int] = []
    for value in msg.get(number, []):
        if isinstance(value, int):
            out.append(value)
            continue
        pos = 0
        while pos < len(value):
            number_, pos = read_varint(value, pos)
            out.append(number_)
    return out
