"""A training job for the resume test: 3 epochs x 100 steps, a checkpoint every 100 steps.

    resume_train.py LOGDIR CKPT_DIR RECORD first     # train from scratch (the test kills it)
    resume_train.py LOGDIR CKPT_DIR RECORD resume    # resume from the step-200 checkpoint

RECORD gets one "step loss" line per step, written by an independent callback, so the
test knows what the network really returned in each attempt.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
from mindspore import nn
from mindspore.train import Callback, CheckpointConfig, Model, ModelCheckpoint

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import make_dataset, make_network

STEPS_PER_EPOCH, BATCH = 100, 16


class Record(Callback):  # type: ignore[misc]
    def __init__(self, path: str, initial_epoch: int) -> None:
        super().__init__()
        self.handle = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self.offset = initial_epoch * STEPS_PER_EPOCH

    def on_train_step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        loss = cb.net_outputs[0].item()
        self.handle.write(f"{cb.cur_step_num + self.offset} {loss!r}\n")
        self.handle.flush()
        time.sleep(0.01)  # slow enough for the test to kill it around step 250


def main() -> None:
    logdir, ckpt_dir, record, phase = sys.argv[1:5]
    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    net = make_network()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=0.02, momentum=0.9)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss_fn), opt)
    initial_epoch = 0
    if phase == "resume":
        params = ms.load_checkpoint(os.path.join(ckpt_dir, "net-2_100.ckpt"))
        ms.load_param_into_net(cell, params)
        initial_epoch = 2
    checkpoints = ModelCheckpoint(
        prefix="net",
        directory=ckpt_dir,
        config=CheckpointConfig(save_checkpoint_steps=100, keep_checkpoint_max=5),
    )
    monitor = TrainingMonitor(logdir=logdir, config={"print_every": 0, "flush_secs": 0.5})
    Model(cell).train(
        3,
        # The resumed attempt draws other data, so the test can tell whose points it sees
        # (training is otherwise bit-for-bit deterministic).
        make_dataset(STEPS_PER_EPOCH * BATCH, BATCH, seed=0 if phase == "first" else 1),
        callbacks=[monitor, checkpoints, Record(record, initial_epoch)],
        initial_epoch=initial_epoch,
    )


if __name__ == "__main__":
    main()
