"""``mindwatch.mindspore.SummaryRecord``: MindSpore's API, TensorBoard's files.

Each plugin is read back with TensorBoard's own EventAccumulator; images are compared
pixel for pixel with what MindSpore's own summary adapter draws for the same tensor.
"""

from __future__ import annotations

import inspect
import io
import json
import logging
import urllib.request
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn, ops
from PIL import Image

from mindwatch.mindspore import SummaryRecord
from tests.tbread import accumulator, scalars


@pytest.fixture(autouse=True)
def _cpu() -> None:
    ms.set_device("CPU")


def test_signature_is_mindsporess() -> None:
    ours = list(inspect.signature(SummaryRecord).parameters.values())
    theirs = list(inspect.signature(ms.SummaryRecord).parameters.values())
    assert [(p.name, p.default) for p in ours[: len(theirs)]] == [
        (p.name, p.default) for p in theirs
    ]
    assert all(p.kind is p.KEYWORD_ONLY for p in ours[len(theirs) :])  # mindwatch's extras


def test_every_plugin_reads_back_in_tensorboard(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(32, 16)).astype(np.float32)
    with SummaryRecord(tmp_path) as record:
        for step in (1, 2, 3):
            record.add_value("scalar", "loss", Tensor(np.float32(1.0 / step)))  # a Tensor
            record.add_value("scalar", "lr", 0.1 * step)  # a number
            record.add_value("scalar", "acc", np.array([0.5 + step / 10]))  # an array
            record.add_value("histogram", "weights", Tensor(weights * step))
            record.add_value("tensor", "bias", np.arange(4, dtype=np.float32) * step)
            record.add_value("tensor", "one", Tensor(np.array([7.0 * step], np.float32)))
            record.record(step)
        # MindSpore's meaning: the full path of the event file written.
        assert Path(record.log_dir).parent == tmp_path
        assert ".tfevents." in Path(record.log_dir).name
    read = scalars(tmp_path)
    assert read["loss"] == [(1, 1.0), (2, 0.5), (3, pytest.approx(1 / 3))]
    assert [v for _, v in read["lr"]] == pytest.approx([0.1, 0.2, 0.3])
    assert [v for _, v in read["acc"]] == pytest.approx([0.6, 0.7, 0.8])
    assert read["one"] == [(1, 7.0), (2, 14.0), (3, 21.0)]  # a one-element tensor is a scalar
    assert [s for s, _ in read["perf/step_time_ms"]] == [1, 2, 3]  # each record is a step
    acc = accumulator(tmp_path)
    (last,) = [h for h in acc.Histograms("weights") if h.step == 3]
    assert last.histogram_value.num == weights.size
    assert last.histogram_value.max == pytest.approx(float(weights.max() * 3))
    assert last.histogram_value.sum == pytest.approx(float(weights.sum() * 3), rel=1e-4)
    assert [h.step for h in acc.Histograms("bias")] == [1, 2, 3]  # a tensor's histogram
    (text,) = [t for t in acc.Tensors("bias/values") if t.step == 2]  # ... and its values
    table = text.tensor_proto.string_val[0].decode()
    assert "| 0 | 2 | 4 | 6 |" in table
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["last_step"] == 3


@pytest.mark.parametrize(
    ("shape", "dtype"), [((10, 1, 4, 5), np.float32), ((3, 3, 6, 2), np.uint8)]
)
def test_images_are_drawn_as_mindspore_draws_them(
    tmp_path: Path, shape: tuple[int, ...], dtype: Any
) -> None:
    from mindspore.train.summary._summary_adapter import _fill_image_summary
    from mindspore.train.summary_pb2 import Summary as MsSummary

    rng = np.random.default_rng(1)
    batch = (rng.uniform(-2, 3, size=shape) * (60 if dtype == np.uint8 else 1)).astype(dtype)
    with SummaryRecord(tmp_path) as record:
        record.add_value("image", "inputs", Tensor(batch))
        record.record(5)
    (event,) = accumulator(tmp_path).Images("inputs")
    assert event.step == 5
    ours = np.asarray(Image.open(io.BytesIO(event.encoded_image_string)).convert("RGB"))
    theirs_proto = MsSummary.Image()
    assert _fill_image_summary("inputs", batch, theirs_proto, "NCHW")
    theirs = np.asarray(Image.open(io.BytesIO(theirs_proto.encoded_image)).convert("RGB"))
    assert ours.shape == theirs.shape
    assert (event.height, event.width) == theirs.shape[:2]
    np.testing.assert_array_equal(ours, theirs)


