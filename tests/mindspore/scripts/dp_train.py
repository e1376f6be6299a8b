"""A data-parallel job for the multi-card tests, run by ``msrun`` with 2 CPU workers.

    msrun --worker_num=2 --local_worker_num=2 ... dp_train.py OUT ENTRY [options]

ENTRY is ``model`` (``Model.train`` with ``TrainingMonitor``) or ``loop`` (a custom
``value_and_grad`` loop with ``Monitor`` and ``MindSporeCollective``). Each rank trains
on its own data; rank 1's labels are corrupted (x20) at the steps given by
``--corrupt``. Independently of mindwatch, every rank records what its network really
returned at each step in ``OUT/local_rank<r>.json`` (rewritten at every step, so that it
survives a rank that MindSpore kills), for the test to compare with.

``--die-at N``: rank 1 leaves at step N (``os._exit(0)``: msrun counts a 0 exit as
done, so rank 0 is left running alone). ``--no-dp``: no gradient all-reduce, so that
mindwatch's own all-gather is the only collective (rank 0 can then train on alone).
``--slow-input-ms X``: rank 1's input pipeline takes X ms more per batch (a straggler;
the prefetch buffer is then 1 deep, so that compiling does not fill it ahead).
``--hold``: after the last step, before the monitor closes, every rank writes
``OUT/held_rank<r>`` and waits (at most 120 s) for ``OUT/release``, so a test can
scrape the exporter of a job that has trained.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops
from mindspore.communication import get_group_size, get_rank, init

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("entry", choices=["model", "loop"])
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--corrupt", default="")
parser.add_argument("--die-at", type=int, default=0)
parser.add_argument("--no-dp", action="store_true")
parser.add_argument("--hold", action="store_true")
parser.add_argument("--slow-input-ms", type=float, default=0.0)  # rank 1's, per batch
parser.add_argument("--config", default="{}")
parser.add_argument("--mode", choices=["graph", "pynative"], default="graph")
args = parser.parse_args()

ms.set_context(mode=ms.GRAPH_MODE if args.mode == "graph" else ms.PYNATIVE_MODE)
ms.set_device("CPU")
init()
RANK, WORLD = get_rank(), get_group_size()
ms.set_seed(1)  # the same initial weights on every rank
if not args.no_dp:
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)

import mindwatch  # noqa: E402  (after MindSpore's setup, as a user's script would)
from mindwatch.mindspore import (  # noqa: E402
    MindSporeCollective,
    TrainingMonitor,
    TrainOneStepWithGradNormCell,
)

BATCH = 8
CORRUPT = {int(s) for s in args.corrupt.split(",") if s}
W_TRUE = np.linspace(-1.0, 1.0, 8).astype(np.float32)[:, None]


class Source:
    """Random access, rank-specific data; rank 1's labels x20 on the corrupt steps."""

    def __len__(self) -> int:
        return args.steps * BATCH

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if RANK == 1 and args.slow_input_ms:
            time.sleep(args.slow_input_ms / 1000.0 / BATCH)
        rng = np.random.default_rng(1000 * RANK + index)
        x = rng.normal(size=8).astype(np.float32)
        y = (x @ W_TRUE).astype(np.float32) + rng.normal(scale=0.1, size=1).astype(np.float32)
        step = index // BATCH + 1
        if RANK == 1 and step in CORRUPT:
            y = y * 20
        return x, y


def network() -> nn.Cell:
    return nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])


local: dict[int, dict[str, float]] = {}


def record(step: int, loss: float, grad_norm: float) -> None:
    local[step] = {"loss": loss, "grad_norm": grad_norm}
    save_local()  # at every step: MindSpore 2.7/2.8 kill a rank whose peer died, no finally runs


def maybe_die(step: int) -> None:
    """Rank 1 leaves after logging step die_at - 1."""
    if args.die_at and RANK == 1 and step + 1 == args.die_at:
        save_local()
        os._exit(0)


def save_local() -> None:
    path = args.out / f"local_rank{RANK}.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(local))
    temporary.replace(path)  # whole or absent, whenever the rank is killed


class LocalRecorder(ms.train.Callback):
    """Not mindwatch: what this rank's train cell returned, step by step."""

    def on_train_step_end(self, run_context):  # type: ignore[no-untyped-def]
        cb = run_context.original_args()
        loss, grad_norm = cb.net_outputs[:2]  # (loss, grad_norm, squared_norms)
        record(int(cb.cur_step_num), float(loss.asnumpy()), float(grad_norm.asnumpy()))


class Dier(ms.train.Callback):
    def on_train_step_end(self, run_context):  # type: ignore[no-untyped-def]
        maybe_die(int(run_context.original_args().cur_step_num))


class Hold(ms.train.Callback):
    """Before the monitor: after training, wait for the test's OUT/release."""

    def on_train_end(self, run_context):  # type: ignore[no-untyped-def]
        (args.out / f"held_rank{RANK}").write_text("")
        deadline = time.monotonic() + 120
        while not (args.out / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.1)


config = {"logdir": str(args.out / "run"), "print_every": 0, **json.loads(args.config)}
net = network()
opt = nn.SGD(net.trainable_params(), learning_rate=0.02)
if args.slow_input_ms:  # no deep prefetch buffer filled while compiling to hide it
    ms.dataset.config.set_prefetch_size(1)
dataset = ms.dataset.GeneratorDataset(Source(), ["x", "y"], shuffle=False).batch(BATCH)

if args.entry == "model":
    train_cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    model = ms.train.Model(train_cell)
    hold = [Hold()] if args.hold else []
    callbacks = [LocalRecorder(), *hold, TrainingMonitor(config), Dier()]
    try:
        model.train(1, dataset, callbacks=callbacks, dataset_sink_mode=False)
    finally:  # also when training fails (a dead peer): the test compares what was seen
        save_local()
else:
    loss_net = nn.WithLossCell(net, nn.MSELoss())
    grad_fn = ms.value_and_grad(loss_net, None, opt.parameters)
    reducer = nn.DistributedGradReducer(opt.parameters) if not args.no_dp else None

    def train_step(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        loss, grads = grad_fn(x, y)
        if reducer is not None:
            grads = reducer(grads)
        grad_norm = ops.sqrt(ops.addn([ops.reduce_sum(ops.square(g)) for g in grads]))
        opt(grads)
        return loss, grad_norm

    collective = MindSporeCollective()
    with mindwatch.Monitor(config=config, collective=collective) as monitor:
        for step, (x, y) in enumerate(dataset.create_tuple_iterator(num_epochs=1), start=1):
            loss, grad_norm = train_step(x, y)
            record(step, float(loss.asnumpy()), float(grad_norm.asnumpy()))
            monitor.log_step(step, loss=loss, grad_norm=grad_norm, lr=0.02, samples=BATCH)
            maybe_die(step)
save_local()
print(f"rank {RANK} of {WORLD} done", flush=True)
