"""Spike forensics on real MindSpore training: a fault planted in one layer is ranked
first, in three architectures; a NaN planted in one sample is named with its id.

The layer fault multiplies one parameter's gradient by 50 from step 300 on, through a
masked op (``w * s + stop_gradient(w * (1 - s))``: the forward value is ``w``, the
gradient ``s`` times it), so only that parameter's gradient explodes; the train cell
returns the per-parameter squared norms (``layer_norms=True``) and the flight recorder
keeps them. The alert's forensics (``alerts.jsonl`` and ``forensics/<alert>.json``) must
rank that parameter first, departing at step 300.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn, ops
from mindspore.dataset import GeneratorDataset
from mindspore.train import Model

from mindwatch.forensics import SkipList
from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from tests.mindspore.planted_cells import Dense, GradScale, PlantAt, WithIds

FAULT, FACTOR, STEPS, BATCH = 300, 50.0, 330, 32


@pytest.fixture(autouse=True)
def graph_mode() -> Iterator[None]:
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    yield
    ms.set_context(mode=previous)


class CNN(nn.Cell):  # type: ignore[misc]
    def __init__(self, fault: Any) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, pad_mode="same")
        self.conv2 = nn.Conv2d(8, 8, 3, pad_mode="same")
        self.relu, self.flat = nn.ReLU(), nn.Flatten()
        self.fc1, self.fc2 = Dense(512, 32, 1, fault), Dense(32, 1, 2)

    def construct(self, x: Any) -> Any:
        h = self.relu(self.conv2(self.relu(self.conv1(x))))
        return self.fc2(self.relu(self.fc1(self.flat(h))))


class Attention(nn.Cell):  # type: ignore[misc]
    def __init__(self, fault: Any, d: int = 16) -> None:
        super().__init__()
        self.wq, self.wk = Dense(d, d, 1), Dense(d, d, 2, fault)
        self.wv, self.out = Dense(d, d, 3), Dense(d, 1, 4)
        self.softmax, self.scale = nn.Softmax(-1), 1.0 / np.sqrt(d)

    def construct(self, x: Any) -> Any:
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        a = self.softmax(ops.matmul(q, k.transpose(0, 2, 1)) * self.scale)
        return self.out(ops.matmul(a, v).mean(1))


def _model(arch: str, fault: GradScale) -> tuple[nn.Cell, str, np.ndarray, np.ndarray]:
    """The network, the name of the faulty parameter, inputs and targets."""
    rng = np.random.default_rng(0)
    if arch == "mlp":
        net = nn.SequentialCell(
            [Dense(16, 64, 1), nn.ReLU(), Dense(64, 64, 2, fault), nn.ReLU(), Dense(64, 1, 3)]
        )
        x = rng.normal(size=(2048, 16)).astype(np.float32)
        return net, "2.weight", x, (x[:, :1] * 2 + np.sin(x[:, 1:2])).astype(np.float32)
    if arch == "cnn":
        x = rng.normal(size=(2048, 1, 8, 8)).astype(np.float32)
        return CNN(fault), "fc1.weight", x, x.mean(axis=(1, 2, 3))[:, None].astype(np.float32)
    x = rng.normal(size=(2048, 6, 16)).astype(np.float32)
    return Attention(fault), "wk.weight", x, x[:, :, 0].mean(1, keepdims=True)


def _alerts(logdir: Path) -> list[dict[str, Any]]:
    (file,) = logdir.rglob("alerts.jsonl")
    return [json.loads(line) for line in file.read_text().splitlines()]


def _train(net: nn.Cell, x: np.ndarray, y: np.ndarray, logdir: Path, *callbacks: Any) -> None:
    data = GeneratorDataset(
        lambda: ((x[i], y[i]) for i in range(len(x))), ["x", "y"], shuffle=False
    ).batch(BATCH)
    cell = TrainOneStepWithGradNormCell(
        nn.WithLossCell(net, nn.MSELoss()),
        nn.SGD(net.trainable_params(), learning_rate=0.01),
        layer_norms=True,
    )
    monitor = TrainingMonitor(logdir=logdir, config={"print_every": 0})
    epochs = -(-STEPS // (len(x) // BATCH))
    Model(cell).train(epochs, data, callbacks=[*callbacks, monitor], dataset_sink_mode=False)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["mlp", "cnn", "attention"])
def test_the_faulty_layer_is_ranked_first(arch: str, tmp_path: Path) -> None:
    fault = GradScale()
    net, faulty, x, y = _model(arch, fault)
    _train(net, x, y, tmp_path, PlantAt(fault, FAULT, FACTOR))
    explained = [a for a in _alerts(tmp_path) if "forensics" in a and a["step"] >= FAULT]
    assert explained, f"no explained alert after step {FAULT}: {_alerts(tmp_path)}"
    first = explained[0]
    assert first["step"] <= FAULT + 3, first  # the explosion is caught at once
    mover = first["forensics"]["first_mover"]
    assert (mover["name"], mover["onset"]) == (faulty, FAULT), first["forensics"]
    # No explained alert before the fault: nothing else moved. (Timing rules may speak
    # on a busy machine: they are not what this test plants.)
    early = [a for a in _alerts(tmp_path) if a["step"] < FAULT and "forensics" in a]
    assert not early, early
    # The file holds the whole analysis: every mover, the heat block for the report.
    record = json.loads(
        (next(tmp_path.rglob("alerts.jsonl")).parent / first["forensics"]["file"]).read_text()
    )
    assert record["movers"][0]["name"] == faulty
    assert record["alert"]["step"] == first["step"]
    assert faulty in record["heat"]["layers"]
    assert record["heat"]["steps"][-1] == first["step"]


class NaNSource:
    """Rows (x, y, id); the sample with id ``bad`` holds a NaN in its input."""

    def __init__(self, x: np.ndarray, y: np.ndarray, bad: int) -> None:
        self.x, self.y, self.bad = x.copy(), y, bad
        self.x[bad, 3] = np.nan

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.x[i], self.y[i], np.array([1000 + i], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.x)


@pytest.mark.slow
def test_a_nan_in_one_sample_is_named_with_its_id_and_the_first_layer(tmp_path: Path) -> None:
    net, _, x, y = _model("mlp", GradScale())
    bad = 40 * BATCH + 5  # in the 41st batch: step 41
    data = GeneratorDataset(NaNSource(x, y, bad), ["x", "y", "id"], shuffle=False).batch(BATCH)
    cell = TrainOneStepWithGradNormCell(
        WithIds(net), nn.SGD(net.trainable_params(), learning_rate=0.01), layer_norms=True
    )
    config = {"print_every": 0, "alerts": {"sample_ids": 2}}
    monitor = TrainingMonitor(logdir=tmp_path, config=config)
    Model(cell).train(1, data.take(45), callbacks=[monitor], dataset_sink_mode=False)
    nonfinite = [a for a in _alerts(tmp_path) if a["rule"] == "nonfinite"]
    assert nonfinite, _alerts(tmp_path)
    assert nonfinite[0]["step"] == 41, nonfinite
    forensics = nonfinite[0]["forensics"]
    assert forensics["batch"]["nonfinite_samples"] == [1000 + bad]
    assert forensics["batch"]["sample_ids"] == list(range(1000 + 40 * BATCH, 1000 + 41 * BATCH))
    # The NaN enters through the first layer's input; the ReLUs map it to 0, so the
    # first layer's weight is the only gradient that is not finite (the backward pass
    # reaches it last: it is named even so, and counted alone).
    assert forensics["nonfinite"]["parameter"] == net[0].weight.name
    assert (forensics["nonfinite"]["parameters"], forensics["nonfinite"]["step"]) == (1, 41)
    # The skip list holds the batch, and filtering with it drops exactly those rows.
    run = next(tmp_path.rglob("alerts.jsonl")).parent
    skip = SkipList.load(run)
    assert 1000 + bad in skip.samples
    ids = GeneratorDataset(NaNSource(x, y, bad), ["x", "y", "id"], shuffle=False)
    filtered = ids.filter(skip.keep, input_columns=["id"])
    seen = {int(row["id"][0]) for row in filtered.create_dict_iterator(output_numpy=True)}
    assert 1000 + bad not in seen
    assert len(seen) == len(x) - 1
