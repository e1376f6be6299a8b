"""Issue 20, property tests: event files from three writers, damaged every way hypothesis
finds, read by every mindwatch reader and by TensorBoard's own EventAccumulator.

Files come from mindwatch's ``Monitor`` (with its ``run.json``), torch's and
tensorboardX's ``SummaryWriter`` (another tool: no ``run.json``). The damage: truncation
at any byte, zero tails of any length (appended, or over the end as power loss leaves
them), garbage of any bytes inserted or appended, a region zeroed in the middle,
records duplicated; and step sequences that go back or repeat. For each:

* :class:`~mindwatch.events.reader.RecordReader` returns exactly the records whose bytes
  survived, in order (computed from the damage, not from a reader);
* what ``read_scalars`` reads of the file up to its first damage is exactly what
  EventAccumulator returns for the whole damaged file: TensorBoard's reader stops at
  the first damage, mindwatch resyncs and also returns the intact records after it (a
  documented superset, checked by the record comparison above);
* the watcher's incremental ``RunReader``, fed the file in pieces, returns what one read
  of the whole file returns, and ``Watcher.poll`` never raises;
* ``doctor`` reports a finding (exit status 1) whenever the file holds fewer records
  than were written. For another tool's file, a cut exactly between two records is
  invisible (nothing says how long the file was); a mindwatch file's ``run.json``
  records its size, so there every loss shows.

Nothing may raise or loop (each test has a 120 s timeout). Examples: 30 per damage
family, derandomized and without a database so CI is reproducible; each test runs in a
few seconds on 2 cores (each example writes and reads small files ~10 times and runs
EventAccumulator and doctor once). The families together cover each writer and kind of
damage many times; the boundaries (byte 0, the last byte, record edges) are found by
hypothesis's own bias toward small and extreme integers.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import mindwatch
from mindwatch.events.reader import RecordReader, RunReader, Scalar
from mindwatch.tools.doctor import diagnose
from mindwatch.tools.watch import Watcher
from tests.tbread import scalars

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
STEPS = 24


@dataclass(frozen=True)
class Original:
    """An undamaged event file: its bytes, its records (offset, length), the run.json
    beside it (None for another tool's file)."""

    writer: str
    name: str
    data: bytes
    records: tuple[tuple[int, int], ...]
    run_json: bytes | None

    def payload(self, index: int) -> bytes:
        offset, length = self.records[index]
        return self.data[offset + 12 : offset + length - 4]


def _layout(data: bytes) -> tuple[tuple[int, int], ...]:
    records, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        records.append((pos, length + 16))
        pos += length + 16
    return tuple(records)


def _write(writer: str, folder: Path, steps: list[int]) -> None:
    if writer == "mindwatch":
        config = {"print_every": 0, "alerts": {"enabled": False}, "hparams": {"lr": 0.1}}
        with mindwatch.Monitor(folder, config) as mon:
            for step in steps:
                mon.log_step(step, loss=1.0 / (abs(step) + 1), lr=0.1)
                if step % 8 == 0:
                    mon.log_eval(step, loss=2.0 / (abs(step) + 1))
        return
    if writer == "torch":
        from torch.utils.tensorboard import SummaryWriter
    else:
        from tensorboardX import SummaryWriter  # type: ignore[no-redef]
    with SummaryWriter(str(folder)) as summary:
        for step in steps:
            summary.add_scalar("loss", 1.0 / (abs(step) + 1), step)
            summary.add_scalar("lr", 0.1, step)


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> list[Original]:
    made = []
    for writer in ("mindwatch", "torch", "tensorboardX"):
        folder = tmp_path_factory.mktemp(writer)
        _write(writer, folder, list(range(1, STEPS + 1)))
        (path,) = folder.glob("*tfevents*")
        data = path.read_bytes()
        run_json = (folder / "run.json").read_bytes() if writer == "mindwatch" else None
        made.append(Original(writer, path.name, data, _layout(data), run_json))
    return made


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="mindwatch")
    caplog.set_level(logging.CRITICAL, logger="tensorboard")


@dataclass(frozen=True)
class Damaged:
    data: bytes
    intact: list[bytes]  # the records a reader must return, in order
    detectable: bool  # whether a loss of records can be told from the file alone