def _calls(cls: Any, tmp_path: Path) -> list[str]:
    """What each misuse raises, as an exception class name ('ok' if it does not)."""
    outcomes = []
    record = cls(str(tmp_path))
    value = Tensor(np.ones((2,), np.float32))
    for call in (
        lambda: record.add_value("nonsense", "x", value),
        lambda: record.add_value("scalar", 3, value),
        lambda: record.add_value("scalar", "", value),
        lambda: record.add_value("scalar", "two", value),  # two elements
        lambda: record.add_value("image", "flat", value),  # not NCHW
        lambda: record.add_value("histogram", "zero-d", Tensor(np.float32(1))),
        lambda: record.set_mode("test"),
        lambda: record.record("1"),
        lambda: record.record(1),
    ):
        try:
            call()
            outcomes.append("ok")
        except Exception as exc:
            outcomes.append(type(exc).__name__)
    record.close()
    outcomes.append(str(record.record(2)))  # closed: False, nothing raised
    try:
        with record:
            pass
        outcomes.append("ok")
    except ValueError:
        outcomes.append("ValueError")
    return outcomes


def test_misuse_raises_what_mindspore_raises(tmp_path: Path) -> None:
    ours = _calls(SummaryRecord, tmp_path / "ours")
    theirs = _calls(ms.SummaryRecord, tmp_path / "theirs")
    assert ours == theirs
    assert ours[0] == "ValueError"
    assert ours[-2:] == ["False", "ValueError"]


def test_constructor_checks_match_mindsporess(tmp_path: Path) -> None:
    for kwargs, error in (
        ({"file_prefix": 1}, TypeError),
        ({"max_file_size": "big"}, TypeError),
        ({"raise_exception": "yes"}, TypeError),
        ({"export_options": {"tensor_format": "csv"}}, ValueError),
        ({"export_options": {"image_format": "npy"}}, ValueError),
    ):
        with pytest.raises(error):
            SummaryRecord(tmp_path / "ours", **kwargs)
        with pytest.raises(error):
            ms.SummaryRecord(str(tmp_path / "theirs"), **kwargs)
        ms.SummaryRecord.count = 0  # MindSpore leaves its one-instance count raised here


class _SummaryNet(nn.Cell):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Dense(4, 3)
        self.scalar = ops.ScalarSummary()
        self.histogram = ops.HistogramSummary()

    def construct(self, x: Any) -> Any:
        y = self.dense(x)
        mean = y.mean()
        self.scalar("y_mean", mean)
        self.histogram("y", y)
        return mean


def test_the_networks_summary_operators_are_recorded_in_train_mode_only(tmp_path: Path) -> None:
    net = _SummaryNet()
    x = Tensor(np.ones((2, 4), np.float32))
    with SummaryRecord(tmp_path) as record:
        means = []
        for step in (1, 2):
            means.append(float(net(x).asnumpy()))
            record.record(step)
        record.set_mode("eval")
        net(x)
        record.record(3)
    read = scalars(tmp_path)
    assert read["y_mean"] == [(1, pytest.approx(means[0])), (2, pytest.approx(means[1]))]
    assert [h.step for h in accumulator(tmp_path).Histograms("y")] == [1, 2]


