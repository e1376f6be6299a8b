"""Damage between records, with exact expectations: which records come back, the damaged
regions (offset and length), the counts and the warnings, on both read paths.

``tests/events/test_spans.py`` checks that the bulk path agrees with the one-record-at-
a-time path; both share the search for the next record after damage
(:meth:`RecordReader._resync`), so here every expectation is written out. The search's
cost (zeros skipped in one scan, a dense stretch judged a chunk at a time) is measured
by counting the reader's own calls, never by a clock; tests/hostile/test_event_files_resync.py
does the same for megabytes of damage.
"""

from __future__ import annotations

import logging
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

from mindwatch.events import reader as reader_module
from mindwatch.events.crc import CRC32C_TABLE, masked_crc32c
from mindwatch.events.reader import HEADER, RecordReader
from mindwatch.events.records import frame

NAME = "events.out.tfevents.1.resync"


def payload(step: int) -> bytes:
    value = Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
    return Event(
        wall_time=1.7e9 + step, step=step, summary=Summary(value=[value])
    ).SerializeToString()


def read(path: Path, how: str, **kwargs: Any) -> tuple[list[bytes], RecordReader]:
    """The records of ``path`` by one of the two read paths, and the reader."""
    reader = RecordReader(path, **kwargs)
    if how == "one":
        return list(reader.read()), reader
    spans = reader.read_spans()
    return [spans.payload(i) for i in range(len(spans))], reader


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]


@pytest.fixture(autouse=True)
def _warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")


HOWS = ["one", "bulk"]
DAMAGE = {
    "zeros": bytes(300),  # what power loss leaves
    "0xff": b"\xff" * 77,
    "random": random.Random(7).randbytes(500),
    # Small integers: a plausible length every eight bytes, so the search goes dense.
    "int64": np.arange(7, 7 + 512, dtype="<i8").tobytes(),
    "zeros then int64": bytes(100) + np.arange(1, 300, dtype="<i8").tobytes(),
}


def test_twelve_zero_bytes_are_never_a_record_header() -> None:
    # Why a zero run is skipped without a CRC (reader.py, _ZERO_HEADER): a header of
    # length 0 holds the masked CRC of eight zero bytes, which is not 0.
    assert masked_crc32c(bytes(8)) == 0x07980329
    assert frame(b"")[:HEADER] == bytes(8) + struct.pack("<I", 0x07980329)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_between_records_is_one_region_and_every_record_after_it_is_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str, kind: str
) -> None:
    damage = DAMAGE[kind]
    before = [payload(s) for s in range(10)]
    after = [payload(s) for s in range(10, 25)]
    head = b"".join(frame(p) for p in before)
    path = tmp_path / NAME
    path.write_bytes(head + damage + b"".join(frame(p) for p in after))
    records, reader = read(path, how)
    assert records == before + after
    stats = reader.stats
    assert (stats.records, stats.corrupt, stats.records_before_damage) == (25, 1, 10)
    assert stats.corrupt_regions == [(len(head), len(damage))]
    assert stats.corrupt_offsets == [len(head)]
    assert stats.skipped_bytes == len(damage)
    assert reader.offset == path.stat().st_size
    assert warnings(caplog) == [
        f"mindwatch: {path}: a damaged record header at byte offset {len(head)}; "
        f"skipped {len(damage)} bytes and read on"
    ]


