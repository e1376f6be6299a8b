"""The reader against TensorBoard's own EventAccumulator, on files from every writer.

Files come from mindwatch, torch's and tensorboardX's ``SummaryWriter`` and
TensorBoard's own writer; the reader must return exactly what ``EventAccumulator``
(keeping every point) returns, purges included.
"""

from __future__ import annotations

import logging
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import mindwatch
from mindwatch.events.crc import masked_crc32c
from mindwatch.events.reader import (
    Histogram,
    HParams,
    Purge,
    RecordReader,
    RunReader,
    Text,
    without_purged,
)
from tests.tbread import accumulator

QUIET = {"print_every": 0, "flush_secs": 0.2}


def ea_scalars(folder: Path) -> dict[str, list[tuple[int, float, float]]]:
    acc = accumulator(folder)
    return {
        tag: [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)]
        for tag in acc.Tags()["scalars"]
    }


def our_scalars(logdir: Path, run: str = ".") -> dict[str, list[tuple[int, float, float]]]:
    frame = mindwatch.read_scalars(logdir)
    frame = frame[frame["run"] == run]
    out: dict[str, list[tuple[int, float, float]]] = {}
    for tag, step, wall, value in zip(
        frame["tag"], frame["step"], frame["wall_time"], frame["value"]
    ):
        out.setdefault(tag, []).append((int(step), float(wall), float(value)))
    return out


def same(
    a: dict[str, list[tuple[int, float, float]]], b: dict[str, list[tuple[int, float, float]]]
) -> bool:
    """Equal point for point, NaN equal to NaN."""
    if a.keys() != b.keys():
        return False
    for tag, points in a.items():
        if len(points) != len(b[tag]):
            return False
        for (s1, w1, v1), (s2, w2, v2) in zip(points, b[tag]):
            if s1 != s2 or w1 != w2 or not (v1 == v2 or (math.isnan(v1) and math.isnan(v2))):
                return False
    return True


def test_mindwatch_files_with_a_resume_read_as_eventaccumulator_reads_them(
    tmp_path: Path,
) -> None:
    with mindwatch.Monitor(tmp_path, QUIET) as mon:
        for step in range(1, 301):
            loss = math.nan if step == 77 else (math.inf if step == 78 else 1.0 / step)
            mon.log_step(step, loss=loss, lr=1e-3, samples=8, accuracy=step / 300)
        mon.log_histogram("parameters/w", np.arange(100.0), 300)
    # A crashed attempt resumed from step 201 in a new process: a purge marker at 201.
    with mindwatch.Monitor(tmp_path, QUIET, resume_step=201) as mon:
        for step in range(201, 251):
            mon.log_step(step, loss=2.0, lr=1e-3)
    ours, theirs = our_scalars(tmp_path), ea_scalars(tmp_path)
    assert same(ours, theirs)
    assert [s for s, _, _ in ours["train/loss"]] == list(range(1, 251))
    assert len(ours["train/accuracy"]) == 200  # the first attempt's 201-300 are purged


def test_torch_summarywriter_files_with_purge_step(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path)) as writer:
        for step in range(100):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
            writer.add_scalars("group", {"a": step, "b": -step}, step)  # sub-runs
        writer.add_histogram("weights", np.random.default_rng(0).normal(size=500), 99)
    with SummaryWriter(str(tmp_path), purge_step=50) as writer:
        for step in range(50, 80):
            writer.add_scalar("loss", 5.0, step)
    assert same(our_scalars(tmp_path), ea_scalars(tmp_path))
    assert [s for s, _, _ in our_scalars(tmp_path)["loss"]] == list(range(80))
    sub_runs = {r for r in mindwatch.read_scalars(tmp_path)["run"] if r != "."}
    assert sub_runs == {"group_a", "group_b"}
    for run in sub_runs:
        assert same(our_scalars(tmp_path, run), ea_scalars(tmp_path / run))
    check_histograms(tmp_path)
    assert not accumulator(tmp_path).Histograms("weights")  # step 99: voided by the purge


