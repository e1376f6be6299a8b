"""Issue 20, item 8: damaged regions cost about what as many bytes of good records cost.

A zero-filled tail (what power loss leaves), a 0xFF tail, random bytes, small integers
(an int64 array: a plausible record length every few bytes), and a zeroed region in the
middle of a file: the reader passes each in bulk. No wall time is
asserted; the work is: the CRCs computed and the record headers looked at, counted by
wrapping the reader's own functions, must not grow with the size of the damage.
"""

from __future__ import annotations

import logging
import random
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mindwatch
from mindwatch.events import reader as reader_module
from mindwatch.events.crc import crc32c, masked_crc32c
from mindwatch.events.reader import HEADER, RecordReader
from tests.hostile.promise import reads_back

STEPS = 50
MB = 1 << 20


@pytest.fixture
def event_file(tmp_path: Path) -> Path:
    """A finished run's only event file: 50 steps of loss and lr."""
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        for step in range(1, STEPS + 1):
            mon.log_step(step, loss=1.0 / step, lr=0.1)
    (path,) = (tmp_path / "run").glob("*tfevents*")
    return path


class Work:
    """Counts the reader's CRCs and the headers it unpacks (one per place it looks at)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.crcs = 0
        self.headers = 0
        unpack_q = reader_module._unpack_q

        def counted_crc(data: Any) -> int:
            self.crcs += 1
            return crc32c(data)

        def counted_unpack(data: Any, offset: int = 0) -> tuple[int, ...]:
            self.headers += 1
            return unpack_q(data, offset)

        monkeypatch.setattr(reader_module, "crc32c", counted_crc)
        monkeypatch.setattr(reader_module, "_unpack_q", counted_unpack)

    def of(self, path: Path) -> tuple[list[bytes], int, int]:
        """The records of ``path``, and the CRCs and header reads that took."""
        self.crcs = self.headers = 0
        records = list(RecordReader(path).read())
        return records, self.crcs, self.headers


def _records_at(data: bytes) -> Iterator[tuple[int, int]]:
    """(offset, total length) of each record of an undamaged file."""
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        yield pos, HEADER + length + 4
        pos += HEADER + length + 4


def test_twelve_zero_bytes_are_never_a_record_header() -> None:
    """The reason a zero run can be skipped without a CRC: a header of length 0 carries
    the masked CRC of eight zero bytes, which is not zero."""
    assert masked_crc32c(bytes(8)) == 0x07980329
    (stored,) = struct.unpack("<I", bytes(4))  # the CRC field of twelve zero bytes
    assert stored != masked_crc32c(bytes(8))


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\0" * (5 * MB), id="zeros"),
        pytest.param(b"\xff" * (5 * MB), id="0xff"),
        pytest.param(random.Random(20).randbytes(5 * MB), id="random"),
        pytest.param(np.arange(5 * MB // 8, dtype="<i8").tobytes(), id="int64"),
        pytest.param(np.arange(5 * MB // 4, dtype="<u4").tobytes(), id="uint32"),
    ],
)
def test_a_5mb_damaged_tail_costs_work_per_region_not_per_byte(
    event_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tail: bytes,
) -> None:
    work = Work(monkeypatch)
    clean, clean_crcs, clean_headers = work.of(event_file)
    with event_file.open("ab") as handle:
        handle.write(tail)
    caplog.set_level(logging.WARNING, logger="mindwatch")
    records, crcs, headers = work.of(event_file)
    assert records == clean  # everything before the damage
    # A per-byte search costs ~5 million of each here; a bulk one a handful (and the
    # candidates looked at one by one before the search goes dense).
    bound = 16 + reader_module._DENSE_AFTER
    assert crcs - clean_crcs <= bound, crcs - clean_crcs
    assert headers - clean_headers <= bound, headers - clean_headers
    (warning,) = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    assert str(event_file) in warning
    assert f"at byte offset {event_file.stat().st_size - len(tail)}" in warning
    reads_back(event_file.parent, {"train/loss": [(s, 1.0 / s) for s in range(1, STEPS + 1)]})


def test_a_zeroed_region_in_the_middle_is_passed_and_the_records_after_it_read(
    event_file: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    work = Work(monkeypatch)
    clean, clean_crcs, _ = work.of(event_file)
    data = event_file.read_bytes()
    layout = list(_records_at(data))
    # Zero records 10..29 (power loss in the middle of a copied file), and add a 5 MB zero
    # run there so the region is big: records 30.. must still be read after it.
    start = layout[10][0]
    end = layout[30][0]
    event_file.write_bytes(data[:start] + bytes(end - start + 5 * MB) + data[end:])
    caplog.set_level(logging.WARNING, logger="mindwatch")
    records, crcs, _ = work.of(event_file)
    assert records == clean[:10] + clean[30:]
    assert crcs <= clean_crcs + 16  # the zero run itself computed (almost) none
    (warning,) = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    assert str(event_file) in warning
    assert f"at byte offset {start}" in warning
    assert f"skipped {end - start + 5 * MB} bytes" in warning  # one region, one warning


def test_every_path_that_reads_records_passes_a_zero_tail_in_bulk(
    event_file: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """read_scalars (report, compare, export), the watcher's incremental reader, the
    folder-mixing check (doctor, report) and the MindSpore summary reader share the one
    record reader: each passes the tail with a bounded number of CRCs."""
    from mindwatch.events.mixing import file_steps
    from mindwatch.events.reader import RunReader
    from mindwatch.mssummary.format import SummaryFileReader
    from mindwatch.tools.watch import Watcher

    work = Work(monkeypatch)
    _, clean_crcs, _ = work.of(event_file)
    with event_file.open("ab") as handle:
        handle.write(bytes(5 * MB))
    caplog.set_level(logging.ERROR, logger="mindwatch")
    readers = {
        "read_scalars": lambda: mindwatch.read_scalars(event_file.parent),
        "RunReader": lambda: list(RunReader(event_file.parent).read()),
        "Watcher.poll": lambda: Watcher(event_file.parent.parent).poll(),
        "file_steps": lambda: file_steps(event_file),
        "SummaryFileReader": lambda: list(SummaryFileReader(event_file).read()),
    }
    for name, read in readers.items():
        work.crcs = 0
        read()
        assert work.crcs <= clean_crcs + 16, f"{name}: {work.crcs} CRCs"


def _valid_headers(data: bytes, limit: int) -> list[int]:
    """Every offset of ``data`` holding a valid record header, one offset at a time."""
    found = []
    for at in range(len(data) - HEADER + 1):
        (length,) = struct.unpack_from("<Q", data, at)
        (stored,) = struct.unpack_from("<I", data, at + 8)
        if length <= limit and masked_crc32c(data[at : at + 8]) == stored:
            found.append(at)
    return found


@pytest.mark.parametrize("limit", [1 << 30, 1 << 36, 5000, (1 << 64) - 1])
def test_the_dense_search_finds_exactly_the_headers_a_byte_by_byte_one_does(limit: int) -> None:
    """:func:`_header_hits` judges a whole chunk at once; planted headers (lengths within
    and beyond the limit) among small integers are found where, and only where, the
    per-offset check finds them."""
    rng = random.Random(limit)
    data = bytearray(np.arange(64 * 1024 // 8, dtype="<i8").tobytes())
    for _ in range(60):
        at = rng.randrange(0, len(data) - HEADER)
        length = rng.randrange(0, min(limit, 1 << 40) * 2) if rng.random() < 0.5 else 300
        head = struct.pack("<Q", length)
        data[at : at + HEADER] = head + struct.pack("<I", masked_crc32c(head))
    high = reader_module._zero_high_bytes(limit)
    hits, _ = reader_module._header_hits(bytes(data), high, limit)
    assert hits.tolist() == _valid_headers(bytes(data), limit)


def test_records_after_int64_damage_are_read(
    event_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Records copied in after 2 MB of small integers (and a zero run, and more integers)
    are found: the dense search hands back the first valid record, as the slow one did."""
    good = event_file.read_bytes()
    layout = list(_records_at(good))
    start, end = layout[10][0], layout[30][0]
    ints = np.arange(2 * MB // 8, dtype="<i8").tobytes()
    damaged = good[:start] + ints + bytes(MB) + ints[3:] + good[end:]
    event_file.write_bytes(damaged)
    caplog.set_level(logging.WARNING, logger="mindwatch")
    records = list(RecordReader(event_file).read())
    assert len(records) == len(layout) - 20
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    assert len(warnings) == 1, warnings  # one region
    assert f"at byte offset {start}" in warnings[0]
    assert f"skipped {len(damaged) - len(good) + (end - start)} bytes" in warnings[0]
