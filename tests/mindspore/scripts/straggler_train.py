"""A data-parallel job with one slow rank, for the straggler tests (``msrun``, CPU workers).

    msrun --worker_num=N --local_worker_num=N ... straggler_train.py OUT [options]

Every rank trains the same small network data-parallel under ``Model.train`` with
``TrainingMonitor`` (config from ``--config``). The input pipeline reads each batch
from a store that takes ``--input-ms`` to answer (a network file system, an object
store): the wait is real time spent in the pipeline's own thread, so the monitor
measures it as a user's job would.

``--slow-input R``: from batch ``--slow-from`` on, rank R's store is 3x slower. The
pipeline prefetches ``--prefetch`` batches (MindSpore's default is 16): the slow batches
reach training once the buffer has drained, and the tests count the detector's delay
from the slow batch's step, so the buffer is kept small.
``--slow-pace``: ... 3x slower than the job's pace instead (the median time between two
of rank R's reads over the 50 batches before ``--slow-from``: the step time, whichever of
the store and the compute set it), and at least 3x ``--input-ms``. A fast store (4 ms) is
only the job's bottleneck on an idle machine; on a busy one the compute takes longer
than the store, and 3x the store's own time may slow nothing. 3x the pace always makes
rank R the bottleneck, waiting for data about twice the job's step; its store's time
per batch is printed (``slow store: X ms per batch``) for the test's bound.
``--slow-for-s S``: ... and only for S seconds from the first slow read, then as fast as
before (a loader starved for a moment on a busy host; 0: until the end).
``--slow-compute R``: rank R shares one core with ``--busy`` busy processes (it is pinned
to that core and spinning children are pinned beside it) while the other ranks share
the remaining cores; its compute is slower, its all-reduce wait shorter. With 4 ranks
on 2 cores the three others share one core, so rank R needs more than three neighbours
to get less of its core than they get of theirs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.communication import get_group_size, get_rank, init

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--input-ms", type=float, default=15.0)
parser.add_argument("--slow-input", type=int, default=-1)
parser.add_argument("--slow-from", type=int, default=1)
parser.add_argument("--slow-pace", action="store_true")
parser.add_argument("--slow-for-s", type=float, default=0.0)
parser.add_argument("--slow-compute", type=int, default=-1)
parser.add_argument("--busy", type=int, default=1)
parser.add_argument("--width", type=int, default=64)
parser.add_argument("--prefetch", type=int, default=2)
parser.add_argument("--config", default="{}")
args = parser.parse_args()

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")
init()
RANK, WORLD = get_rank(), get_group_size()
ms.set_seed(1)
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)

from mindwatch.mindspore import TrainingMonitor  # noqa: E402

BATCH = 16


def spin() -> None:  # pragma: no cover  (a busy process, killed with the job)
    while True:
        pass


def share_a_core() -> None:
    """This rank and a spinning process on one core; the others keep theirs."""
    cores = sorted(os.sched_getaffinity(0))
    core = cores[RANK % len(cores)]
    os.sched_setaffinity(0, {core})
    for _ in range(args.busy):
        busy = multiprocessing.get_context("fork").Process(target=spin, daemon=True)
        busy.start()
        os.sched_setaffinity(busy.pid, {core})


class Store:
    """Rank-specific batches from a store that takes ``input_ms`` per read."""

    def __init__(self) -> None:
        self.reads: list[float] = []  # when each read began (for --slow-pace)
        self.slow_ms = 3.0 * args.input_ms
        self.slow_since = 0.0  # when the first slow read began

    def __len__(self) -> int:
        return args.steps

    def _pace_ms(self) -> float:
        """The median time between two of the last 50 reads: the job's step."""
        recent = self.reads[-51:]
        gaps = sorted(b - a for a, b in zip(recent, recent[1:]))
        return 1000.0 * gaps[len(gaps) // 2] if gaps else args.input_ms

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        slow = args.slow_input == RANK and index + 1 >= args.slow_from
        if slow and index + 1 == args.slow_from:
            self.slow_since = time.perf_counter()
            pace = self._pace_ms()
            if args.slow_pace:
                self.slow_ms = 3.0 * max(args.input_ms, pace)
            print(f"slow store: {self.slow_ms:.2f} ms per batch (pace {pace:.2f} ms)", flush=True)
        if slow and args.slow_for_s > 0:
            slow = time.perf_counter() - self.slow_since < args.slow_for_s
        self.reads.append(time.perf_counter())
        time.sleep((self.slow_ms if slow else args.input_ms) / 1000.0)
        rng = np.random.default_rng(1000 * RANK + index)
        x = rng.normal(size=(BATCH, args.width)).astype(np.float32)
        y = x.sum(axis=1, keepdims=True).astype(np.float32)
        return x, y


if args.slow_compute == RANK:
    share_a_core()
elif args.slow_compute >= 0:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1:  # the slow rank's core is left to it and its busy neighbour
        others = [c for c in cores if c != cores[args.slow_compute % len(cores)]]
        os.sched_setaffinity(0, set(others))

net = nn.SequentialCell(
    [nn.Dense(args.width, 4 * args.width), nn.ReLU(), nn.Dense(4 * args.width, 1)]
)
model = ms.train.Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), learning_rate=1e-3))
ms.dataset.config.set_prefetch_size(args.prefetch)
dataset = ms.dataset.GeneratorDataset(Store(), ["x", "y"], shuffle=False)
config = {"logdir": str(args.out / "run"), "print_every": 0, **json.loads(args.config)}
model.train(1, dataset, callbacks=[TrainingMonitor(config)], dataset_sink_mode=False)
print(f"rank {RANK} of {WORLD} done", flush=True)
