"""``mindwatch.SummaryWriter`` in a data-parallel job, run by ``msrun`` with 2 CPU workers:

    msrun --worker_num=2 --local_worker_num=2 ... summarywriter_dp.py OUT

Each rank trains the same small network on its own data (gradients all-reduced) and logs
its loss with ``add_scalar`` into two writers, as a PyTorch user's code would:

* ``OUT/plain``: no collective, so rank 0 writes the run and rank 1 ``rank_1/``;
* ``OUT/reduced``: with :class:`MindSporeCollective`, so rank 0 writes the mean of the
  ranks' losses and rank 1 nothing there.

Every rank records its own losses in ``OUT/local_rank<r>.json`` for the test to compare.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn
from mindspore.communication import get_rank, init

from mindwatch import SummaryWriter
from mindwatch.mindspore.collective import MindSporeCollective

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()

ms.set_device("CPU")
init()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
RANK = get_rank()
ms.set_seed(0)

net = nn.Dense(4, 1)
opt = nn.SGD(net.trainable_params(), learning_rate=0.05)
loss_net = nn.WithLossCell(net, nn.MSELoss())
grad_fn = ms.value_and_grad(loss_net, None, opt.parameters)
reducer = nn.DistributedGradReducer(opt.parameters)
rng = np.random.default_rng(RANK)
config = {"print_every": 0, "hardware": {"enabled": False}}
losses: dict[int, float] = {}

with (
    SummaryWriter(args.out / "plain", config=config) as plain,
    SummaryWriter(args.out / "reduced", config=config, collective=MindSporeCollective()) as reduced,
):
    for step in range(1, args.steps + 1):
        x = Tensor(rng.standard_normal((8, 4)).astype(np.float32))
        y = Tensor((rng.standard_normal((8, 1)) * (1 + RANK)).astype(np.float32))
        loss, grads = grad_fn(x, y)
        opt(reducer(grads))
        losses[step] = float(loss.asnumpy())
        plain.add_scalar("loss", loss, step)  # a MindSpore Tensor, as torch code passes one
        reduced.add_scalar("loss", loss, step)

(args.out / f"local_rank{RANK}.json").write_text(json.dumps(losses))
print(f"rank {RANK} done", flush=True)