def _survivors(original: Original, damaged: bytes, shift_from: int, shift: int) -> list[bytes]:
    """The original records whose bytes are unchanged in ``damaged`` (records starting at
    or after ``shift_from`` moved by ``shift``; one spanning it is broken)."""
    kept = []
    for offset, length in original.records:
        if offset < shift_from < offset + length:
            continue
        at = offset + shift if offset >= shift_from else offset
        if damaged[at : at + length] == original.data[offset : offset + length]:
            kept.append(original.data[offset + 12 : offset + length - 4])
    return kept


def _check(original: Original, damaged: Damaged, pieces: list[int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root, "run")
        folder.mkdir()
        path = folder / original.name
        path.write_bytes(damaged.data)
        if original.run_json is not None:
            (folder / "run.json").write_bytes(original.run_json)
        else:  # another tool's file, long unchanged: settled (not being written)
            old = time.time() - 3600
            os.utime(path, (old, old))

        reader = RecordReader(path)
        assert list(reader.read()) == damaged.intact
        damage = reader.stats.corrupt_offsets

        # TensorBoard reads up to the first damage; so must mindwatch read that prefix.
        prefix = Path(root, "prefix")
        prefix.mkdir()
        (prefix / original.name).write_bytes(damaged.data[: damage[0] if damage else None])
        assert _frame_points(prefix) == scalars(folder)
        mindwatch.read_scalars(folder)  # and the whole file, resyncing, without raising

        # The watcher's incremental read, fed the file in pieces, reads what one read does.
        whole = [_point(i) for i in RunReader(folder).read() if isinstance(i, Scalar)]
        growing = Path(root, "growing")
        growing.mkdir()
        incremental = RunReader(growing)
        seen: list[tuple[str, int, float]] = []
        cuts = sorted({min(p, len(damaged.data)) for p in pieces} | {len(damaged.data)})
        for cut in cuts:
            (growing / original.name).write_bytes(damaged.data[:cut])
            seen += [_point(i) for i in incremental.read() if isinstance(i, Scalar)]
        assert seen == whole
        Watcher(Path(root)).poll()

        written = len(original.records)
        event(f"{original.writer}: {'damage' if damage else 'no damage region'}")
        found = diagnose(folder)
        if len(set(damaged.intact)) < written and damaged.detectable:
            event("records lost: doctor checked")
            findings = [f for f in found if f.verdict in ("warning", "problem")]
            assert findings, "doctor found nothing wrong"
            assert any(original.name in f.message for f in findings), findings
        if not damage:
            # A duplicated record repeats its steps: when TensorBoard's own reader shows
            # a tag going back or repeating, doctor says so (and only then).
            folds = any(
                any(b <= a for a, b in zip(steps, steps[1:]))
                for steps in ([s for s, _ in points] for points in scalars(folder).values())
            )
            event(f"steps fold back: {folds}")
            order = [f for f in found if "with no restart marker" in f.message]
            assert len(order) == folds, order


def _point(item: Scalar) -> tuple[str, int, float]:
    return item.tag, item.step, item.value


def _frame_points(folder: Path) -> dict[str, list[tuple[int, float]]]:
    frame = mindwatch.read_scalars(folder)
    out: dict[str, list[tuple[int, float]]] = {}
    for tag, step, value in zip(frame["tag"], frame["step"], frame["value"]):
        out.setdefault(str(tag), []).append((int(step), float(value)))
    return out


WRITER = st.integers(min_value=0, max_value=2)  # index into originals
PIECES = st.lists(st.integers(min_value=0, max_value=20_000), max_size=4)


@st.composite
def cut_or_zero_tail(draw: Any, original: Original) -> Damaged:
    """Truncated at any byte; zeros appended; or the end zeroed (size kept: power loss)."""
    data = original.data
    kind = draw(st.sampled_from(["truncate", "append zeros", "zero the end"]))
    if kind == "truncate":
        cut = draw(st.integers(min_value=0, max_value=len(data)))
        boundary = cut in {o for o, _ in original.records} | {len(data)}
        damaged = data[:cut]
        return Damaged(
            damaged,
            _survivors(original, damaged, len(data), 0),
            detectable=original.run_json is not None or not boundary,
        )
    zeros = draw(st.integers(min_value=1, max_value=len(data)))
    if kind == "append zeros":
        damaged = data + bytes(zeros)
    else:
        damaged = data[: len(data) - zeros] + bytes(zeros)
    return Damaged(damaged, _survivors(original, damaged, len(damaged), 0), detectable=True)


@st.composite
def garbage_or_zeroed_middle(draw: Any, original: Original) -> Damaged:
    """Any bytes inserted anywhere (or appended), or a region zeroed in the middle."""
    data = original.data
    if draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(data)))
        garbage = draw(st.binary(min_size=1, max_size=300))
        damaged = data[:at] + garbage + data[at:]
        return Damaged(damaged, _survivors(original, damaged, at, len(garbage)), detectable=True)
    start = draw(st.integers(min_value=0, max_value=len(data) - 1))
    length = draw(st.integers(min_value=1, max_value=len(data) - start))
    damaged = data[:start] + bytes(length) + data[start + length :]
    return Damaged(damaged, _survivors(original, damaged, len(data), 0), detectable=True)


