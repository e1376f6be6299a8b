"""A custom MindSpore training loop (``ms.value_and_grad``, PyNative) monitored with
``mindwatch.Monitor``.

    python examples/custom_loop.py --logdir runs/custom --steps 200
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn, ops

import mindwatch
from mindwatch.mindspore.demo import make_dataset, make_network


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--logdir", default="runs/custom")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(0)
    net = make_network()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-3)

    def forward(x: ms.Tensor, y: ms.Tensor) -> ms.Tensor:
        return loss_fn(net(x), y)

    grad_fn = ms.value_and_grad(forward, None, optimizer.parameters)
    train = make_dataset(args.steps * 32, 32, seed=0)
    valid = make_dataset(256, 32, seed=1)

    with mindwatch.Monitor(args.logdir, {"print_every": 50}, total_steps=args.steps) as mon:
        for step, (x, y) in enumerate(train.create_tuple_iterator(), start=1):
            loss, grads = grad_fn(x, y)
            grad_norm = ops.sqrt(ops.addn([ops.square(g).sum() for g in grads]))
            optimizer(grads)
            mon.log_step(step, loss=loss, lr=1e-3, grad_norm=grad_norm, samples=x.shape[0])
            if step % 100 == 0:
                losses = [forward(vx, vy).item() for vx, vy in valid.create_tuple_iterator()]
                mon.log_eval(step, loss=float(np.mean(losses)))
                mon.restart_clock()  # evaluation time is not a training step
    print(f"logged {mon.steps_logged} steps to {mon.logdir}")


if __name__ == "__main__":
    main()