@pytest.mark.parametrize("how", HOWS)
def test_a_record_failing_its_crc_then_garbage_is_one_region(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    records_ = [frame(payload(s)) for s in range(20)]
    bad = bytearray(records_[6])
    bad[HEADER + 3] ^= 0x01  # its data no longer matches its CRC
    garbage = b"\xff" * 50
    head = b"".join(records_[:6])
    path = tmp_path / NAME
    path.write_bytes(head + bytes(bad) + garbage + b"".join(records_[7:]))
    got, reader = read(path, how)
    assert got == [payload(s) for s in range(20) if s != 6]
    region = len(bad) + len(garbage)
    assert reader.stats.corrupt_regions == [(len(head), region)]
    assert (reader.stats.corrupt, reader.stats.skipped_bytes) == (1, region)
    assert reader.stats.records_before_damage == 6
    assert warnings(caplog) == [
        f"mindwatch: {path}: a record whose data fails its CRC at byte offset {len(head)}; "
        f"skipped {region} bytes and read on"
    ]


@pytest.mark.parametrize("how", HOWS)
def test_five_damaged_regions_are_warned_the_fifth_says_more_are_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    records_ = [bytearray(frame(payload(s))) for s in range(30)]
    damaged = [2, 5, 9, 14, 20, 24, 27]  # seven regions, good records between them
    offsets = []
    pos = 0
    for i, record in enumerate(records_):
        if i in damaged:
            record[HEADER + 5] ^= 0x20
            offsets.append((pos, len(record)))
        pos += len(record)
    path = tmp_path / NAME
    path.write_bytes(b"".join(records_))
    got, reader = read(path, how)
    assert got == [payload(s) for s in range(30) if s not in damaged]
    assert reader.stats.corrupt == 7
    assert reader.stats.corrupt_regions == offsets
    assert reader.stats.records_before_damage == 2
    expected = [
        f"mindwatch: {path}: a record whose data fails its CRC at byte offset {at}; "
        f"skipped {size} bytes and read on"
        for at, size in offsets[:5]
    ]
    expected[4] += " (further damage in this file is counted, not shown)"
    assert warnings(caplog) == expected


@pytest.mark.parametrize("how", HOWS)
def test_a_header_being_written_after_garbage_is_read_once_it_is_complete(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    # Garbage, then a record whose first 11 bytes are written: its header is not whole
    # yet, so the search cannot find it; the read must stop where it may begin (the
    # last HEADER - 1 bytes), and the next read find it there.
    head = b"".join(frame(payload(s)) for s in range(5))
    garbage = b"\xff" * 40
    last = frame(payload(5))
    path = tmp_path / NAME
    path.write_bytes(head + garbage + last[: HEADER - 1])
    got, reader = read(path, how)
    assert got == [payload(s) for s in range(5)]
    assert reader.offset == len(head) + len(garbage)
    assert reader.stats.corrupt_regions == [(len(head), len(garbage))]
    with path.open("ab") as handle:
        handle.write(last[HEADER - 1 :])
    reader2 = RecordReader(path, offset=reader.offset)
    again = list(reader2.read()) if how == "one" else [reader2.read_spans().payload(0)]
    assert again == [payload(5)]
    assert reader2.stats.corrupt == 0


def test_a_zero_run_in_the_middle_is_skipped_in_one_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 200 KB of zeros between records: found by a few scans of 64 KB, not one per byte.
    scans: list[int] = []
    after_zeros = RecordReader._after_zeros

    def counted(data: Any, pos: int, end: int) -> int:
        scans.append(pos)
        return after_zeros(data, pos, end)

    monkeypatch.setattr(RecordReader, "_after_zeros", staticmethod(counted))
    head = b"".join(frame(payload(s)) for s in range(5))
    zeros = bytes(200_000)
    path = tmp_path / NAME
    path.write_bytes(head + zeros + b"".join(frame(payload(s)) for s in range(5, 10)))
    got, reader = read(path, "one")
    assert got == [payload(s) for s in range(10)]
    assert reader.stats.corrupt_regions == [(len(head), len(zeros))]
    assert len(scans) <= 2, len(scans)


# ------------------------------------------------------------- the dense search


@pytest.mark.parametrize(
    ("limit", "high"),
    [
        (1 << 30, 4),  # the default
        ((1 << 32) - 1, 4),
        (1 << 32, 3),
        (1 << 36, 3),
        (255, 7),
        (256, 6),
        (5000, 6),
        ((1 << 64) - 1, 0),
    ],
)
def test_zero_high_bytes_is_the_top_bytes_every_length_within_the_limit_has(
    limit: int, high: int
) -> None:
    assert reader_module._zero_high_bytes(limit) == high
    # limit fits in the low 8 - high bytes, and would not in one fewer
    assert limit < 1 << (8 * (8 - high))
    assert high == 0 or limit >= 1 << (8 * (7 - high))


def _raw_crc(data: bytes) -> int:
    """CRC-32C bit by bit, no initial value, no final XOR: the definition."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc


def test_the_slicing_tables_are_crc32cs_of_a_byte_followed_by_zeros() -> None:
    # Built when the module is imported (so no mutant of the builder is active in a
    # run that imported it before); build them again to test the builder.
    tables = reader_module._slicing_tables()
    assert tables.shape == (8, 256)
    np.testing.assert_array_equal(tables, reader_module._SLICES)
    assert tables[0].tolist() == list(CRC32C_TABLE)
    for j in range(8):
        for b in (0, 1, 0x80, 0xA5, 0xFF):
            assert int(tables[j][b]) == _raw_crc(bytes([b]) + bytes(j)), (j, b)


def _valid_headers(data: bytes, limit: int) -> list[int]:
    """Every offset of ``data`` holding a valid record header, judged one at a time."""
    found = []
    for at in range(len(data) - HEADER + 1):
        (length,) = struct.unpack_from("<Q", data, at)
        (stored,) = struct.unpack_from("<I", data, at + 8)
        if length <= limit and masked_crc32c(data[at : at + 8]) == stored:
            found.append(at)
    return found


@pytest.mark.parametrize("limit", [1 << 30, 1 << 36, 5000, 255, (1 << 64) - 1])
def test_the_dense_search_judges_every_offset_as_a_one_at_a_time_search_does(
    limit: int,
) -> None:
    rng = random.Random(limit)
    data = bytearray(np.arange(3, 3 + 1024, dtype="<i8").tobytes())
    for _ in range(40):  # planted headers, within the limit and beyond it
        at = rng.randrange(0, len(data) - HEADER)
        length = rng.choice([0, 1, 300, limit, limit + 1, rng.randrange(0, 1 << 40)])
        raw = struct.pack("<Q", length % (1 << 64))
        data[at : at + HEADER] = raw + struct.pack("<I", masked_crc32c(raw))
    data[-HEADER:] = frame(b"")[:HEADER]  # a header at the last offset that has one
    chunk = bytes(data)
    high = reader_module._zero_high_bytes(limit)
    hits, plausible = reader_module._header_hits(chunk, high, limit)
    assert hits.tolist() == _valid_headers(chunk, limit)
    assert len(chunk) - HEADER in hits.tolist()
    # the candidates: offsets whose length has its `high` top bytes zero
    candidates = sum(
        1 for at in range(len(chunk) - HEADER + 1) if chunk[at + 8 - high : at + 8] == bytes(high)
    )
    assert plausible == candidates


def test_a_chunk_shorter_than_a_header_has_no_hits() -> None:
    for size in range(HEADER):
        hits, plausible = reader_module._header_hits(bytes(size), 4, 1 << 30)
        assert (hits.tolist(), plausible) == ([], 0)
