"""EventFileWriter: format, round trip through TensorBoard's reader, and its guarantees."""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2

from mindwatch.events import EventFileWriter, LogDirError
from mindwatch.events.crc import _crc32c_py, crc32c, masked_crc32c
from mindwatch.events.encoding import (
    encode_file_version,
    encode_scalar,
    encode_scalars,
    encode_session_start,
)
from mindwatch.events.summaries import hparams_config_values, hparams_session_values
from tests.tbread import accumulator, same_float32, scalars

SPECIAL = [0.0, -0.0, 1.5, -2.25, 3.4e38, 1e-40, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("step", [0, 1, 127, 128, 12345, 2**40, -3])
def test_scalar_encoding_is_byte_identical_to_protobuf(step: int) -> None:
    for value in SPECIAL:
        expected = event_pb2.Event(
            wall_time=123.5,
            step=step,
            summary=summary_pb2.Summary(
                value=[
                    summary_pb2.Summary.Value(tag="train/loss", simple_value=value),
                    summary_pb2.Summary.Value(tag="层/范数 x", simple_value=2.0),
                ]
            ),
        ).SerializeToString()
        got = encode_scalars(123.5, step, [("train/loss", value), ("层/范数 x", 2.0)])
        assert got == expected


@pytest.mark.parametrize("step", [0, 1, 127, 128, 16383, 16384, 2**40, 2**63 - 1, -3])
@pytest.mark.parametrize("wall", [0.0, 1795988117.25])
def test_single_scalar_fast_path_is_byte_identical(step: int, wall: float) -> None:
    for value in SPECIAL[:-1]:  # NaN has many bit patterns; covered by the round trip
        expected = event_pb2.Event(
            wall_time=wall,
            step=step,
            summary=summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag="train/loss", simple_value=value)]
            ),
        ).SerializeToString()
        assert encode_scalar(wall, step, "train/loss", value) == expected


def test_values_beyond_float32_become_inf_like_protobuf() -> None:
    event = event_pb2.Event.FromString(encode_scalars(1.0, 1, [("x", 1e39), ("y", -1e300)]))
    assert [v.simple_value for v in event.summary.value] == [math.inf, -math.inf]


def test_file_version_and_session_start_match_protobuf() -> None:
    assert encode_file_version(7.25) == (
        event_pb2.Event(wall_time=7.25, file_version="brain.Event:2").SerializeToString()
    )
    assert encode_session_start(7.25, 200) == (
        event_pb2.Event(
            wall_time=7.25, step=200, session_log=event_pb2.SessionLog(status=1)
        ).SerializeToString()
    )


