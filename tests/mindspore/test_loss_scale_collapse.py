"""``loss_scale_collapse`` in real MindSpore training with a dynamic loss scale.

A small regression network trains through ``Model.train`` with
``nn.TrainOneStepWithLossScaleCell`` and ``nn.DynamicLossScaleUpdateCell`` (factor 2)
and ``TrainingMonitor``. From a known step on, every input is multiplied by 1e18: the
loss (~1e36) still fits in float32, but its gradients times the loss scale do not, so
every step overflows, its update is skipped and the scale halves, as in an fp16 run
that is about to diverge. The cell returns the scale after its update, so the scale
has halved N times in a row at step ``onset + N - 1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import mindspore as ms
import numpy as np
from mindspore import nn, ops
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor
from tests.mindspore.test_planted_faults import BATCH, Source
from tests.tbread import scalars

ONSET = 40  # the first step whose gradients overflow
HALVINGS = 5  # alerts.loss_scale_collapse.halvings, the default

_overflowed = ops.MultitypeFuncGraph("_overflowed")


@_overflowed.register("Tensor")
def _gradient_overflowed(grad: Any) -> Any:
    finite = ops.cast(ops.isfinite(grad).all(), ms.float32)
    return ops.reshape(1.0 - finite, (-1,))


class CPULossScaleCell(nn.TrainOneStepWithLossScaleCell):  # type: ignore[misc]
    """MindSpore's cell with an overflow check that runs on the CPU: MindSpore 2.10
    checks with GPU or Ascend kernels only (``NPUGetFloatStatusV2``, ``AllFinite``).
    The test is the same: a gradient that is not finite."""

    def get_overflow_status(self, status: Any, compute_output: Any) -> Any:
        return self._get_distributed_overflow_status_on_infnan_mode(_overflowed, compute_output)


def train(
    tmp_path: Path, steps: int, onset: Optional[int], scale_window: int
) -> list[dict[str, Any]]:
    def plant(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if onset is not None and step >= onset:
            return x * np.float32(1e18), y
        return x, y

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
    opt = nn.SGD(net.trainable_params(), learning_rate=0.02)
    scaler = nn.DynamicLossScaleUpdateCell(
        loss_scale_value=2**16, scale_factor=2, scale_window=scale_window
    )
    cell = CPULossScaleCell(nn.WithLossCell(net, nn.MSELoss()), opt, scale_sense=scaler)
    data = ms.dataset.GeneratorDataset(
        Source(steps, plant, delay=None), ["x", "y"], shuffle=False
    ).batch(BATCH)
    monitor = TrainingMonitor(logdir=tmp_path, config={"print_every": 0})
    Model(cell).train(1, data, callbacks=[monitor], dataset_sink_mode=False)
    path = tmp_path / "alerts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_overflowing_gradients_collapse_the_loss_scale(tmp_path: Path) -> None:
    alerts = train(tmp_path, 60, ONSET, scale_window=1000)
    logged = dict(scalars(tmp_path)["train/loss_scale"])  # what the rule saw
    assert [logged[s] for s in range(ONSET - 1, ONSET + HALVINGS)] == [
        2.0**16 / 2**n for n in range(HALVINGS + 1)
    ]
    (alert,) = [a for a in alerts if a["rule"] == "loss_scale_collapse"]
    assert (alert["severity"], alert["step"]) == ("warning", ONSET + HALVINGS - 1)
    assert (alert["metric"], alert["value"], alert["baseline"]) == (
        "train/loss_scale",
        2.0**16 / 2**HALVINGS,
        2.0**16,
    )
    assert alert["message"] == (
        "train/loss_scale halved at 5 steps in a row, from 65536 to 2048: the gradients "
        "overflow at every step"
    )
    assert alert["batch"] == ONSET + HALVINGS - 2  # the batch's index in its epoch
    assert alert["causes"][0].startswith("the gradients overflow at every step")
    # The warning comes before the loss goes NaN (the update at scale 256 does not
    # overflow and wrecks the weights).
    nonfinite = [a["step"] for a in alerts if a["rule"] == "nonfinite"]
    assert nonfinite
    assert min(nonfinite) > alert["step"]


def test_a_healthy_dynamic_loss_scale_is_quiet(tmp_path: Path) -> None:
    alerts = train(tmp_path, 60, None, scale_window=10)  # grows x2 every 10 clean steps
    assert [a for a in alerts if a["rule"] == "loss_scale_collapse"] == []
    scales = [v for _step, v in scalars(tmp_path)["train/loss_scale"]]
    assert len(scales) == 60
    assert scales[-1] == 2.0**16 * 2**6
