"""The seeds' ``CustomMonitor`` (seed 002, 3.3) and ``train_config.py`` (seed 000, 3.2),
as examples/seeds/ adapts them, train a real model on CPU, and a live TensorBoard serves
their curves over HTTP."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import make_dataset, make_network
from tests.tbread import scalars
from tests.tbserver import live_tensorboard, query, wait_for_tags

pytestmark = pytest.mark.slow

SEEDS = Path(__file__).resolve().parents[2] / "examples" / "seeds"
SRC = Path(__file__).resolve().parents[2] / "src"


def _run(script: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GLOG_v": "3",
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, str(SEEDS / script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _points(url: str, run: str, tag: str) -> list[tuple[int, float]]:
    # Each point is [wall_time, step, value].
    return [(p[1], p[2]) for p in query(url, "/data/plugin/scalars/scalars", run=run, tag=tag)]


def test_custom_monitor_grad_norm_curve_in_a_live_tensorboard(tmp_path: Path) -> None:
    _run(
        "custom_monitor.py",
        tmp_path,
        "--logdir",
        str(tmp_path / "runs" / "seed002"),
        "--epochs",
        "2",
    )
    with live_tensorboard(tmp_path / "runs") as url:
        wait_for_tags(url, {"grad_norm"})
        points = _points(url, "seed002", "grad_norm")
    assert [s for s, _ in points] == list(range(1, 41))  # 20 batches x 2 epochs, every step
    assert all(np.isfinite(v) and v > 0 for _, v in points)
    assert len({v for _, v in points}) > 30  # a real training run: the norm moves


def _load(script: str) -> Any:
    spec = importlib.util.spec_from_file_location(script, SEEDS / script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_custom_monitor_grad_norm_is_the_train_cells_global_norm(tmp_path: Path) -> None:
    """The adapted gradient source gives the seed's formula the global gradient norm:
    the one TrainingMonitor writes from the same train cell, step for step."""
    ms.set_device("CPU")
    ms.set_seed(0)
    custom = _load("custom_monitor.py")
    dataset = make_dataset(320, 32, seed=1)
    net = make_network()
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(
        TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), optimizer, layer_norms=True)
    )
    seed_monitor = custom.CustomMonitor(str(tmp_path / "seed"), model, dataset.get_dataset_size())
    reference = TrainingMonitor(logdir=tmp_path / "reference")
    model.train(1, dataset, callbacks=[seed_monitor, reference], dataset_sink_mode=False)
    ours = scalars(tmp_path / "seed")["grad_norm"]
    theirs = scalars(tmp_path / "reference")["train/grad_norm"]
    assert [s for s, _ in ours] == [s for s, _ in theirs] == list(range(1, 11))
    np.testing.assert_allclose([v for _, v in ours], [v for _, v in theirs], rtol=1e-5)


def test_train_config_loss_lr_and_histograms_in_a_live_tensorboard(tmp_path: Path) -> None:
    result = _run("train_config.py", tmp_path)
    assert "epoch: 10 step: 20, loss is" in result.stdout  # the seed's LossMonitor ran too
    summary = tmp_path / "summary"
    assert (tmp_path / "ckpt").is_dir()  # and its ModelCheckpoint
    assert not list(summary.rglob("*_MS"))  # TensorBoard's files, not MindInsight's
    with live_tensorboard(summary) as url:
        tags = wait_for_tags(url, {"train/loss", "train/lr"})
        (run,) = tags
        assert run == "bert_finetune_202404"
        loss = _points(url, run, "train/loss")
        lr = _points(url, run, "train/lr")
        listed = wait_for_tags(url, {"gradients/4.weight"}, plugin="histograms")[run]
        histograms = query(
            url, "/data/plugin/histograms/histograms", run=run, tag="parameters/0.weight"
        )
        distributions = query(
            url, "/data/plugin/distributions/distributions", run=run, tag="gradients/4.weight"
        )
    # collect_freq: 50 -> every 50th of the 200 steps.
    assert [s for s, _ in loss] == [s for s, _ in lr] == [50, 100, 150, 200]
    assert all(np.isfinite(v) for _, v in loss)
    values = [v for _, v in lr]
    assert values == sorted(values, reverse=True)
    assert values[0] > values[-1]
    # ["parameters", "gradients"]: both, for every parameter of the model.
    params = ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")
    assert sorted(listed) == sorted(
        f"{kind}/{p}" for kind in ("parameters", "gradients") for p in params
    )
    assert [h[1] for h in histograms] == [50, 100, 150, 200]
    assert all(len(h[2]) > 0 for h in histograms)  # buckets: [left, right, count]
    assert [d[1] for d in distributions] == [50, 100, 150, 200]
