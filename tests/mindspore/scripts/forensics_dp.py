"""A data-parallel job with a bad batch on rank 1, for the forensics tests (msrun, 2 CPU
workers).

    msrun ... forensics_dp.py OUT [--bad STEP] [--resume-from STEP --skip RUN]

Every row carries its sample id (``100000 * rank + index``) as a third column; rank 1's
labels are x60 in the batch of step ``--bad``. Every rank records, independently of
mindwatch, the sample ids and loss of each step in ``OUT/<name>_rank<r>.json``.

``--resume-from S --skip RUN`` resumes as docs/forensics.md says: the weights of step S
(saved by the first run), the dataset from the row after step S's batch, filtered with
the two documented lines. The resumed run is a new run folder whose steps count from 1
(its step k is the first run's step S + k). Each rank has one spare batch and trains a
fixed number of steps (``take``), so the ranks stay in step although the filter removes
rows from rank 1's shard only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.communication import get_rank, init

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--bad", type=int, default=0)
parser.add_argument("--resume-from", type=int, default=0)
parser.add_argument("--skip", type=Path)
parser.add_argument("--config", default="{}")
args = parser.parse_args()

ms.set_context(mode=ms.GRAPH_MODE)
ms.set_device("CPU")
init()
RANK = get_rank()
ms.set_seed(1)
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)

from mindwatch.forensics import SkipList  # noqa: E402
from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell  # noqa: E402

BATCH = 8
W_TRUE = np.linspace(-1.0, 1.0, 8).astype(np.float32)[:, None]


class Source:
    """Rows (x, y, id) of this rank, from ``start``; one spare batch at the end."""

    def __init__(self, start: int) -> None:
        self.start = start

    def __len__(self) -> int:
        return (args.steps + 1) * BATCH - self.start

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        index = self.start + i
        rng = np.random.default_rng(1000 * RANK + index)
        x = rng.normal(size=8).astype(np.float32)
        y = (x @ W_TRUE).astype(np.float32) + rng.normal(scale=0.1, size=1).astype(np.float32)
        if RANK == 1 and index // BATCH + 1 == args.bad:
            y = y * 60
        return x, y, np.array([100_000 * RANK + index], dtype=np.int64)


class WithIds(nn.Cell):
    def __init__(self, net: nn.Cell) -> None:
        super().__init__()
        self.loss = nn.WithLossCell(net, nn.MSELoss())

    def construct(self, x, y, ids):  # type: ignore[no-untyped-def]
        return self.loss(x, y)


name = "resumed" if args.resume_from else "first"
seen: dict[int, dict[str, object]] = {}


class LocalRecorder(ms.train.Callback):
    """Not mindwatch: this rank's ids and loss at each step."""

    def on_train_step_end(self, run_context):  # type: ignore[no-untyped-def]
        cb = run_context.original_args()
        ids = cb.train_dataset_element[2].asnumpy().reshape(-1).tolist()
        seen[int(cb.cur_step_num)] = {"ids": ids, "loss": float(cb.net_outputs[0].asnumpy())}
        (args.out / f"{name}_rank{RANK}.json").write_text(json.dumps(seen))


net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
callbacks: list[ms.train.Callback] = [LocalRecorder()]
start = 0
if args.resume_from:
    ms.load_param_into_net(
        net, ms.load_checkpoint(str(args.out / f"step{args.resume_from}_rank{RANK}.ckpt"))
    )
    start = args.resume_from * BATCH
dataset = ms.dataset.GeneratorDataset(Source(start), ["x", "y", "id"], shuffle=False)
if args.skip is not None:
    # The two lines of docs/forensics.md:
    dataset = dataset.filter(SkipList.load(args.skip).keep, input_columns=["id"])
steps = args.steps - args.resume_from
dataset = dataset.batch(BATCH, drop_remainder=True).take(steps)


class SaveAt(ms.train.Callback):
    def on_train_step_end(self, run_context):  # type: ignore[no-untyped-def]
        step = int(run_context.original_args().cur_step_num)
        if not args.resume_from and step % 10 == 0:
            ms.save_checkpoint(net, str(args.out / f"step{step}_rank{RANK}.ckpt"))


config = {
    "logdir": str(args.out / name),
    "print_every": 0,
    "aggregate_every": 10,
    "alerts": {"sample_ids": 2},
    **json.loads(args.config),
}
opt = nn.SGD(net.trainable_params(), learning_rate=0.02)
cell = TrainOneStepWithGradNormCell(WithIds(net), opt, layer_norms=True)
callbacks += [SaveAt(), TrainingMonitor(config)]
ms.train.Model(cell).train(1, dataset, callbacks=callbacks, dataset_sink_mode=False)
print(f"rank {RANK} done", flush=True)
