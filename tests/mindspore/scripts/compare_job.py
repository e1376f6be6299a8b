"""``mindwatch demo``'s job (the same MLP, data, schedule, optimizer and monitoring) with
one fault planted, for ``mindwatch compare``'s tests and docs:

    compare_job.py RUN_DIR [--seed S] [--steps N] [--lr-scale F] [--slow-ms MS]

``--lr-scale 0.05`` trains with a learning rate 20 times lower (a loss regression);
``--slow-ms`` sleeps that long in the data source per batch (an input pipeline
slowdown, as a slow disk or decoder gives).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import nn
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor
from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import WarmupCosineLR, make_data, make_dataset, make_network

BASE_LR, BATCH = 0.05, 32


def slow_dataset(samples: int, seed: int, slow_ms: float) -> Any:
    """The demo's training data; each batch takes ``slow_ms`` longer to produce."""
    features, labels = make_data(samples, seed)

    class Source:
        def __getitem__(self, i: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
            if i % BATCH == 0:
                time.sleep(slow_ms / 1000.0)
            return features[i], labels[i : i + 1].reshape(())

        def __len__(self) -> int:
            return samples

    return ds.GeneratorDataset(Source(), ["x", "y"], shuffle=False).batch(
        BATCH, drop_remainder=True
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr-scale", type=float, default=1.0)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    args = parser.parse_args()

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(args.seed)
    net = make_network()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    lr = BASE_LR * args.lr_scale
    schedule = WarmupCosineLR(lr, warmup=max(args.steps // 10, 1), total=args.steps)
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=schedule, momentum=0.9)
    train_cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss_fn), optimizer)
    # The demo's hparams, so that `compare`'s "what changed" names only the planted fault.
    hparams = {
        "model": "mlp-64-128-128-10",
        "base_lr": lr,
        "warmup_steps": max(args.steps // 10, 1),
        "momentum": 0.9,
        "seed": args.seed,
    }
    if args.slow_ms:
        hparams["data_delay_ms"] = args.slow_ms
    monitor = TrainingMonitor(
        {"logdir": args.run_dir, "print_every": 0, "hparams": hparams},
        eval_dataset=make_dataset(512, BATCH, args.seed + 1),
        eval_every=100,
    )
    data = slow_dataset(args.steps * BATCH, args.seed, args.slow_ms)
    Model(train_cell).train(1, data, callbacks=[monitor], dataset_sink_mode=False)


if __name__ == "__main__":
    main()
