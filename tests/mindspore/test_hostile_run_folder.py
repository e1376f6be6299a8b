"""Issue 20, item 11: the run folder deleted or moved while ``Model.train`` writes to it.

The writer notices at its next write that its file is no longer in the folder, says so
in one warning, creates the folder again and goes on in a new file, so every step from
then on reads back with TensorBoard's EventAccumulator; ``run.json`` counts it.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import mindspore as ms
import pytest
from mindspore import nn
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import make_dataset, make_network
from tests.hostile.promise import one_warning, reads_back
from tests.mindspore.conftest import Recorder
from tests.tbread import scalars

STEPS, BATCH, AT = 40, 16, 20
CONFIG = {"print_every": 0, "flush_secs": 0.2, "alerts": {"enabled": False}}


class RemoveFolder(ms.train.Callback):  # type: ignore[misc]
    """At step ``AT``, after the monitor logged it: delete (or move) the run folder."""

    def __init__(self, monitor: TrainingMonitor, how: str) -> None:
        super().__init__()
        self.monitor = monitor
        self.how = how

    def on_train_step_end(self, run_context: Any) -> None:
        if run_context.original_args().cur_step_num != AT:
            return
        folder = self.monitor.monitor.logdir
        self.monitor.monitor.flush()  # steps 1..AT are in the file about to vanish
        if self.how == "delete":
            shutil.rmtree(folder)
        else:
            folder.rename(folder.with_name("moved"))


@pytest.mark.parametrize("how", ["delete", "move"])
def test_training_keeps_its_points_after_the_run_folder_vanishes(
    tmp_path: Path, how: str, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    ms.set_seed(1)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt)
    run = tmp_path / "run"
    monitor = TrainingMonitor(logdir=run, config=CONFIG)
    caplog.set_level(logging.WARNING)
    Model(cell).train(
        1,
        make_dataset(STEPS * BATCH, BATCH, seed=0),
        callbacks=[monitor, recorder, RemoveFolder(monitor, how)],
        dataset_sink_mode=False,
    )
    warning = one_warning(caplog.records, str(run), "deleted or moved", "new event file")
    assert "\n" not in warning
    losses = dict(zip(recorder.steps, recorder.losses))
    later = [(step, losses[step]) for step in range(AT + 1, STEPS + 1)]
    reads_back(run, {"train/loss": later})  # every step after the fault, in the new folder
    assert [s for s, _ in scalars(run)["train/loss"]] == list(range(AT + 1, STEPS + 1))
    if how == "move":  # and the steps before it where the folder went
        earlier = [(step, losses[step]) for step in range(1, AT + 1)]
        reads_back(tmp_path / "moved", {"train/loss": earlier})
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["event_files_vanished"] == 1
    assert info["write_errors"] == 0
    assert info["points_dropped"] == 0
    assert [(run / name).is_file() for name in info["event_files"]] == [True]
