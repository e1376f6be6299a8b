"""``mindwatch.mindspore.SummaryCollector``: MindSpore's arguments and meanings, over
``TrainingMonitor``, on a real model trained on CPU; read back with TensorBoard's own
EventAccumulator."""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn, ops
from mindspore.train import Model

from mindwatch.mindspore import SummaryCollector
from mindwatch.mindspore.demo import make_dataset, make_network
from tests.tbread import accumulator, scalars


@pytest.fixture
def graph_mode() -> Iterator[None]:
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=previous)


def _train(callback: Any, network: Any = None, epochs: int = 1, batches: int = 20) -> None:
    ms.set_seed(0)
    net = network if network is not None else make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    model = Model(net, loss_fn=loss, optimizer=optimizer)
    dataset = make_dataset(32 * batches, 32, seed=0)
    model.train(epochs, dataset, callbacks=[callback], dataset_sink_mode=False)


def test_signature_is_mindsporess() -> None:
    ours = list(inspect.signature(SummaryCollector).parameters.values())
    theirs = list(inspect.signature(ms.SummaryCollector).parameters.values())
    assert [(p.name, p.default) for p in ours[: len(theirs)]] == [
        (p.name, p.default) for p in theirs
    ]
    assert all(p.kind is p.KEYWORD_ONLY for p in ours[len(theirs) :])


def test_defaults_collect_every_10_steps_five_histograms_and_the_graph(
    tmp_path: Path, graph_mode: None
) -> None:
    _train(SummaryCollector(tmp_path))
    read = scalars(tmp_path)
    assert [s for s, _ in read["train/loss"]] == [10, 20]  # collect_freq: 10 (MindSpore's)
    assert [s for s, _ in read["train/lr"]] == [10, 20]
    acc = accumulator(tmp_path)
    # histogram_regular None: the first five parameters, as MindSpore collects them.
    assert acc.Tags()["histograms"] == [
        f"parameters/{p}" for p in ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight")
    ]
    assert [h.step for h in acc.Histograms("parameters/0.weight")] == [10, 20]
    names = {node.name for node in acc.Graph().node}  # collect_graph: the train graph
    assert any("MatMul" in name for name in names)


def test_specified_data_maps_and_names_what_it_cannot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")
    specified = {
        "histogram_regular": r"^4\.",
        "collect_graph": False,
        "collect_input_data": True,
        "collect_landscape": {"landscape_size": 40, "intervals": [[1, 2, 3]]},
    }
    _train(SummaryCollector(tmp_path, collect_freq=5, collect_specified_data=specified))
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == [5, 10, 15, 20]
    acc = accumulator(tmp_path)
    assert sorted(acc.Tags()["histograms"]) == ["parameters/4.bias", "parameters/4.weight"]
    assert [h.step for h in acc.Histograms("parameters/4.bias")] == [5, 10, 15, 20]
    assert not acc.Tags()["graph"]
    said = [r.getMessage() for r in caplog.records if "not recorded" in r.getMessage()]
    assert len(said) == 1
    assert "collect_input_data, collect_landscape" in said[0]
    assert "set them to False" in said[0]


def test_keep_default_action_false_collects_only_what_is_named(
    tmp_path: Path, graph_mode: None
) -> None:
    _train(SummaryCollector(tmp_path, collect_specified_data={}, keep_default_action=False))
    acc = accumulator(tmp_path)
    assert not acc.Tags()["histograms"]
    assert not acc.Tags()["graph"]
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == [10, 20]  # always


def test_custom_lineage_data_becomes_hparams(tmp_path: Path) -> None:
    lineage = {"dataset": "synthetic", "version": 3, "dropout": 0.1}
    _train(SummaryCollector(tmp_path, custom_lineage_data=lineage))
    hparams = json.loads((tmp_path / "run.json").read_text())["hparams"]
    assert {k: hparams[k] for k in lineage} == lineage
    assert hparams["optimizer"] == "Momentum"  # collect_train_lineage's, as before


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"collect_specified_data": {"collect_everything": True}}, ValueError),
        ({"collect_specified_data": {"collect_graph": "yes"}}, TypeError),
        ({"collect_specified_data": {"histogram_regular": 5}}, TypeError),
        ({"custom_lineage_data": {"k": [1]}}, TypeError),
        ({"keep_default_action": 1}, TypeError),
        ({"collect_freq": 0}, ValueError),
        ({"export_options": {"tensor_format": "csv"}}, ValueError),
        ({"max_file_size": "2GB"}, TypeError),
    ],
)
def test_bad_arguments_fail_before_training(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        SummaryCollector(tmp_path, **kwargs)


class _SummaryNet(nn.Cell):  # type: ignore[misc]
    """The demo's MLP with MindSpore summary operators inside."""

    def __init__(self) -> None:
        super().__init__()
        self.body = make_network()
        self.scalar = ops.ScalarSummary()
        self.tensor = ops.TensorSummary()

    def construct(self, x: Any) -> Any:
        logits = self.body(x)
        self.scalar("logit_mean", logits.mean())
        self.tensor("logits", logits)
        return logits


def test_summary_operators_at_collect_freq_and_tensors_at_collect_tensor_freq(
    tmp_path: Path, graph_mode: None
) -> None:
    collector = SummaryCollector(tmp_path, collect_freq=2, collect_tensor_freq=4)
    _train(collector, network=_SummaryNet(), batches=8)
    read = scalars(tmp_path)
    assert [s for s, _ in read["logit_mean"]] == [2, 4, 6, 8]
    assert all(np.isfinite(v) for _, v in read["logit_mean"])
    acc = accumulator(tmp_path)
    assert [h.step for h in acc.Histograms("logits")] == [4, 8]  # a 32x10 tensor
