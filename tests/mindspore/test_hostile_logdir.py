"""A log folder that cannot be, given to the MindSpore callback (review of issue 20,
item 10).

``TrainingMonitor(logdir="a\\0b")`` raised a raw ``ValueError: embedded null byte``
(from reading the folder's run.json) and ``logdir=5`` a raw ``TypeError``: the callback
resolved the folder with its own copy of the path handling, not Monitor's. Now each is
the LogDirError Monitor gives, before training, naming what is wrong and the fix; a good
folder after it trains and reads back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mindspore as ms
import pytest
from mindspore import nn
from mindspore.train import Model

from mindwatch import Monitor
from mindwatch.events import LogDirError
from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import make_dataset, make_network
from tests.hostile.promise import config_error, reads_back
from tests.mindspore.conftest import Recorder

CONFIG = {"print_every": 0, "alerts": {"enabled": False}}
BAD = {
    "a NUL": ("runs/a\0b", "NUL character"),
    "a NUL, as bytes": (b"runs/a\0b", "NUL character"),
    "not a path": (5, "must be a path"),
    "empty": ("", "is empty"),
    "blank": ("  ", "is empty"),
}


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_a_log_folder_that_cannot_be_is_a_clear_error_before_training(
    case: tuple[Any, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir, said = case
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LogDirError) as from_callback:
        TrainingMonitor(logdir=logdir, config=CONFIG)
    message = config_error(from_callback, "log folder", said)
    with pytest.raises(LogDirError) as from_monitor:
        Monitor(logdir, CONFIG)
    assert str(from_monitor.value) == message  # the same words as Monitor's
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_the_same_from_the_config_and_a_good_folder_still_trains(
    tmp_path: Path, recorder: Recorder
) -> None:
    with pytest.raises(LogDirError, match="NUL character"):
        TrainingMonitor(config={**CONFIG, "logdir": str(tmp_path / "a\0b")})
    ms.set_seed(1)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.05, momentum=0.9)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt)
    monitor = TrainingMonitor(logdir=tmp_path / "run", config=CONFIG)
    assert monitor.logdir == tmp_path / "run"
    Model(cell).train(
        1, make_dataset(4 * 16, 16, seed=0), callbacks=[monitor, recorder], dataset_sink_mode=False
    )
    reads_back(tmp_path / "run", {"train/loss": list(zip(recorder.steps, recorder.losses))})