@st.composite
def duplicated_records(draw: Any, original: Original) -> Damaged:
    """Records copied again right after themselves (a retried write, a bad merge)."""
    copies = draw(
        st.lists(st.integers(min_value=0, max_value=len(original.records) - 1), max_size=5)
    )
    parts, intact = [], []
    for index, (offset, length) in enumerate(original.records):
        times = 1 + copies.count(index)
        parts += [original.data[offset : offset + length]] * times
        intact += [original.payload(index)] * times
    return Damaged(b"".join(parts), intact, detectable=True)


@pytest.mark.timeout(120)
@SETTINGS
@given(pick=WRITER, pieces=PIECES, data=st.data())
def test_cut_and_zero_tails(
    originals: list[Original], pick: int, pieces: list[int], data: st.DataObject
) -> None:
    original = originals[pick]
    _check(original, data.draw(cut_or_zero_tail(original)), pieces)


@pytest.mark.timeout(120)
@SETTINGS
@given(pick=WRITER, pieces=PIECES, data=st.data())
def test_garbage_and_zeroed_regions(
    originals: list[Original], pick: int, pieces: list[int], data: st.DataObject
) -> None:
    original = originals[pick]
    _check(original, data.draw(garbage_or_zeroed_middle(original)), pieces)


@pytest.mark.timeout(120)
@SETTINGS
@given(pick=WRITER, pieces=PIECES, data=st.data())
def test_duplicated_records(
    originals: list[Original], pick: int, pieces: list[int], data: st.DataObject
) -> None:
    original = originals[pick]
    _check(original, data.draw(duplicated_records(original)), pieces)


def _goes_back(steps: list[int]) -> bool:
    return any(b <= a for a, b in zip(_running_max(steps), steps[1:]))


def _running_max(steps: list[int]) -> Iterator[int]:
    highest = None
    for step in steps:
        highest = step if highest is None else max(highest, step)
        yield highest


@pytest.mark.timeout(120)
@settings(SETTINGS, max_examples=30)
@given(
    writer=st.sampled_from(["mindwatch", "torch", "tensorboardX"]),
    steps=st.lists(st.integers(min_value=-5, max_value=40), min_size=1, max_size=30),
)
def test_steps_going_back_or_repeating(
    caplog: pytest.LogCaptureFixture, writer: str, steps: list[int]
) -> None:
    """Steps in any order: every reader agrees with EventAccumulator (nothing dropped),
    and doctor and read_scalars say so exactly when a tag goes back or repeats.
    (30 examples: each writes a file with a real writer, the slowest part.)"""
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root, "run")
        _write(writer, folder, steps)
        caplog.set_level(logging.WARNING, logger="mindwatch.events.reader")
        caplog.clear()
        assert _frame_points(folder) == scalars(folder)
        said = [r for r in caplog.records if r.name == "mindwatch.events.reader"]
        assert len(said) == (1 if _goes_back(steps) else 0)
        order = [f for f in diagnose(folder) if "with no restart marker" in f.message]
        assert len(order) == (1 if _goes_back(steps) else 0), order
        shutil.rmtree(folder)
