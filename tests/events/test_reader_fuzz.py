"""Property-based damage: truncation, bit flips and garbage never crash, hang or blow up
memory, and every good record before the damage is returned."""

from __future__ import annotations

import logging
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindwatch
from mindwatch.events.reader import RecordReader

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[bytes], list[int]]:
    """An event file's bytes, its records' payloads, and where each record ends."""
    folder = tmp_path_factory.mktemp("fuzz")
    with mindwatch.Monitor(folder, {"print_every": 0, "hparams": {"lr": 0.1}}) as mon:
        for step in range(1, 31):
            mon.log_step(step, loss=1.0 / step, lr=0.1, samples=8)
        mon.log_text("notes", "text", 30)
    (path,) = folder.glob("events.out.tfevents.*")
    data = path.read_bytes()
    payloads, ends, pos = [], [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        payloads.append(data[pos + 12 : pos + 12 + length])
        pos += 16 + length
        ends.append(pos)
    return data, payloads, ends


def _read(tmp_path: Path, data: bytes) -> list[bytes]:
    path = tmp_path / "events.out.tfevents.1.fuzz"
    path.write_bytes(data)
    records = list(RecordReader(path).read())
    mindwatch.read_scalars(tmp_path)  # the decoding layers survive it too
    path.unlink()
    return records


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="mindwatch")


@SETTINGS
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_truncation_returns_every_complete_record(
    tmp_path: Path, original: tuple[bytes, list[bytes], list[int]], cut: int
) -> None:
    data, payloads, ends = original
    cut = cut % (len(data) + 1)
    complete = sum(1 for end in ends if end <= cut)
    assert _read(tmp_path, data[:cut]) == payloads[:complete]


@SETTINGS
@given(flips=st.lists(st.integers(min_value=0), min_size=1, max_size=6))
def test_bit_flips_keep_every_record_before_the_damage(
    tmp_path: Path, original: tuple[bytes, list[bytes], list[int]], flips: list[int]
) -> None:
    data, payloads, ends = original
    damaged = bytearray(data)
    bits = [flip % (len(data) * 8) for flip in flips]
    for bit in bits:
        damaged[bit // 8] ^= 1 << (bit % 8)
    first_damaged_byte = min(bit // 8 for bit in bits)
    intact = sum(1 for end in ends if end <= first_damaged_byte)
    got = _read(tmp_path, bytes(damaged))
    assert got[:intact] == payloads[:intact]
    assert all(record in payloads for record in got)  # nothing damaged passes the CRCs


@SETTINGS
@given(garbage=st.binary(min_size=1, max_size=3000))
def test_garbage_appended_costs_nothing_before_it(
    tmp_path: Path, original: tuple[bytes, list[bytes], list[int]], garbage: bytes
) -> None:
    data, payloads, _ = original
    got = _read(tmp_path, data + garbage)
    assert got[: len(payloads)] == payloads


def test_huge_lengths_allocate_nothing(
    tmp_path: Path, original: tuple[bytes, list[bytes], list[int]]
) -> None:
    from mindwatch.events.crc import masked_crc32c

    data, payloads, _ = original
    bogus = b""
    for length in (1 << 62, 1 << 40, (1 << 30) + 1, 2**31 - 1):
        raw = struct.pack("<Q", length)
        bogus += raw + struct.pack("<I", masked_crc32c(raw)) + b"\x01" * 32
    tracemalloc.start()
    try:
        got = _read(tmp_path, data + bogus)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == payloads
    assert peak < 20 * 1024 * 1024
