"""MindSpore's own SummaryCollector output, converted, read back by TensorBoard.

The job (scripts/summary_job.py) trains for real with SummaryCollector and the summary
ops; MindSpore's own protobuf classes (``mindspore.train.summary_pb2``) are the
independent reader of its files, TensorBoard's EventAccumulator and a live
``tensorboard`` server the independent readers of ours.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from mindspore.train import anf_ir_pb2, lineage_pb2, summary_pb2

from mindwatch.cli import main
from mindwatch.events.encoding import varint
from mindwatch.events.protowire import WireError, fields
from mindwatch.events.records import frame
from mindwatch.mssummary.format import SummaryFileReader, tensor_array
from mindwatch.mssummary.graph import graph_def_bytes
from mindwatch.tools.convert import convert_summaries
from tests.ports import free_port
from tests.tbread import accumulator, same_float32

pytestmark = pytest.mark.slow

JOB = Path(__file__).parent / "scripts" / "summary_job.py"
TENSORBOARD = str(Path(sys.executable).with_name("tensorboard"))


@dataclass
class Job:
    folder: Path
    losses: dict[int, float]
    events: list[Any]  # summary_pb2.Event, decoded by MindSpore's own classes

    @property
    def ms_file(self) -> Path:
        (path,) = self.folder.glob("*_MS")
        return path

    def values(self, tag: str) -> list[tuple[int, Any]]:
        return [
            (e.step, v)
            for e in self.events
            if e.HasField("summary")
            for v in e.summary.value
            if v.tag == tag
        ]


def ms_events(path: Path) -> list[Any]:
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append(summary_pb2.Event.FromString(data[pos + 12 : pos + 12 + length]))
        pos += 12 + length + 4
    return out


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    root = tmp_path_factory.mktemp("summary_job")
    folder, losses = root / "summary", root / "losses.json"
    result = subprocess.run(
        [sys.executable, str(JOB), str(folder), str(losses)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GLOG_v": "3"},
        cwd=root,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (ms_file,) = folder.glob("*_MS")
    recorded = {int(k): v for k, v in json.loads(losses.read_text()).items()}
    return Job(folder, recorded, ms_events(ms_file))


def convert(*args: str) -> str:
    result = CliRunner().invoke(main, ["convert", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_losses_histograms_images_tensors_and_hparams_survive(job: Job, tmp_path: Path) -> None:
    output = convert(str(job.folder), str(tmp_path / "tb"))
    assert "converted 1 summary folder into run . below" in output
    assert "1 graph, " in output
    assert "1 hparam set, " in output
    assert "skipped: none" in output
    acc = accumulator(tmp_path / "tb")

    # Loss: the steps SummaryCollector recorded, each the value the network returned.
    recorded = job.values("loss/auto")
    assert len(recorded) >= 12
    loss = [(e.step, e.value) for e in acc.Scalars("train/loss")]
    assert [s for s, _ in loss] == [s for s, _ in recorded]
    for step, value in loss:
        assert same_float32(value, job.losses[step]), step

    # Parameter and activation histograms: MindSpore's buckets, exactly.
    for ms_tag, tag in (
        ("fc.weight/auto", "parameters/fc.weight"),
        ("conv.weight/auto", "parameters/conv.weight"),
        ("conv_out", "conv_out"),
    ):
        theirs = job.values(ms_tag)
        ours = acc.Histograms(tag)
        assert [e.step for e in ours] == [s for s, _ in theirs], tag
        for event, (_, value) in zip(ours, theirs):
            ms_hist, histo = value.histogram, event.histogram_value
            assert histo.num == sum(b.count for b in ms_hist.buckets) > 0
            assert (histo.min, histo.max) == (ms_hist.min, ms_hist.max)
            assert list(histo.bucket) == [b.count for b in ms_hist.buckets]
            assert list(histo.bucket_limit) == [b.left + b.width for b in ms_hist.buckets]
    assert acc.Histograms("parameters/fc.weight")[0].histogram_value.num == 4 * 8 * 8 * 10

    # NaN in a histogram: counted as <tag>/nonfinite at each of its steps.
    nan_counts = {s: v.histogram.nan_count for s, v in job.values("log_input")}
    assert min(nan_counts.values()) > 0
    assert {e.step: e.value for e in acc.Scalars("log_input/nonfinite")} == nan_counts

    # Images: the same PNG bytes and size.
    for ms_tag in ("input", "input_data/auto"):
        theirs = job.values(ms_tag)
        ours = acc.Images(ms_tag.removesuffix("/auto"))
        assert [e.step for e in ours] == [s for s, _ in theirs]
        for event, (_, value) in zip(ours, theirs):
            assert event.encoded_image_string == value.image.encoded_image
            assert (event.width, event.height) == (value.image.width, value.image.height)

    # Tensors: a histogram of the values plus the values as a table.
    theirs = job.values("logits")
    ours = acc.Histograms("logits")
    assert [e.step for e in ours] == [s for s, _ in theirs]
    first = np.array(theirs[0][1].tensor.float_data, dtype=np.float32)
    assert ours[0].histogram_value.num == first.size == 10
    assert ours[0].histogram_value.min == pytest.approx(float(first.min()))
    table = acc.Tensors("logits/values")[0].tensor_proto.string_val[0].decode()
    assert f"{first[3]:.6g}" in table

    # The lineage file's training hyperparameters are the run's HPARAMS.
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["optimizer"].string_value == "Momentum"
    assert hparams["batch_size"].number_value == 8
    assert hparams["epoch"].number_value == 2
    assert hparams["learning_rate"].number_value == pytest.approx(0.01)


def test_the_graph_in_eventaccumulator_and_in_a_live_tensorboard(job: Job, tmp_path: Path) -> None:
    convert(str(job.folder), str(tmp_path / "tb"))
    (ms_graph,) = [e.graph_def for e in job.events if e.HasField("graph_def")]
    graph = accumulator(tmp_path / "tb").Graph()
    ops = [n for n in graph.node if n.op not in ("Parameter", "Const")]
    assert [n.name for n in ops] == [n.full_name for n in ms_graph.node]
    by_name = {n.name: n for n in graph.node}
    conv = next(n for n in ops if n.op == "Conv2D")
    assert conv.name.startswith("Default/network-WithLossCell/_backbone-Net/conv-Conv2d/")
    for source in conv.input:  # every edge ends at a node of the graph
        assert source.lstrip("^") in by_name
    weight = next(n for n in graph.node if n.name.endswith("/conv.weight"))
    assert weight.op == "Parameter"
    assert weight.attr["shape"].s == b"[4, 3, 3, 3]"
    shape = [d.size for d in conv.attr["_output_shapes"].list.shape[0].dim]
    assert shape == [8, 4, 8, 8]

    port = free_port()
    server = subprocess.Popen(
        [TENSORBOARD, "--logdir", str(tmp_path / "tb"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/data/plugin/graphs"
        info = _wait_for(f"{url}/info", lambda answer: "." in answer)
        assert info["."]["run_graph"] is True
        with urllib.request.urlopen(f"{url}/graph?run=.&conceptual=false", timeout=30) as r:
            pbtxt = r.read().decode()
        assert 'op: "Conv2D"' in pbtxt
        assert pbtxt.count("node {") == len(graph.node)
    finally:
        server.terminate()
        server.wait(30)


def test_raw_tags_and_one_run_per_summary_folder(job: Job, tmp_path: Path) -> None:
    root = tmp_path / "summaries"
    for rank in (0, 1):
        shutil.copytree(job.folder, root / f"rank_{rank}")
    output = convert(str(root), str(tmp_path / "tb"), "--raw-tags")
    assert "converted 2 summary folders into runs rank_0, rank_1" in output
    for rank in (0, 1):
        tags = accumulator(tmp_path / "tb" / f"rank_{rank}").Tags()
        assert {"loss/auto", "mean_logit"} <= set(tags["scalars"])
        assert "fc.weight/auto" in tags["histograms"]


def test_follow_converts_a_summary_file_still_being_written(job: Job, tmp_path: Path) -> None:
    data = job.ms_file.read_bytes()
    live = tmp_path / "live"
    live.mkdir()
    growing = live / job.ms_file.name
    growing.write_bytes(b"")
    done = threading.Event()
    result: dict[str, Any] = {}

    def run() -> None:
        result["out"] = convert_summaries(
            live, tmp_path / "tb", follow=True, interval=0.05, stop=done.is_set
        )

    thread = threading.Thread(target=run)
    thread.start()
    # Appends of 997 bytes cut records anywhere, as a writer's flushes do.
    with open(growing, "ab") as handle:
        for start in range(0, len(data), 997):
            handle.write(data[start : start + 997])
            handle.flush()
            time.sleep(0.002)
    time.sleep(0.5)
    done.set()
    thread.join(60)
    assert not thread.is_alive()
    assert not result["out"].skipped
    loss = [e.step for e in accumulator(tmp_path / "tb").Scalars("train/loss")]
    assert loss == [s for s, _ in job.values("loss/auto")]


def test_a_damaged_record_is_skipped_and_the_rest_converted(job: Job, tmp_path: Path) -> None:
    data = bytearray(job.ms_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    folder = tmp_path / "damaged"
    folder.mkdir()
    (folder / job.ms_file.name).write_bytes(bytes(data))
    output = convert(str(folder), str(tmp_path / "tb"))
    assert "skipped: 1 damaged record" in output
    loss = [e.step for e in accumulator(tmp_path / "tb").Scalars("train/loss")]
    expected = [s for s, _ in job.values("loss/auto")]
    assert set(loss) <= set(expected)
    assert len(loss) >= len(expected) - 1  # one record holds one step's summaries


# ------------------------------------------------ the decoder on hand-built messages


def test_tensors_of_every_storage_decode_to_their_values() -> None:
    def decoded(proto: Any) -> np.ndarray:
        return tensor_array(fields(proto.SerializeToString()))

    floats = anf_ir_pb2.TensorProto(dims=[2, 3], data_type=11, float_data=[1, 2, 3, 4, 5, 6])
    assert decoded(floats).tolist() == [[1, 2, 3], [4, 5, 6]]
    ints = anf_ir_pb2.TensorProto(dims=[3], data_type=5, int64_data=[-5, 0, 2**40])
    assert decoded(ints).tolist() == [-5, 0, 2**40]
    raw = np.arange(6, dtype=np.float16).reshape(3, 2)
    halves = anf_ir_pb2.TensorProto(dims=[3, 2], data_type=10, raw_data=raw.tobytes())
    assert decoded(halves).tolist() == raw.tolist()
    bf16 = (np.array([1.5, -2.0], dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
    bfloat = anf_ir_pb2.TensorProto(dims=[2], data_type=46, raw_data=bf16.tobytes())
    assert decoded(bfloat).tolist() == [1.5, -2.0]
    scalar = anf_ir_pb2.TensorProto(data_type=12, double_data=[0.25])
    assert decoded(scalar).tolist() == 0.25
    wrong = anf_ir_pb2.TensorProto(dims=[4], data_type=11, float_data=[1, 2])
    with pytest.raises(WireError):
        decoded(wrong)


def test_graph_edges_control_edges_and_unscoped_nodes() -> None:
    graph = anf_ir_pb2.GraphProto(name="g")
    graph.parameters.add(name="x")
    graph.const_vals.add(key="cst1").value.int_val = 7
    mul = graph.node.add(name="1", op_type="Mul", full_name="Default/net/Mul-op0")
    mul.input.add(name="x")
    mul.input.add(name="cst1")
    scoped = graph.node.add(name="2", op_type="Depend", scope="Default")  # no full_name
    scoped.input.add(name="1")
    scoped.input.add(name="1", type=anf_ir_pb2.InputProto.CONTROL_EDGE)
    scoped.input.add(name="nowhere")  # an input the graph does not define
    graph.node.add(name="3", op_type="Return").input.add(name="2")  # no scope either
    graph.node.add(name="3", op_type="Return")  # a duplicate short name
    from tensorboard.compat.proto.graph_pb2 import GraphDef

    out = GraphDef.FromString(graph_def_bytes(graph.SerializeToString()))
    nodes = {n.name: n for n in out.node}
    assert len(nodes) == len(out.node)  # names are unique
    assert set(nodes) == {
        "Default/net/Mul-op0",
        "Default/Depend-2",
        "Return-3",
        "Return-3_1",
        "Default/net/x",
        "Default/net/cst1",
    }
    assert list(nodes["Default/Depend-2"].input) == ["Default/net/Mul-op0", "^Default/net/Mul-op0"]
    assert list(nodes["Return-3"].input) == ["Default/Depend-2"]
    assert nodes["Default/net/cst1"].attr["value"].s == b"7"
    assert nodes["Default/net/x"].op == "Parameter"
    with pytest.raises(WireError):
        graph_def_bytes(graph.SerializeToString()[:-3])


def test_truncated_and_nonsense_records_are_counted_not_fatal(tmp_path: Path) -> None:
    event = summary_pb2.Event(wall_time=1.0, step=3)
    event.summary.value.add(tag="loss/auto", scalar_value=0.5)
    good = event.SerializeToString()
    path = tmp_path / "events.out.events.summary.1.vm_MS"
    path.write_bytes(frame(good) + frame(b"\x0a\xff\xff") + frame(good))
    reader = SummaryFileReader(path)
    items = list(reader.read())
    assert [(i.step, i.tag) for i in items] == [(3, "loss/auto"), (3, "loss/auto")]
    assert reader.skipped == {"undecodable record": 1}


def _wait_for(url: str, ready: Any, timeout: float = 120) -> Any:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                last = json.loads(response.read())
            if ready(last):
                return last
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} never became ready; last answer: {last}")


def _key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def _field(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + varint(len(payload)) + payload


def _scalar_event(step: int, value: float = 0.5) -> bytes:
    event = summary_pb2.Event(wall_time=1.0 + step, step=step)
    event.summary.value.add(tag="loss/auto", scalar_value=value)
    return bytes(event.SerializeToString())


def _summary_file(folder: Path, records: list[bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events.out.events.summary.1.vm_MS"
    path.write_bytes(b"".join(frame(r) for r in records))
    return path


def test_records_protobuf_accepts_but_we_cannot_use_are_skipped_alone(tmp_path: Path) -> None:
    """Each of these parses with MindSpore's protobuf classes; none may stop convert, and
    a bad value must not take the good values of its step with it."""
    loss = _field(1, b"loss/auto") + _key(3, 5) + struct.pack("<f", 0.25)
    tag = _field(1, b"x")
    bad_values = [
        tag + _key(4, 0) + varint(1),  # image as a varint
        tag + _key(8, 0) + varint(1),  # tensor as a varint
        # a histogram bucket counting -1
        tag + _field(9, _field(1, _key(3, 0) + varint((1 << 64) - 1))),
    ]
    records = [_scalar_event(1)]
    for step, bad in enumerate(bad_values, start=2):
        record = _key(2, 0) + varint(step) + _field(5, _field(1, bad) + _field(1, loss))
        summary_pb2.Event.FromString(record)  # protobuf accepts it
        records.append(record)
    # A graph whose input edge type is length-delimited; a lineage with a string batch size.
    node = _field(2, b"1") + _field(3, b"Mul") + _field(1, _field(1, b"x") + _field(2, b"zz"))
    graph = _field(1, node) + _field(3, _field(1, b"x"))  # parameter x feeds the node
    anf_ir_pb2.GraphProto.FromString(graph)
    records.append(_key(2, 0) + varint(0) + _field(4, graph))
    # An overlong 10-byte varint (-1 in int64_data) decodes as protobuf decodes it.
    overlong = _key(2, 0) + varint(5) + _key(5, 0) + bytes([0xFF] * 9 + [0x7F])
    records.append(
        _key(2, 0) + varint(6) + _field(5, _field(1, _field(1, b"t") + _field(8, overlong)))
    )
    folder = tmp_path / "src"
    _summary_file(folder, records)
    lineage = _key(1, 1) + bytes(8) + _field(6, _field(1, _field(8, b"eight")))
    lineage_pb2.LineageEvent.FromString(lineage)
    (folder / "events.out.events.summary.1.vm_lineage").write_bytes(frame(lineage))

    result = CliRunner().invoke(main, ["convert", str(folder), str(tmp_path / "tb")])
    assert result.exit_code == 0, result.output
    assert "skipped: 1 undecodable graph, 3 undecodable value" in result.output
    acc = accumulator(tmp_path / "tb")
    steps = [e.step for e in acc.Scalars("train/loss")]
    assert steps == [1, 2, 3, 4]  # every step's good value survived
    assert [(e.step, e.value) for e in acc.Scalars("t")] == [(6, -1.0)]


def test_histograms_draw_as_mindspore_bucketed_them(tmp_path: Path) -> None:
    """Through TensorBoard's own migration of legacy histograms (what its charts show)."""
    from tensorboard import data_compat
    from tensorboard.util import tensor_util

    event = summary_pb2.Event(wall_time=1.0, step=1)
    histogram = event.summary.value.add(tag="w/auto").histogram
    for left, count in ((-1.0, 2), (-0.5, 0), (0.0, 5), (0.5, 1)):
        histogram.buckets.add(left=left, width=0.5, count=count)
    histogram.min, histogram.max, histogram.sum, histogram.count = -0.9, 0.8, 1.5, 8
    histogram.nan_count = 3
    clean = summary_pb2.Event(wall_time=2.0, step=2)
    clean.summary.value.add(tag="w/auto").histogram.CopyFrom(histogram)
    clean.summary.value[0].histogram.nan_count = 0
    _summary_file(tmp_path / "src", [event.SerializeToString(), clean.SerializeToString()])
    convert_summaries(tmp_path / "src", tmp_path / "tb")
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    (path,) = (tmp_path / "tb").glob("*tfevents*")
    (legacy,) = [
        v
        for e in LegacyEventFileLoader(str(path)).Load()
        for v in e.summary.value
        if v.HasField("histo") and e.step == 1
    ]
    shown = tensor_util.make_ndarray(data_compat.migrate_value(legacy).tensor)  # float32
    expected = [[-0.9, -0.5, 2], [-0.5, 0.0, 0], [0.0, 0.5, 5], [0.5, 0.8, 1]]
    np.testing.assert_array_equal(shown, np.array(expected, dtype=np.float32))
    # NaN counts: from the first step that has any, zeros included afterwards
    scalars = accumulator(tmp_path / "tb").Scalars("parameters/w/nonfinite")
    nonfinite = [(e.step, e.value) for e in scalars]
    assert nonfinite == [(1, 3.0), (2, 0.0)]