def test_crc_backends_agree() -> None:
    for data in [b"", b"a", b"123456789", bytes(range(256)) * 3]:
        assert crc32c(data) == _crc32c_py(data)
    assert _crc32c_py(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert masked_crc32c(b"") == 0xA282EAD8


def test_round_trip_through_event_accumulator(tmp_path: Path) -> None:
    tags = [f"train/t{i}" for i in range(5)] + ["eval/精度 top-1"]
    written: dict[str, list[tuple[int, float]]] = {t: [] for t in tags}
    with EventFileWriter(tmp_path) as writer:
        for step in range(3000):
            pairs = []
            for i, tag in enumerate(tags):
                value = SPECIAL[(step + i) % len(SPECIAL)] if step % 7 == 0 else step * 0.5 + i
                pairs.append((tag, value))
                written[tag].append((step, value))
            writer.add_scalars(step, pairs)
    read = scalars(tmp_path)
    assert sorted(read) == sorted(tags)
    for tag in tags:
        got = read[tag]
        assert [s for s, _ in got] == [s for s, _ in written[tag]]
        assert all(same_float32(a, b) for (_, a), (_, b) in zip(got, written[tag]))


def test_first_event_names_the_format(tmp_path: Path) -> None:
    with EventFileWriter(tmp_path) as writer:
        writer.add_scalar("x", 1.0, 1)
    (path,) = tmp_path.glob("events.out.tfevents.*")
    assert f".{socket.gethostname()}.{os.getpid()}." in path.name
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    first = next(iter(EventFileLoader(str(path)).Load()))
    assert first.file_version == "brain.Event:2"


def test_histograms_text_and_hparams_load_in_tensorboard(tmp_path: Path) -> None:
    import numpy as np

    data = np.random.default_rng(0).normal(size=10_000).astype(np.float32)
    data[:3] = [np.nan, np.inf, -np.inf]
    with EventFileWriter(tmp_path) as writer:
        writer.add_histogram("weights/w1", data, step=5)
        writer.add_text("config", "lr: **0.1**", step=0)
        hp = {"lr": 0.1, "layers": 2, "opt": "adam", "bf16": True}
        writer.add_values(0, hparams_config_values(hp, ["train/loss"]))
        writer.add_values(0, hparams_session_values(hp))
    acc = accumulator(tmp_path)
    (histo,) = acc.Histograms("weights/w1")
    finite = data[np.isfinite(data)]
    assert histo.step == 5
    assert histo.histogram_value.num == finite.size
    assert histo.histogram_value.min == pytest.approx(float(finite.min()))
    assert histo.histogram_value.max == pytest.approx(float(finite.max()))
    assert sum(histo.histogram_value.bucket) == finite.size
    (text,) = acc.Tensors("config")
    assert text.tensor_proto.string_val[0] == b"lr: **0.1**"
    assert set(acc.PluginTagToContent("hparams")) == {
        "_hparams_/experiment",
        "_hparams_/session_start_info",
    }


def test_rotation_keeps_every_point_in_order(tmp_path: Path) -> None:
    with EventFileWriter(tmp_path, max_file_size=4096, max_block_secs=600) as writer:
        for step in range(2000):
            writer.add_scalars(step, [("a", float(step)), ("b", -float(step))])
    files = sorted(tmp_path.glob("events.out.tfevents.*"))
    assert len(files) > 5
    assert [str(f) for f in files] == list(writer.stats.files)  # name order = writing order
    assert all(f.stat().st_size < 4096 + 200 for f in files)
    read = scalars(tmp_path)
    assert read["a"] == [(s, float(s)) for s in range(2000)]
    assert read["b"] == [(s, -float(s)) for s in range(2000)]


def test_purge_step_hides_points_of_the_crashed_attempt(tmp_path: Path) -> None:
    with EventFileWriter(tmp_path) as first:
        for step in range(1, 251):
            first.add_scalar("train/loss", 1.0, step)
    with EventFileWriter(tmp_path, purge_step=201) as resumed:
        for step in range(201, 301):
            resumed.add_scalar("train/loss", 2.0, step)
    read = scalars(tmp_path)["train/loss"]
    assert [s for s, _ in read] == list(range(1, 301))
    assert {v for s, v in read if s > 200} == {2.0}


def test_flush_is_a_barrier(tmp_path: Path) -> None:
    writer = EventFileWriter(tmp_path, flush_secs=3600)
    for step in range(100):
        writer.add_scalar("x", float(step), step)
    assert writer.flush(timeout=30)
    assert len(scalars(tmp_path)["x"]) == 100  # on disk while the writer is still open
    writer.close()


def test_data_reaches_the_os_within_flush_secs(tmp_path: Path) -> None:
    import time

    writer = EventFileWriter(tmp_path, flush_secs=0.2)
    writer.add_scalar("x", 1.0, 1)
    deadline = time.monotonic() + 20
    while "x" not in scalars(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scalars(tmp_path)["x"] == [(1, 1.0)]
    writer.close()


def test_a_full_queue_makes_the_caller_wait_for_room_not_drop(tmp_path: Path) -> None:
    # A burst far faster than the worker: back-pressure, every point kept.
    with EventFileWriter(tmp_path, max_queue=100, max_block_secs=600) as writer:
        for step in range(20_000):
            writer.add_scalar("x", float(step), step)
    assert writer.stats.points_dropped == 0
    assert [s for s, _ in scalars(tmp_path)["x"]] == list(range(20_000))


def test_a_stalled_disk_costs_one_bounded_wait_then_drops_and_counts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    writer = EventFileWriter(tmp_path, max_queue=10, max_block_secs=0.2)
    disk = threading.Event()  # a hung network file system: writes block until set
    real_write = writer._worker.events.write

    in_write = threading.Event()

    def hung_write(records: Any) -> None:
        in_write.set()
        disk.wait(60)
        real_write(records)

    monkeypatch.setattr(writer._worker.events, "write", hung_write)
    writer.add_scalars(0, [("x", 1.0), ("y", 2.0)])
    writer._handoff.wake()
    assert in_write.wait(30)  # the worker is now stuck in a write
    waits = []
    real_wait = writer._handoff._room.wait
    monkeypatch.setattr(
        writer._handoff._room, "wait", lambda t=None: waits.append(t) or real_wait(t)
    )
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        for step in range(1, 100):
            writer.add_scalars(step, [("x", 1.0), ("y", 2.0)])
        assert writer._handoff.stalled
        assert len(waits) == 1  # one bounded wait, then immediate drops
        disk.set()
        writer.close()
    stats = writer.stats
    written = len(scalars(tmp_path).get("x", []))
    assert stats.points_dropped > 0
    assert written * 2 + stats.points_dropped == 200
    drops = [r.getMessage() for r in caplog.records if "dropping new points" in r.getMessage()]
    assert len(drops) == 1
    assert "max_queue, max_block_secs" in drops[0]
    assert (
        f"mindwatch: {stats.points_dropped} points were not written to {tmp_path} "
        f"({stats.write_errors} write errors; see the first warning above for the reason)"
    ) in [r.getMessage() for r in caplog.records]


def test_writing_after_close_is_counted_not_raised(tmp_path: Path) -> None:
    writer = EventFileWriter(tmp_path)
    writer.close()
    writer.close()  # idempotent
    writer.add_scalar("x", 1.0, 1)
    assert writer.stats.points_dropped == 1


def test_relative_logdir_is_fixed_at_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    writer = EventFileWriter("runs/a")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    writer.add_scalar("x", 1.0, 1)
    writer.close()
    assert writer.logdir == tmp_path / "runs" / "a"
    assert scalars(tmp_path / "runs" / "a")["x"] == [(1, 1.0)]
    assert not (elsewhere / "runs").exists()


def test_non_ascii_path_with_spaces(tmp_path: Path) -> None:
    logdir = tmp_path / "我的 实验" / "运行 1"
    with EventFileWriter(logdir) as writer:
        writer.add_scalar("train/loss", 0.5, 3)
    assert scalars(logdir)["train/loss"] == [(3, 0.5)]


def test_unwritable_logdir_names_the_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    with pytest.raises(LogDirError) as info:
        EventFileWriter(blocker / "run")
    # The folder, the reason as the OS words it (once, not errno and path again), the fix.
    assert str(info.value) == (
        f"cannot create log folder '{blocker / 'run'}': Not a directory. Choose a folder "
        "you can write to (the logdir / summary_dir setting), or create it first."
    )


def test_read_only_filesystem_is_reported_before_writing() -> None:
    # /proc refuses new files even for root, unlike permission bits.
    with pytest.raises(LogDirError, match="/proc/mindwatch-test"):
        EventFileWriter("/proc/mindwatch-test")


def test_an_item_that_cannot_be_encoded_is_one_warning_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mindwatch"), EventFileWriter(tmp_path) as writer:
        for step in range(5):
            writer.add_histogram("bad", ["a", "b"], step)  # not numbers
            writer.add_scalar("good", 1.0, step)
    warnings = [r for r in caplog.records if "could not encode" in r.getMessage()]
    assert len(warnings) == 1
    assert writer.stats.points_dropped == 5
    assert len(scalars(tmp_path)["good"]) == 5


def test_the_crc_table_is_crc32cs() -> None:
    # The pure-Python fallback and the reader's bulk checks use this table; it is built
    # when the module is imported, so build it again here to test the builder.
    from mindwatch.events.crc import CRC32C_TABLE, _make_table

    table = _make_table()
    assert table == list(CRC32C_TABLE)
    assert (table[0], table[1], table[128], table[255]) == (
        0,
        0xF26B8303,
        0x82F63B78,
        0xAD7D5351,
    )


@pytest.mark.parametrize("max_queue", [1, 1000])  # 1: all but the first add take the slow path
def test_the_callers_wall_time_is_kept_else_the_clock(tmp_path: Path, max_queue: int) -> None:
    import time

    before = time.time()
    with EventFileWriter(tmp_path, max_queue=max_queue) as writer:
        writer.add_scalars(1, [("a", 1.0)], wall_time=1_600_000_000.5)
        writer.add_scalar("b", 2.0, 1, wall_time=1_600_000_001.5)
        writer.add_scalars(2, [("a", 3.0)])
        writer.add_scalar("b", 4.0, 2)
    after = time.time()
    acc = accumulator(tmp_path)
    walls = {tag: [e.wall_time for e in acc.Scalars(tag)] for tag in ("a", "b")}
    assert walls["a"][0] == 1_600_000_000.5
    assert walls["b"][0] == 1_600_000_001.5
    assert before <= walls["a"][1] <= after
    assert before <= walls["b"][1] <= after


@pytest.mark.parametrize("wall", [0.0, 1_600_000_000.5])  # 0: the epoch, not "now"
def test_the_callers_wall_time_is_kept_on_the_hand_offs_slow_path(
    tmp_path: Path, wall: float
) -> None:
    # With max_queue=1 an add that finds the last one still queued (the worker sleeps
    # until its period or a wake-up) goes through the hand-off's put(), the slow path;
    # the first add of all finds the queue empty and appends. A spy on put() records
    # the adds that took it, so the test knows the slow path ran, whichever adds it was.
    through_put: list[Any] = []
    with EventFileWriter(tmp_path, max_queue=1, flush_secs=600) as writer:
        handoff = writer._handoff
        put = handoff.put

        def spy(entry: Any) -> None:
            through_put.append(entry)
            put(entry)

        handoff.put = spy  # type: ignore[method-assign]
        for step in range(1, 21):
            writer.add_scalars(step, [("a", float(step))], wall_time=wall)
    assert through_put, "no add took the hand-off's slow path"
    events = accumulator(tmp_path).Scalars("a")
    assert [(e.step, e.wall_time) for e in events] == [(s, wall) for s in range(1, 21)]


def test_a_histogram_is_of_the_values_when_logged_not_after(tmp_path: Path) -> None:
    import numpy as np

    values = np.arange(100, dtype=np.float64)
    with EventFileWriter(tmp_path) as writer:
        writer.add_histogram("h", values, 1)
        values[:] = 1e6  # the caller reuses its buffer before the worker buckets it
    (event,) = accumulator(tmp_path).Histograms("h")
    assert event.histogram_value.max == 99.0
    assert event.histogram_value.num == 100


def test_bad_writer_settings_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush_secs"):
        EventFileWriter(tmp_path, flush_secs=0)
    with pytest.raises(ValueError, match="max_queue must be >= 1, got 0"):
        EventFileWriter(tmp_path, max_queue=0)
    with EventFileWriter(tmp_path / "one", max_queue=1) as writer:  # the smallest queue works
        for step in range(20):
            writer.add_scalar("x", float(step), step)
    assert [v for _, v in scalars(tmp_path / "one")["x"]] == [float(s) for s in range(20)]
    with pytest.raises(LogDirError, match="the log folder is empty; pass one"):
        EventFileWriter("")


def test_every_add_after_close_is_counted_not_queued(tmp_path: Path) -> None:
    # Closed, the hot path's limit is 0: each add must take the hand-off's put(), which
    # drops and counts, not append to a queue no worker will read again.
    writer = EventFileWriter(tmp_path)
    writer.close()
    writer.add_scalar("x", 1.0, 1)
    writer.add_scalars(2, [("x", 2.0), ("y", 3.0), ("z", 4.0)])
    writer.add_scalars(3, (("x", 5.0),), wall_time=1.0)
    assert writer.stats.points_dropped == 5
    assert len(writer._queue) == 0


@pytest.mark.parametrize(
    ("logdir", "said"),
    [
        ("s3://bucket/run", "the log folder 's3://bucket/run' is a URL (s3://)"),
        ("HDFS://namenode/run", "the log folder 'HDFS://namenode/run' is a URL (hdfs://)"),
        ("file://otherhost/run", "the log folder 'file://otherhost/run' is a file:// URL on"),
    ],
)
def test_a_logdir_url_of_a_remote_store_is_refused_saying_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logdir: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LogDirError) as info:
        EventFileWriter(logdir)
    assert str(info.value).startswith(said)
    assert list(tmp_path.iterdir()) == []  # no local folder named 's3:' or 'file:'


class Boom(BaseException):
    """What no ``except Exception`` in the worker catches."""


def test_a_worker_that_dies_says_what_it_lost_once_and_counts_what_follows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def boom() -> list[bytes]:
        raise Boom("the encoder blew up")

    caplog.set_level(logging.WARNING, logger="mindwatch")
    writer = EventFileWriter(tmp_path, flush_secs=600)  # the worker wakes when asked
    writer.add_scalar("x", 1.0, 1)
    writer.add_scalar("x", 2.0, 2)
    writer.add_values_later(3, boom)  # the two scalars are encoded, not written yet
    writer._handoff.wake()
    writer._handoff._thread.join(30)  # it ends once the died hook has warned
    assert not writer._handoff.running
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    assert warnings == [
        f"mindwatch: the event writer for {tmp_path} stopped on an unexpected error "
        "(Boom: the encoder blew up); 3 points logged but not written are lost, and "
        "points logged from now on are dropped and counted (points_dropped and "
        "write_errors in run.json). Training continues."
    ]
    writer.add_scalar("x", 4.0, 4)
    writer.add_scalars(5, [("x", 5.0), ("y", 6.0)])
    writer.close()
    assert (writer.stats.points_dropped, writer.stats.write_errors) == (6, 1)
    assert "x" not in scalars(tmp_path)


def test_a_close_that_times_out_on_a_hung_disk_says_what_may_be_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = EventFileWriter(tmp_path, flush_secs=600)
    disk = threading.Event()  # a hung network file system: writes block until set
    in_write = threading.Event()
    real_write = writer._worker.events.write

    def hung_write(records: Any) -> None:
        in_write.set()
        disk.wait(60)
        real_write(records)

    monkeypatch.setattr(writer._worker.events, "write", hung_write)
    writer.add_scalar("x", 1.0, 1)
    writer._handoff.wake()
    assert in_write.wait(30)  # the worker is stuck writing step 1
    for step in range(2, 5):
        writer.add_scalar("x", float(step), step)
    assert not writer.flush(timeout=0.05)  # a barrier queued too: not an item to lose
    caplog.set_level(logging.WARNING, logger="mindwatch")
    try:
        writer.close(timeout=0.2)
    finally:
        disk.set()
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    assert warnings == [
        f"mindwatch: the writer for {tmp_path} did not finish within 0.2 s (is the disk "
        "hung?); 3 queued items may not reach it"
    ]
    writer.close()  # the disk is back: everything reaches it after all
    assert scalars(tmp_path)["x"] == [(s, float(s)) for s in range(1, 5)]
