"""MindSpore's own LossMonitor / TimeMonitor lines, from a real run, converted back."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import LossMonitor, Model, TimeMonitor

from mindwatch.mindspore.demo import make_dataset, make_network
from mindwatch.tools.convert import convert_logs
from tests.mindspore.conftest import Recorder
from tests.tbread import scalars


def f32(value: float) -> float:
    return float(np.float32(value))


def test_mindspore_loss_and_time_monitor_lines_from_a_real_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    net = make_network()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss_fn, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    recorder = Recorder()
    model.train(
        2,
        make_dataset(20 * 16, 16, 0),
        callbacks=[LossMonitor(1), TimeMonitor(), recorder],
        dataset_sink_mode=False,
    )
    log = tmp_path / "train.log"
    log.write_text(capfd.readouterr().out)
    summary = convert_logs([log], tmp_path / "out")
    assert summary.skipped == 0
    ours = scalars(tmp_path / "out")
    assert [s for s, _ in ours["train/loss"]] == list(range(1, 41))
    assert [v for _, v in ours["train/loss"]] == [f32(x) for x in recorder.losses]
    assert [s for s, _ in ours["perf/step_time_ms"]] == [20, 40]  # TimeMonitor: per epoch
