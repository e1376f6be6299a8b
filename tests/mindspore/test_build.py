"""build_callbacks: the callbacks a config describes, in order, doing what it says."""

from __future__ import annotations

import logging
from pathlib import Path

import mindspore as ms
import pytest
from mindspore import nn
from mindspore.train import Model, ModelCheckpoint

from mindwatch.mindspore import (
    TensorBoard,
    TrainingMonitor,
    TrainOneStepWithGradNormCell,
    build_callbacks,
    build_model,
)
from mindwatch.mindspore.demo import make_dataset, make_network
from tests.tbread import accumulator, scalars

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


SEED_000 = {  # seed 000's monitor_config (section 3.2), verbatim but for the folder
    "save_graphs": True,
    "save_graphs_path": "./graph/bert_finetune",
    "collect_freq": 50,
    "max_file_size": 2147483648,
    "collect_specified_data": ["parameters", "gradients"],
    "keep_default_action": False,
    "export_kwargs": {"file_name": "bert_export", "file_format": "AIR"},
}


def _plain_model(use_build_model: bool) -> Model:
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.02, 0.9)
    return build_model(net, loss, opt) if use_build_model else Model(net, loss, opt)


@pytest.mark.parametrize("use_build_model", [False, True], ids=["Model", "build_model"])
def test_the_seeds_config_gets_what_it_names_or_says_how(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, use_build_model: bool
) -> None:
    """Seed 000's config through build_callbacks, with the plain Model(net, loss_fn,
    optimizer): the histograms it names, every collect_freq steps; and the grad norm, or
    (Model's own TrainOneStepCell) one warning at the first step saying how to get it."""
    ms.set_context(mode=ms.GRAPH_MODE)
    config = {"summary_dir": str(tmp_path / "run"), "print_every": 0, **SEED_000}
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        callbacks = build_callbacks(config)
        _plain_model(use_build_model).train(
            1, make_dataset(120 * 16, 16, 0), callbacks=callbacks, dataset_sink_mode=False
        )
    acc = accumulator(tmp_path / "run")
    histograms = acc.Tags()["histograms"]
    params = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    assert sorted(histograms) == sorted(
        f"{kind}/{p}" for kind in ("parameters", "gradients") for p in params
    )
    for tag in histograms:
        assert [e.step for e in acc.Histograms(tag)] == [50, 100]
    read = scalars(tmp_path / "run")
    assert [s for s, _ in read["train/loss"]] == [50, 100]
    told = [r.getMessage() for r in caplog.records if "grad_norm" in r.getMessage()]
    if use_build_model:
        assert [s for s, _ in read["train/grad_norm"]] == [50, 100]
        assert all(v > 0 for _, v in read["train/grad_norm"])
        assert told == []
    else:
        assert "train/grad_norm" not in read
        (warning,) = told  # once, at the first step, with the fix
        assert warning.startswith(
            "mindwatch: no train/grad_norm: the train cell (TrainOneStepCell)"
        )
        assert "mindwatch.mindspore.build_model(net, loss_fn, optimizer)" in warning


def test_a_run_shorter_than_the_histogram_interval_is_told_why_there_are_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    config = {"summary_dir": str(tmp_path / "run"), "print_every": 0, **SEED_000}
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        _plain_model(True).train(1, make_dataset(30 * 16, 16, 0), callbacks=build_callbacks(config))
    assert accumulator(tmp_path / "run").Tags()["histograms"] == []
    (told,) = [r.getMessage() for r in caplog.records if "histogram" in r.getMessage()]
    assert "no histogram written: histogram_every_steps is 50 but training ended after 30" in told


def test_the_seeds_tensorboard_callback_paces_named_histograms_too(tmp_path: Path) -> None:
    named = TensorBoard(tmp_path / "a", collect_specified_data=["parameters"], collect_freq=5)
    assert named.config.histogram_every_steps == 5
    unnamed = TensorBoard(tmp_path / "b")
    assert unnamed.config.histogram_every_steps is None  # none named: none
    by_epoch = TensorBoard(
        tmp_path / "c", histogram_interval=2, collect_specified_data=["gradients"]
    )
    assert (by_epoch.config.histogram_interval, by_epoch.config.histogram_every_steps) == (2, None)
    for callback in (named, unnamed, by_epoch):
        callback.monitor.close()