def test_repeated_summary_fields_merge_and_a_cut_last_record_is_counted(tmp_path: Path) -> None:
    one = summary_pb2.Summary()
    one.value.add(tag="loss/auto", scalar_value=1.0)
    two = summary_pb2.Summary()
    two.value.add(tag="acc", scalar_value=0.5)
    split = _key(2, 0) + varint(7) + _field(5, one.SerializeToString())
    split += _field(5, two.SerializeToString())
    assert len(summary_pb2.Event.FromString(split).summary.value) == 2  # protobuf merges
    path = _summary_file(tmp_path / "src", [split])
    with open(path, "ab") as handle:
        handle.write(frame(_scalar_event(8))[:-5])  # the writer died mid-record
    result = CliRunner().invoke(main, ["convert", str(tmp_path / "src"), str(tmp_path / "tb")])
    assert result.exit_code == 0, result.output
    assert "skipped: 1 incomplete last record" in result.output
    tags = accumulator(tmp_path / "tb").Tags()["scalars"]
    assert sorted(tags) == ["acc", "train/loss"]


def test_converting_twice_needs_overwrite_and_leaves_one_copy(job: Job, tmp_path: Path) -> None:
    convert(str(job.folder), str(tmp_path / "tb"))
    again = CliRunner().invoke(main, ["convert", str(job.folder), str(tmp_path / "tb")])
    assert again.exit_code == 2
    assert "already holds event files" in again.output
    assert "--overwrite" in again.output
    convert(str(job.folder), str(tmp_path / "tb"), "--overwrite")
    steps = [e.step for e in accumulator(tmp_path / "tb").Scalars("train/loss")]
    assert steps == [s for s, _ in job.values("loss/auto")]
