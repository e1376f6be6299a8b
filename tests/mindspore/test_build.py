"""build_callbacks: the callbacks a config describes, in order, doing what it says."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import pytest
from mindspore import nn
from mindspore.train import Model, ModelCheckpoint

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell, build_callbacks
from mindwatch.mindspore.demo import make_dataset, make_network
from tests.tbread import scalars

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _cell() -> TrainOneStepWithGradNormCell:
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return TrainOneStepWithGradNormCell(
        nn.WithLossCell(net, loss), nn.Momentum(net.trainable_params(), 0.02, 0.9)
    )


def test_monitor_first_then_checkpoints_from_the_same_config(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    config = {
        "logdir": str(tmp_path / "run"),
        "print_every": 0,
        "collect_freq": 4,
        "checkpoint": {"save_checkpoint_steps": 10, "keep_checkpoint_max": 2, "prefix": "mlp"},
    }
    callbacks = build_callbacks(config)
    assert [type(cb) for cb in callbacks] == [TrainingMonitor, ModelCheckpoint]
    Model(_cell()).train(1, make_dataset(40 * 16, 16, 0), callbacks=callbacks)
    saved = sorted(p.name for p in (tmp_path / "run" / "checkpoints").glob("*.ckpt"))
    assert saved == ["mlp-1_30.ckpt", "mlp-1_40.ckpt"]  # every 10 steps, the newest 2 kept
    assert [s for s, _ in scalars(tmp_path / "run")["train/loss"]] == list(range(4, 41, 4))


def test_a_mindformers_yaml_builds_the_equivalent_callbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the YAML's relative tensorboard_dir lands here
    callbacks = build_callbacks(FIXTURES / "mindformers_monitor_example.yaml")
    monitor, checkpoints = callbacks
    assert monitor.logdir == tmp_path / "worker" / "tensorboard"
    assert monitor.config.print_every == 1
    assert isinstance(checkpoints, ModelCheckpoint)
    assert monitor.monitor.hparams["optimizer"] == "AdamW"
    monitor.monitor.close()


def test_no_checkpoint_callback_unless_asked(tmp_path: Path) -> None:
    (monitor,) = build_callbacks({"logdir": str(tmp_path), "print_every": 0})
    assert isinstance(monitor, TrainingMonitor)
    monitor.monitor.close()