def test_tensorboardx_files_with_histograms(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tmp_path)) as writer:
        for step in range(50):
            writer.add_scalar("train/loss", 1.0 / (step + 1), step)
            writer.add_scalar("train/lr", 0.1, step)
            if step % 10 == 0:
                writer.add_histogram("w", np.random.default_rng(step).normal(size=200), step)
    assert same(our_scalars(tmp_path), ea_scalars(tmp_path))
    check_histograms(tmp_path)


def check_histograms(folder: Path) -> None:
    acc = accumulator(folder)
    ours: dict[str, list[Histogram]] = {}
    for item in without_purged(RunReader(folder).read()):
        if isinstance(item, Histogram):
            ours.setdefault(item.tag, []).append(item)
    # (EventAccumulator keeps listing a tag whose points were all purged)
    assert set(ours) == {t for t in acc.Tags()["histograms"] if acc.Histograms(t)}
    for tag, items in ours.items():
        theirs = acc.Histograms(tag)
        assert [(h.step, h.wall_time) for h in items] == [(e.step, e.wall_time) for e in theirs]
        for h, e in zip(items, theirs):
            v = e.histogram_value
            assert (h.min, h.max, h.num, h.sum, h.sum_squares) == (
                v.min,
                v.max,
                v.num,
                v.sum,
                v.sum_squares,
            )
            assert list(h.bucket_limit) == list(v.bucket_limit)
            assert list(h.bucket) == list(v.bucket)


def test_tensorboards_own_writer_with_scalars_as_tensors(tmp_path: Path) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for step in range(20):
        tensor_summary = scalar_pb("v2/loss", np.float32(0.5 / (step + 1)))
        writer.add_event(
            event_pb2.Event(wall_time=1000.0 + step, step=step, summary=tensor_summary)
        )
        simple = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="v1/acc", simple_value=step / 20)]
        )
        writer.add_event(event_pb2.Event(wall_time=1000.5 + step, step=step, summary=simple))
    writer.close()
    acc = accumulator(tmp_path)
    from tensorboard.util import tensor_util

    expected = [
        (e.step, e.wall_time, float(tensor_util.make_ndarray(e.tensor_proto)))
        for e in acc.Tensors("v2/loss")
    ]
    ours = our_scalars(tmp_path)
    assert ours["v2/loss"] == expected
    assert same({"v1/acc": ours["v1/acc"]}, ea_scalars(tmp_path))


def test_text_and_hparams_through_the_streaming_api(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {**QUIET, "hparams": {"lr": 0.1, "opt": "adam"}}) as mon:
        mon.log_step(1, loss=1.0)
        mon.log_text("notes", "hello <b>", 1)
    items = list(RunReader(tmp_path).read())
    texts = {i.tag: i.text for i in items if isinstance(i, Text)}
    assert texts["notes"] == "hello <b>"
    assert "mindwatch/config" in texts
    (hparams,) = [i for i in items if isinstance(i, HParams)]
    assert hparams.hparams == {"lr": 0.1, "opt": "adam"}
    assert any(isinstance(i, Purge) and i.step == 0 for i in items)


