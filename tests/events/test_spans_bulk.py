"""The bulk framing's promises that agreeing with the one-at-a-time path cannot show.

``tests/events/test_spans.py`` checks that :meth:`RecordReader.read_spans` returns what
:meth:`RecordReader.read` returns. The bulk path exists to do less work: lengths framed
one record at a time only until they repeat, then whole blocks of the period checked at
once; data CRCs of records of one length computed together. That work is counted here
with the module's own functions wrapped (never a clock), on periodic files, a file
whose period breaks, and one of many lengths. Also the pieces with a contract of their
own: :func:`by_length`, :meth:`Spans.of`, and the per-length caches, tested with
lengths no earlier test used (the caches fill once per process).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

from mindwatch.events import spans as spans_module
from mindwatch.events.fastscalars import decode_uniform_groups
from mindwatch.events.reader import RecordReader
from mindwatch.events.records import frame
from mindwatch.events.spans import Spans, by_length, check_crcs

NAME = "events.out.tfevents.1.bulk"
_fresh = itertools.count()


def scalar(step: int, tag: str, value: float) -> bytes:
    value_ = Summary.Value(tag=tag, simple_value=value)
    return Event(
        wall_time=1.7e9 + step, step=step, summary=Summary(value=[value_])
    ).SerializeToString()


class Work:
    """Counts the headers the framing unpacks and the data CRCs it computes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.headers = 0
        self.crcs = 0
        unpack_q, crc32c = spans_module._unpack_q, spans_module.crc32c

        def counted_unpack(data: Any, offset: int = 0) -> tuple[int, ...]:
            self.headers += 1
            return unpack_q(data, offset)

        def counted_crc(data: Any) -> int:
            self.crcs += 1
            return crc32c(data)

        monkeypatch.setattr(spans_module, "_unpack_q", counted_unpack)
        monkeypatch.setattr(spans_module, "crc32c", counted_crc)


def read_spans(path: Path) -> list[bytes]:
    spans = RecordReader(path).read_spans()
    return [spans.payload(i) for i in range(len(spans))]


@pytest.mark.parametrize("tags", [["loss"], ["loss", "learning_rate", "global_norm"]])
def test_a_periodic_file_is_framed_a_block_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tags: list[str]
) -> None:
    # One event per tag per step (torch's, tensorboardX's, MindFormers' writers): the
    # lengths repeat with the number of tags as period.
    payloads = [scalar(s, t, s / 7) for s in range(100_000, 102_000) for t in tags]
    path = tmp_path / NAME
    path.write_bytes(b"".join(frame(p) for p in payloads))
    work = Work(monkeypatch)
    assert read_spans(path) == payloads
    # 32 records one at a time, then blocks: not one header unpacked per record
    assert work.headers <= 40, work.headers
    # a data CRC per length (the rest by table), not one per record
    assert work.crcs <= len(tags), work.crcs


def test_a_period_that_breaks_is_taken_up_again_after_the_break(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payloads = [scalar(s, "loss", 0.5) for s in range(100_000, 102_000)]
    payloads.insert(1500, scalar(7, "an odd one", 1.0))  # another length, once
    path = tmp_path / NAME
    path.write_bytes(b"".join(frame(p) for p in payloads))
    work = Work(monkeypatch)
    assert read_spans(path) == payloads
    # a window before the period is seen, and two after the break (the first holds
    # the odd record, so no period is seen in it)
    assert work.headers <= 3 * spans_module._WINDOW + 4, work.headers


def test_records_of_many_lengths_are_all_crc_checked_and_a_bad_one_named(
    tmp_path: Path,
) -> None:
    # More than 32 lengths in one file: the grouping sorts instead of masking.
    rng = random.Random(3)
    payloads = [rng.randbytes(rng.randrange(0, 80)) for _ in range(400)]
    data = bytearray(b"".join(frame(p) for p in payloads))
    starts = np.cumsum([0] + [16 + len(p) for p in payloads[:-1]]).astype(np.int64)
    lengths = np.array([len(p) for p in payloads], dtype=np.int64)
    assert check_crcs(bytes(data), starts, lengths).all()
    bad = [i for i in (5, 77, 300) if lengths[i]]
    for i in bad:
        data[int(starts[i]) + 12] ^= 0x04
    ok = check_crcs(bytes(data), starts, lengths)
    assert np.flatnonzero(~ok).tolist() == bad


def test_by_length_groups_every_index_by_its_length_in_order() -> None:
    rng = np.random.default_rng(5)
    for distinct in (1, 3, 32, 33, 200):
        lengths = rng.integers(0, distinct, size=1000).astype(np.int64)
        lengths[:distinct] = np.arange(distinct)  # every length present
        groups = by_length(lengths)
        assert [length for length, _ in groups] == list(range(distinct))
        for length, members in groups:
            assert members.tolist() == np.flatnonzero(lengths == length).tolist()
    assert by_length(np.zeros(0, dtype=np.int64)) == []


def test_spans_of_payloads_read_one_at_a_time() -> None:
    payloads = [b"abc", b"", b"defgh", b"i"]
    spans = Spans.of(payloads)
    assert len(spans) == 4
    assert [spans.payload(i) for i in range(4)] == payloads
    assert spans.starts.tolist() == [0, 3, 3, 8]
    assert spans.at.tolist() == [-1, -1, -1, -1]  # where in a file: unknown
    assert spans.file.tolist() == [0, 0, 0, 0]
    assert spans.starts.dtype == spans.at.dtype == np.int64


def test_uniform_groups_decode_to_protobufs_values() -> None:
    # The decoder `mindwatch doctor` and the report use on records read one at a time.
    payloads = [scalar(s, tag, s * 0.25) for s in range(200) for tag in ("a", "bb")]
    decoded = decode_uniform_groups(payloads)
    assert decoded.handled.sum() >= len(payloads) - 2  # the rest is left to protobuf
    got = sorted(
        (int(r), decoded.tags[int(t)], int(s), float(w), float(v))
        for r, t, s, w, v in zip(
            decoded.record, decoded.tag, decoded.step, decoded.wall, decoded.value
        )
    )
    want = []
    for i in np.flatnonzero(decoded.handled).tolist():
        event = Event.FromString(payloads[i])
        (value,) = event.summary.value
        want.append((i, value.tag, event.step, event.wall_time, value.simple_value))
    assert got == want


def test_a_record_length_no_read_met_before_is_framed(tmp_path: Path) -> None:
    # The header CRC of each length is cached per process: a length never seen before
    # (a new one each run of this test) takes the path that computes it.
    length = 5000 + next(_fresh)
    payloads = [bytes([k]) * length for k in range(3)]
    path = tmp_path / NAME
    path.write_bytes(b"".join(frame(p) for p in payloads))
    assert read_spans(path) == payloads


def test_many_records_of_a_length_no_check_met_before_are_crc_checked() -> None:
    # The per-position CRC tables grow to the longest length checked together so far:
    # a length longer than any before (a new one each run of this test) grows them.
    length = 900 + next(_fresh) % 120
    rng = random.Random(length)
    payloads = [rng.randbytes(length) for _ in range(20)]
    data = bytearray(b"".join(frame(p) for p in payloads))
    starts = np.arange(20, dtype=np.int64) * (16 + length)
    lengths = np.full(20, length, dtype=np.int64)
    data[int(starts[13]) + 12] ^= 0x01  # the first byte of record 13: the new table's row
    ok = check_crcs(bytes(data), starts, lengths)
    assert np.flatnonzero(~ok).tolist() == [13]
