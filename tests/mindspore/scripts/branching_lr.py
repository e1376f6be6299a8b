"""Train with a learning-rate schedule that branches on the step (``if`` on a tensor), as
MindFormers' warm-up schedules do, in GRAPH mode; print the lrs the optimizer used.

    branching_lr.py LOGDIR

Such a schedule cannot be compiled with a vector of steps: MindSpore's compiler would
print an ``[ERROR]`` call stack into this process's stderr. The test reads stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops
from mindspore.common import dtype as mstype
from mindspore.nn.learning_rate_schedule import LearningRateSchedule
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor
from mindwatch.mindspore.demo import make_dataset, make_network

WARMUP, BASE = 5, 0.05


class WarmupThenHalf(LearningRateSchedule):  # type: ignore[misc]
    """lr = BASE * (step + 1) / WARMUP during warm-up, then BASE / 2."""

    def __init__(self) -> None:
        super().__init__()
        self.greater = ops.Greater()
        self.warmup = Tensor(np.array([WARMUP], np.int32))

    def construct(self, global_step: Any) -> Any:
        if self.greater(self.warmup, global_step):
            step = ops.cast(global_step, mstype.float32)
            return BASE * (step + 1.0) / WARMUP
        return ops.fill(mstype.float32, global_step.shape, BASE / 2)


def main() -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), WarmupThenHalf(), 0.9))
    monitor = TrainingMonitor(logdir=sys.argv[1], config={"print_every": 0})
    model.train(1, make_dataset(12 * 16, 16, 0), callbacks=[monitor], dataset_sink_mode=False)
    expected = [BASE * (s + 1) / WARMUP if s < WARMUP else BASE / 2 for s in range(12)]
    print(json.dumps({"expected": expected}))


if __name__ == "__main__":
    main()
