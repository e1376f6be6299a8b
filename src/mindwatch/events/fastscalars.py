"""Scalar events decoded many at a time with numpy, where their bytes allow it.

A training run writes the same event again and again: the same tags, only the wall
time, the step and the values change. Such records have the same length and the same
bytes everywhere else, so a group of them is one ``(records, length)`` byte matrix:
its wall times, steps and float32 values are columns, read in one numpy operation.

The layout is learnt from the group's first record (``wall_time``, ``step``, then a
``summary`` of values holding only ``tag`` and ``simple_value``, in field order, as
mindwatch, torch, tensorboardX and protobuf itself serialize them). Every other record
of the group must match it byte for byte outside those columns, or it is left to the
protobuf decoder, as is every record of any other kind. Nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from mindwatch.events.protowire import read_varint

__all__ = ["Decoded", "decode_uniform_groups"]

_MIN_GROUP = 16  # smaller groups: protobuf is as fast and simpler
_MAX_SKELETONS = 64  # distinct events of one length tried before leaving the rest to protobuf


@dataclass
class Decoded:
    """Points of the records decoded here; ``handled[i]`` says whether record ``i`` was."""

    handled: npt.NDArray[np.bool_]
    record: npt.NDArray[np.int64]  # the record each point came from
    position: npt.NDArray[np.int64]  # the point's place within its record
    tag: npt.NDArray[np.int64]  # index into ``tags``
    step: npt.NDArray[np.int64]
    wall: npt.NDArray[np.float64]
    value: npt.NDArray[np.float64]
    tags: list[str]


@dataclass
class _Layout:
    step_at: int
    step_len: int
    float_at: list[int]
    tags: list[str]


class _NotPlainError(ValueError):
    """The record is not a plain scalar event (the protobuf decoder takes it)."""


def _expect(condition: bool) -> None:
    if not condition:
        raise _NotPlainError


def _layout(payload: bytes) -> Optional[_Layout]:
    """Where the step and the values sit in ``payload``, if it is a plain scalar event."""
    try:
        # wall_time (field 1, fixed64), then step (field 2, varint)
        _expect(len(payload) >= 12 and payload[0] == 0x09 and payload[9] == 0x10)
        _, pos = read_varint(payload, 10)
        step_len = pos - 10
        _expect(pos < len(payload) and payload[pos] == 0x2A)  # summary, field 5
        size, pos = read_varint(payload, pos + 1)
        _expect(pos + size == len(payload))
        floats, tags = [], []
        while pos < len(payload):
            _expect(payload[pos] == 0x0A)  # Summary.value, field 1
            value_len, pos = read_varint(payload, pos + 1)
            end = pos + value_len
            _expect(payload[pos] == 0x0A)  # Value.tag, field 1
            tag_len, pos = read_varint(payload, pos + 1)
            tags.append(payload[pos : pos + tag_len].decode("utf-8"))
            pos += tag_len
            # Value.simple_value (field 2, float) and nothing else
            _expect(pos + 5 == end and payload[pos] == 0x15)
            floats.append(pos + 1)
            pos = end
        _expect(bool(floats))
    except (ValueError, UnicodeDecodeError, IndexError):
        return None
    return _Layout(10, step_len, floats, tags)


def _columns(
    rows: np.ndarray[Any, Any],
    index: np.ndarray[Any, Any],
    layout: _Layout,
    tag_index: dict[str, int],
) -> tuple[np.ndarray[Any, Any], ...]:
    """(record, position, tag, step, wall, value) of a byte matrix of one layout."""
    walls = np.ascontiguousarray(rows[:, 1:9]).view("<f8").ravel()
    step_bytes = rows[:, layout.step_at : layout.step_at + layout.step_len].astype(np.int64)
    steps = np.zeros(len(rows), dtype=np.int64)
    for k in range(layout.step_len):
        steps |= (step_bytes[:, k] & 0x7F) << (7 * k)
    columns = np.concatenate([rows[:, at : at + 4] for at in layout.float_at], axis=1)
    values = np.ascontiguousarray(columns).view("<f4").astype(np.float64)
    ids = [tag_index.setdefault(t, len(tag_index)) for t in layout.tags]
    count = len(layout.tags)
    return (
        np.repeat(index, count),
        np.tile(np.arange(count, dtype=np.int64), len(index)),
        np.tile(np.asarray(ids, dtype=np.int64), len(index)),
        np.repeat(steps, count),
        np.repeat(walls, count),
        values.reshape(-1),
    )


def decode_uniform_groups(payloads: list[bytes]) -> Decoded:
    """Decode every group of same-length plain scalar events with numpy."""
    n = len(payloads)
    handled = np.zeros(n, dtype=bool)
    by_length: dict[int, list[int]] = {}
    for i, payload in enumerate(payloads):
        by_length.setdefault(len(payload), []).append(i)
    parts: list[tuple[np.ndarray[Any, Any], ...]] = []
    tag_index: dict[str, int] = {}
    for length, members in by_length.items():
        if len(members) < _MIN_GROUP:
            continue
        layout = _layout(payloads[members[0]])
        if layout is None:
            continue
        rows = np.frombuffer(b"".join(payloads[i] for i in members), dtype=np.uint8)
        rows = rows.reshape(len(members), length)
        variable = np.zeros(length, dtype=bool)
        variable[1:9] = True  # wall time
        variable[layout.step_at : layout.step_at + layout.step_len] = True
        for at in layout.float_at:
            variable[at : at + 4] = True
        # Same length, different tags (torch writes one tag per event): peel off one
        # sub-group per distinct skeleton, each checked against its own first record.
        fixed = rows[:, ~variable]
        member_index = np.asarray(members, dtype=np.int64)
        remaining = np.arange(len(members))
        for _ in range(_MAX_SKELETONS):
            if len(remaining) < _MIN_GROUP:
                break
            same = (fixed[remaining] == fixed[remaining[0]]).all(axis=1)
            chosen, remaining = remaining[same], remaining[~same]
            if len(chosen) < _MIN_GROUP:
                continue
            own = _layout(payloads[int(member_index[chosen[0]])])
            if own is None or (own.step_len, own.float_at) != (layout.step_len, layout.float_at):
                continue
            parts.append(_columns(rows[chosen], member_index[chosen], own, tag_index))
            handled[member_index[chosen]] = True
    tags = sorted(tag_index, key=tag_index.__getitem__)
    if not parts:
        empty_i = np.zeros(0, dtype=np.int64)
        empty_f = np.zeros(0, dtype=np.float64)
        return Decoded(handled, empty_i, empty_i, empty_i, empty_i, empty_f, empty_f, tags)
    record, position, tag, step, wall, value = (np.concatenate(c) for c in zip(*parts))
    return Decoded(handled, record, position, tag, step, wall, value, tags)
