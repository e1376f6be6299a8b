"""What ``train/grad_norm`` costs per step: ``Model(net, loss_fn, opt)`` vs ``build_model``.

The same MLP is trained with MindSpore's own train cell (``Model``) and with
:func:`mindwatch.mindspore.build_model` (the same step plus the in-graph global
gradient norm), no callbacks, GRAPH mode, CPU. The two alternate in short rounds; each
round's median step interval of ``build_model`` is divided by ``Model``'s of the same
round, and the median of these paired ratios (with its 25th-75th percentile spread, by
linear interpolation between the ratios measured: never outside them, whatever the
number of rounds) is printed, which cancels this shared machine's slow drift. Both
graphs are compiled before timing.

    python benchmarks/grad_norm.py [--rounds 10] [--steps 80] [--sizes small,medium,large]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.train import Callback, Model

from mindwatch.mindspore import build_model
from mindwatch.mindspore.demo import make_network
from overhead import SIZES, dataset  # the same models' sizes and data as overhead.py


class StepTimer(Callback):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []

    def on_train_step_end(self, run_context: Any) -> None:
        outputs = run_context.original_args().net_outputs
        loss = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        loss.asnumpy()  # wait for the step
        self.ends.append(time.perf_counter())


def model(hidden: int, with_norm: bool) -> Any:
    net = make_network(hidden)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    return build_model(net, loss, opt) if with_norm else Model(net, loss, opt)


def median_step(m: Any, steps: int, batch: int) -> float:
    timer = StepTimer()
    m.train(1, dataset(steps, batch), callbacks=[timer], dataset_sink_mode=False)
    return statistics.median(np.diff(timer.ends[5:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--sizes", default=",".join(SIZES))
    args = parser.parse_args()
    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    print(f"{args.rounds} rounds x {args.steps} steps, alternating; GRAPH mode, CPU, no callbacks")
    print(f"{'model':34} {'Model step':>10} {'build_model':>11} {'ratio (p25-p75)':>22}")
    for size in args.sizes.split(","):
        hidden, batch = SIZES[size]
        plain, norm = model(hidden, False), model(hidden, True)
        for m in (plain, norm):
            median_step(m, 10, batch)  # compile
        ratios, plain_ms, norm_ms = [], [], []
        for r in range(args.rounds):
            order = [(plain, plain_ms), (norm, norm_ms)][:: 1 if r % 2 else -1]
            for m, out in order:
                out.append(median_step(m, args.steps, batch))
            ratios.append(norm_ms[-1] / plain_ms[-1])
        q = statistics.quantiles(ratios, n=4, method="inclusive")
        name = f"{size}: 64-{hidden}-{hidden}-10, batch {batch}"
        print(
            f"{name:34} {statistics.median(plain_ms) * 1e3:7.2f} ms "
            f"{statistics.median(norm_ms) * 1e3:8.2f} ms "
            f"{statistics.median(ratios):9.3f} ({q[0]:.3f}-{q[2]:.3f})"
        )


if __name__ == "__main__":
    main()
