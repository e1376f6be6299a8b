"""Scalar events decoded many at a time with numpy, where their bytes allow it.

A training run writes the same event again and again: the same tags, only the wall
time, the step and the values change. Such records have the same length and the same
bytes everywhere else, so a group of them is one ``(records, length)`` byte matrix:
its wall times, steps and float32 values are columns, read in one numpy operation.

Records of one length but different tags (torch and tensorboardX write one tag per
event) are told apart by the bytes outside those columns that differ in the group
(typically a tag's last characters), and each kind is decoded as its own group.

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
from mindwatch.events.spans import Spans, by_length

__all__ = ["Decoded", "decode_spans", "decode_uniform_groups"]

_MIN_GROUP = 16  # smaller groups: protobuf is as fast and simpler
_KEY_BYTES = 8  # bytes telling a group's events apart that fit one integer key
_PEELED = 32  # kinds in a group found one pass each before sorting the rest
_MAX_LAYOUTS = 16  # layouts tried among records of one length before leaving the rest


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
    if count == 1:
        return (
            index,
            np.zeros(len(index), dtype=np.int64),
            np.full(len(index), ids[0], dtype=np.int64),
            steps,
            walls,
            values.reshape(-1),
        )
    return (
        np.repeat(index, count),
        np.tile(np.arange(count, dtype=np.int64), len(index)),
        np.tile(np.asarray(ids, dtype=np.int64), len(index)),
        np.repeat(steps, count),
        np.repeat(walls, count),
        values.reshape(-1),
    )


def _whole_varints(step_bytes: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Rows whose bytes are one varint exactly: every byte but the last continues it."""
    ok = step_bytes[:, -1] < 0x80
    for k in range(step_bytes.shape[1] - 1):
        ok &= step_bytes[:, k] >= 0x80
    return np.asarray(ok)