def test_network_graph_goes_to_the_graphs_tab(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = nn.Dense(4, 3)
        net(Tensor(np.ones((2, 4), np.float32)))  # compiled: the graph exists
        with SummaryRecord(tmp_path, network=net) as record:
            record.add_value("scalar", "x", 1.0)
            record.record(1)
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    graph = accumulator(tmp_path).Graph()
    ops_seen = {node.op for node in graph.node}
    assert any("MatMul" in op for op in ops_seen), ops_seen


def test_tensor_export_as_npy_like_mindspore(tmp_path: Path) -> None:
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    with SummaryRecord(tmp_path, export_options={"tensor_format": "npy"}) as record:
        record.add_value("tensor", "conv/w", Tensor(values))
        record.record(4)
    (exported,) = tmp_path.glob("export_*/tensor/*.npy")
    assert exported.name == "conv%2Fw_4.npy"  # MindSpore quotes the tag the same way
    np.testing.assert_array_equal(np.load(exported), values)


def test_a_nan_scalar_raises_mindwatchs_alert(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path) as record:
        for step in range(1, 6):
            record.add_value("scalar", "train/loss", float("nan") if step == 4 else 1.0 / step)
            record.record(step)
    alerts = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    nonfinite = [a for a in alerts if a["rule"] == "nonfinite"]
    assert [(a["step"], a["metric"]) for a in nonfinite] == [(4, "train/loss")]


def test_unrecorded_plugins_are_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mindspore.train.lineage_pb2 import UserDefinedInfo

    caplog.set_level(logging.WARNING, logger="mindwatch")
    with SummaryRecord(tmp_path) as record:
        for _ in range(3):
            record.add_value("custom_lineage_data", "info", UserDefinedInfo())
        record.record(1)
    said = [r.getMessage() for r in caplog.records if "custom_lineage_data" in r.getMessage()]
    assert len(said) == 1
    assert "log_hparams" in said[0]


@pytest.mark.slow
def test_a_live_tensorboard_serves_each_plugin(tmp_path: Path) -> None:
    from tests.tbserver import get, live_tensorboard, query, wait_for_tags

    run = tmp_path / "record"
    with SummaryRecord(run) as record:
        for step in (1, 2):
            record.add_value("scalar", "loss", Tensor(np.float32(1.0 / step)))
            record.add_value("histogram", "weights", np.linspace(-1, 1, 50) * step)
            record.add_value("image", "inputs", np.full((2, 3, 4, 4), 0.5 * step, np.float32))
            record.add_value("tensor", "bias", np.arange(3, dtype=np.float32) * step)
            record.record(step)
    with live_tensorboard(tmp_path) as url:
        wait_for_tags(url, {"loss"})
        loss = query(url, "/data/plugin/scalars/scalars", run="record", tag="loss")
        histograms = query(url, "/data/plugin/histograms/histograms", run="record", tag="weights")
        images = query(url, "/data/plugin/images/images", run="record", tag="inputs", sample="0")
        png = urllib.request.urlopen(
            f"{url}/data/plugin/images/individualImage?{images[1]['query']}"
        )
        texts = query(url, "/data/plugin/text/text", run="record", tag="bias/values")
        tags = get(f"{url}/data/plugin/histograms/tags")["record"]
    assert [(p[1], p[2]) for p in loss] == [(1, 1.0), (2, 0.5)]
    assert [h[1] for h in histograms] == [1, 2]
    assert sorted(tags) == ["bias", "weights"]  # the tensor's histogram too
    assert [i["step"] for i in images] == [1, 2]
    picture = np.asarray(Image.open(io.BytesIO(png.read())).convert("RGB"))
    assert picture.shape == (4, 8, 3)  # two 4x4 images in a row
    assert (picture == 255).all()  # 1.0 in [0, 1] -> 255, as MindSpore maps it
    assert [t["step"] for t in texts] == [1, 2]
    # TensorBoard renders the markdown table as HTML.
    assert "<td>0</td>\n<td>2</td>\n<td>4</td>" in texts[1]["text"]


def test_leaving_on_an_exception_closes_the_run_as_failed(tmp_path: Path) -> None:
    def train() -> None:
        with SummaryRecord(tmp_path) as record:
            record.add_value("scalar", "loss", 0.5)
            record.record(1)
            raise ZeroDivisionError("the training step failed")

    with pytest.raises(ZeroDivisionError):
        train()
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed"
    assert scalars(tmp_path)["loss"] == [(1, 0.5)]  # what was recorded is written
