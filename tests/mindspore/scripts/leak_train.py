"""A data-parallel ``Model.train`` job, run by ``msrun`` with 2 CPU workers, in which
rank 1 may leak host memory (``test_hardware_rules.py``).

    msrun --worker_num=2 --local_worker_num=2 ... leak_train.py OUT [options]

``--leak-mb M``: from ``--leak-from`` steps on, rank 1 keeps ``M`` MB of NumPy arrays
more at every step in a list it never empties (the arrays are written, so their pages
are really resident). ``--pace-ms``: every rank sleeps that long per step, so the run
spans many sampling periods at a rate the test can predict. Independently of mindwatch,
every rank records its own RSS (psutil) at every step in ``OUT/rss_rank<r>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import mindspore as ms
import numpy as np
import psutil
from mindspore import nn
from mindspore.communication import get_rank, init

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("--steps", type=int, default=600)
parser.add_argument("--leak-mb", type=float, default=0.0)
parser.add_argument("--leak-from", type=int, default=1)
parser.add_argument("--pace-ms", type=float, default=20.0)
parser.add_argument("--config", default="{}")
args = parser.parse_args()

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")
init()
RANK = get_rank()
ms.set_seed(1)
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell  # noqa: E402

BATCH = 8
W_TRUE = np.linspace(-1.0, 1.0, 8).astype(np.float32)[:, None]


class Source:
    def __len__(self) -> int:
        return args.steps * BATCH

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(1000 * RANK + index)
        x = rng.normal(size=8).astype(np.float32)
        return x, (x @ W_TRUE).astype(np.float32)


held: list[np.ndarray] = []  # the leak: never emptied
rss: list[tuple[int, float]] = []
process = psutil.Process(os.getpid())


class Leak(ms.train.Callback):
    """Rank 1 keeps ``leak_mb`` more every step; every rank paces its steps and records
    its own RSS."""

    def on_train_step_end(self, run_context):  # type: ignore[no-untyped-def]
        step = int(run_context.original_args().cur_step_num)
        if RANK == 1 and args.leak_mb > 0 and step >= args.leak_from:
            held.append(np.full(int(args.leak_mb * 1024 * 1024 / 8), float(step)))
        rss.append((step, process.memory_info().rss / 1024 / 1024))
        time.sleep(args.pace_ms / 1000.0)


net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
opt = nn.SGD(net.trainable_params(), learning_rate=0.02)
dataset = ms.dataset.GeneratorDataset(Source(), ["x", "y"], shuffle=False).batch(BATCH)
config = {"logdir": str(args.out / "run"), "print_every": 0, **json.loads(args.config)}
train_cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, nn.MSELoss()), opt)
try:
    ms.train.Model(train_cell).train(
        1, dataset, callbacks=[Leak(), TrainingMonitor(config)], dataset_sink_mode=False
    )
finally:
    (args.out / f"rss_rank{RANK}.json").write_text(json.dumps(rss))
print(f"rank {RANK} done, {len(held)} arrays held", flush=True)