def _records(path: Path) -> list[tuple[int, int]]:
    """(offset, total length) of each record of a file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append((pos, 16 + length))
        pos += 16 + length
    return out


def _one_file(tmp_path: Path, steps: int = 20) -> Path:
    with mindwatch.Monitor(tmp_path / "run", QUIET) as mon:
        for step in range(1, steps + 1):
            mon.log_step(step, loss=float(step))
    (path,) = (tmp_path / "run").glob("events.out.tfevents.*")
    return path


def _losses(folder: Path) -> list[int]:
    frame = mindwatch.read_scalars(folder)
    return frame[frame["tag"] == "train/loss"]["step"].tolist()


def test_an_incomplete_last_record_is_read_once_it_is_complete(tmp_path: Path) -> None:
    path = _one_file(tmp_path)
    whole = path.read_bytes()
    offset, length = _records(path)[-1]
    path.write_bytes(whole[: offset + length - 3])  # the writer is mid-record
    reader = RunReader(path.parent)
    first = [i.step for i in reader.read() if getattr(i, "tag", None) == "train/loss"]
    assert first == list(range(1, 20))
    assert reader.corrupt_records == 0  # not damage: just not written yet
    path.write_bytes(whole)  # the rest arrives
    assert [i.step for i in reader.read() if getattr(i, "tag", None) == "train/loss"] == [20]
    assert list(reader.read()) == []  # nothing new


def test_a_new_file_and_appended_records_are_read_incrementally(tmp_path: Path) -> None:
    run = tmp_path / "run"
    reader = RunReader(run)
    assert list(reader.read()) == []
    with mindwatch.Monitor(run, QUIET) as mon:
        mon.log_step(1, loss=1.0)
        mon.flush()
        assert [i.step for i in reader.read() if getattr(i, "tag", "") == "train/loss"] == [1]
        mon.log_step(2, loss=2.0)
        mon.flush()
        assert [i.step for i in reader.read() if getattr(i, "tag", "") == "train/loss"] == [2]
    saved = reader.offsets
    again = RunReader(run)
    again.seek(saved)
    assert [i for i in again.read() if getattr(i, "tag", "") == "train/loss"] == []


def test_a_damaged_record_is_skipped_with_a_warning_naming_file_and_offset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _one_file(tmp_path)
    offset, _ = _records(path)[5]
    data = bytearray(path.read_bytes())
    data[offset + 14] ^= 0xFF  # a bit error in the event's bytes
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="mindwatch")
    steps = _losses(path.parent)
    assert len(steps) == 19  # one step lost, all others read
    (message,) = [r.getMessage() for r in caplog.records if "CRC" in r.getMessage()]
    assert str(path) in message
    assert f"at byte offset {offset}" in message


def test_a_damaged_length_resyncs_and_an_absurd_one_allocates_nothing(tmp_path: Path) -> None:
    path = _one_file(tmp_path)
    records = _records(path)
    data = bytearray(path.read_bytes())
    offset, _ = records[4]
    data[offset + 2] ^= 0x40  # the length field: its CRC no longer matches
    path.write_bytes(bytes(data))
    assert len(_losses(path.parent)) == 19
    # A length of 2**60 with a *valid* header CRC (deliberately crafted).
    raw = struct.pack("<Q", 1 << 60)
    bogus = raw + struct.pack("<I", masked_crc32c(raw))
    path.write_bytes(path.read_bytes() + bogus + b"\0" * 64)
    reader = RecordReader(path)
    assert len(list(reader.read())) == len(records) - 1
    assert reader.stats.corrupt >= 2


def test_read_scalars_columns_filters_and_errors(tmp_path: Path) -> None:
    for name in ("a", "b"):
        with mindwatch.Monitor(tmp_path / name, QUIET) as mon:
            mon.log_step(1, loss=1.0, lr=0.1)
    frame = mindwatch.read_scalars(tmp_path)
    assert list(frame.columns) == ["run", "tag", "step", "wall_time", "value"]
    assert str(frame["step"].dtype) == "int64"
    assert set(frame["run"]) == {"a", "b"}
    only = mindwatch.read_scalars(tmp_path, runs=["b"], tags=["train/loss"])
    assert only[["run", "tag", "step"]].values.tolist() == [["b", "train/loss", 1]]
    (tmp_path / "empty").mkdir()
    assert mindwatch.read_scalars(tmp_path / "empty").empty
    with pytest.raises(FileNotFoundError, match="no such folder"):
        mindwatch.read_scalars(tmp_path / "missing")
    shutil.rmtree(tmp_path / "a")
    assert set(mindwatch.read_scalars(tmp_path)["run"]) == {"b"}


def test_the_batched_decoder_matches_eventaccumulator_on_unusual_steps(tmp_path: Path) -> None:
    """Long runs of same-shaped events take the numpy path: negative and huge steps
    (10- and 6-byte varints), a tag set that changes midway, one odd event between."""
    with mindwatch.Monitor(tmp_path, QUIET) as mon:
        for i in range(40):
            mon.log_scalars(-(2**40) + i, {"a": float(i), "b": -float(i)})
        for i in range(40):
            mon.log_scalars(2**40 + i, {"a": float(i), "c": 0.5})
            if i == 20:
                mon.log_scalars(2**40 + i, {"a": 1e30, "bb": math.nan, "ccc": 1.0})
    assert same(our_scalars(tmp_path), ea_scalars(tmp_path))