def _kinds(fixed: np.ndarray[Any, Any]) -> tuple[list[np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
    """The rows of ``fixed`` grouped by identical contents (row indices, each ascending),
    and the rows left out (matching no group's first row: only where more than
    :data:`_KEY_BYTES` columns differ, which the key does not cover)."""
    differs = np.flatnonzero((fixed != fixed[0]).any(axis=0))
    everything = np.arange(len(fixed))
    if not len(differs):
        return [everything], everything[:0]
    key = np.zeros(len(fixed), dtype=np.uint64)
    for column in differs[:_KEY_BYTES].tolist():  # e.g. a tag's last characters
        key = (key << np.uint64(8)) | fixed[:, column].astype(np.uint64)
    kinds: list[np.ndarray[Any, Any]] = []
    remaining = everything
    while len(remaining) and len(kinds) < _PEELED:  # few kinds: one pass each, no sort
        same = key[remaining] == key[remaining[0]]
        kinds.append(remaining[same])
        remaining = remaining[~same]
    if len(remaining):  # many kinds: sort the rest once
        _, label = np.unique(key[remaining], return_inverse=True)
        order = np.argsort(label.ravel(), kind="stable")
        bounds = np.flatnonzero(np.diff(label.ravel()[order])) + 1
        kinds += [remaining[part] for part in np.split(order, bounds)]
    rest = differs[_KEY_BYTES:]
    if not len(rest):
        return kinds, everything[:0]
    exact, left = [], []
    for kind in kinds:  # the columns beyond the key must match the kind's first row too
        tail = fixed[kind][:, rest]
        match = (tail == tail[0]).all(axis=1)
        exact.append(kind[match])
        left.append(kind[~match])
    return exact, np.sort(np.concatenate(left))


def decode_spans(spans: Spans) -> Decoded:
    """Decode every group of same-length plain scalar events of ``spans`` with numpy."""
    n = len(spans)
    handled = np.zeros(n, dtype=bool)
    parts: list[tuple[np.ndarray[Any, Any], ...]] = []
    tag_index: dict[str, int] = {}
    if n:
        buf = np.frombuffer(spans.data, dtype=np.uint8)
        for length, members in by_length(spans.lengths):
            if len(members) >= _MIN_GROUP:
                _decode_group(
                    spans, buf, members, length, tag_index=tag_index, parts=parts, handled=handled
                )
    if not parts:
        empty_i = np.zeros(0, dtype=np.int64)
        empty_f = np.zeros(0, dtype=np.float64)
        tags = sorted(tag_index, key=tag_index.__getitem__)
        return Decoded(handled, empty_i, empty_i, empty_i, empty_i, empty_f, empty_f, tags)
    record, position, tag, step, wall, value = (np.concatenate(c) for c in zip(*parts))
    # Tags numbered in the order they first appear in the records (as one decoder
    # reading them in order would), not in the order the groups were decoded.
    first: dict[int, tuple[int, int]] = {}
    for part in parts:  # a part's first record holds every tag of the part
        head = part[0] == part[0][0]
        r = int(part[0][0])
        for p, t in zip(part[1][head].tolist(), part[2][head].tolist()):
            if t not in first or (r, p) < first[t]:
                first[t] = (r, p)
    names = sorted(tag_index, key=tag_index.__getitem__)
    renumbered = sorted(first, key=first.__getitem__)
    table = np.zeros(len(names), dtype=np.int64)
    table[renumbered] = np.arange(len(renumbered))
    tags = [names[t] for t in renumbered]
    return Decoded(handled, record, position, table[tag], step, wall, value, tags)


def _decode_group(
    spans: Spans,
    buf: np.ndarray[Any, Any],
    members: np.ndarray[Any, Any],
    length: int,
    *,
    tag_index: dict[str, int],
    parts: list[tuple[np.ndarray[Any, Any], ...]],
    handled: np.ndarray[Any, Any],
) -> None:
    """Decode the records ``members`` (all ``length`` long) that are plain scalar events.

    Records of one length may have several layouts (MindFormers' ``overflow`` at step
    200 is as long as its ``loss-scale`` at step 1): each layout in turn is learnt from
    the first record not decoded yet, and the records that share it are decoded."""
    windows = np.lib.stride_tricks.sliding_window_view(buf, length)
    remaining = members
    for _ in range(_MAX_LAYOUTS):
        if len(remaining) < _MIN_GROUP:
            return
        layout = _layout(spans.payload(int(remaining[0])))
        if layout is None:
            remaining = remaining[1:]  # left to protobuf
            continue
        rows = windows[spans.starts[remaining]]
        variable = np.zeros(length, dtype=bool)
        variable[1:9] = True  # wall time
        variable[layout.step_at : layout.step_at + layout.step_len] = True
        for at in layout.float_at:
            variable[at : at + 4] = True
        # Only rows whose step bytes are one varint of the layout's width share its layout.
        whole = _whole_varints(rows[:, layout.step_at : layout.step_at + layout.step_len])
        candidates = np.flatnonzero(whole)
        left = [np.flatnonzero(~whole)]
        # Same length, different tags (torch writes one tag per event): one sub-group per
        # distinct skeleton, each checked against its own first record.
        plain = rows if len(candidates) == len(rows) else rows[candidates]
        kinds, unmatched = _kinds(plain[:, ~variable])
        left.append(candidates[unmatched])
        for chosen in kinds:
            index = candidates[chosen]
            own = _layout(spans.payload(int(remaining[index[0]])))
            if (
                len(index) < _MIN_GROUP
                or own is None
                or (own.step_len, own.float_at) != (layout.step_len, layout.float_at)
            ):
                if index[0] != 0:  # the first record's kind is done with either way
                    left.append(index)
                continue
            parts.append(_columns(rows[index], remaining[index], own, tag_index))
            handled[remaining[index]] = True
        remaining = remaining[np.sort(np.concatenate(left))]


def decode_uniform_groups(payloads: list[bytes]) -> Decoded:
    """Decode every group of same-length plain scalar events with numpy."""
    return decode_spans(Spans.of(payloads))
