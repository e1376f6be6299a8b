"""``mindwatch demo``: a small, real MindSpore training run with full monitoring.

An MLP classifier (64-128-128-10) learns ten Gaussian clusters made in memory, under
``Model.train`` with :class:`TrainingMonitor` and
:class:`TrainOneStepWithGradNormCell`, a warmup + cosine learning-rate schedule, a
validation loss every 100 steps, per-layer norms of the first and last layer every 10
steps and their parameter and gradient histograms every 50. It runs on CPU in seconds.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from mindwatch.rundir import make_run_dir

__all__ = ["WarmupCosineLR", "make_dataset", "make_network", "run_demo"]

FEATURES, HIDDEN, CLASSES = 64, 128, 10


def _mindspore() -> Any:
    os.environ.setdefault("GLOG_v", "3")  # MindSpore's INFO/WARNING flood hides the demo
    import mindspore as ms

    return ms


def make_data(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ten noisy Gaussian clusters in 64 dimensions (the same centres for every seed)."""
    centres = np.random.default_rng(1234).normal(size=(CLASSES, FEATURES)).astype(np.float32)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=samples).astype(np.int32)
    noise = rng.normal(scale=2.0, size=(samples, FEATURES)).astype(np.float32)
    return centres[labels] + noise, labels


def make_dataset(samples: int, batch_size: int, seed: int) -> Any:
    """A MindSpore dataset of ``(features, label)`` rows, each row a numpy array."""
    import mindspore.dataset as ds

    features, labels = make_data(samples, seed)

    class Source:
        def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
            return features[i], labels[i : i + 1].reshape(())

        def __len__(self) -> int:
            return samples

    dataset = ds.GeneratorDataset(Source(), ["x", "y"], shuffle=False)
    return dataset.batch(batch_size, drop_remainder=True)


def make_network(hidden: int = HIDDEN) -> Any:
    """The demo's MLP: 64 features, two hidden layers of ``hidden`` units, 10 classes."""
    from mindspore import nn

    return nn.SequentialCell(
        nn.Dense(FEATURES, hidden),
        nn.ReLU(),
        nn.Dense(hidden, hidden),
        nn.ReLU(),
        nn.Dense(hidden, CLASSES),
    )


def warmup_cosine(step: np.ndarray, base_lr: float, warmup: int, total: int) -> np.ndarray:
    """The schedule of :class:`WarmupCosineLR` in numpy, at optimizer step ``step`` (0-based)."""
    step = np.asarray(step, dtype=np.float64)
    warm = base_lr * (step + 1) / warmup
    progress = np.clip((step - warmup) / max(total - warmup, 1), 0.0, 1.0)
    cosine = 0.5 * base_lr * (1 + np.cos(math.pi * progress))
    return np.where(step < warmup, warm, cosine)


def _schedule_class() -> Any:
    import mindspore as ms
    from mindspore import ops
    from mindspore.nn.learning_rate_schedule import LearningRateSchedule

    class WarmupCosine(LearningRateSchedule):  # type: ignore[misc]
        """Linear warmup to ``base_lr`` over ``warmup`` steps, then cosine decay to 0."""

        def __init__(self, base_lr: float, warmup: int, total: int) -> None:
            super().__init__()
            self.base_lr = float(base_lr)
            self.warmup = float(warmup)
            self.decay = float(max(total - warmup, 1))

        def construct(self, global_step: Any) -> Any:
            step = ops.cast(global_step, ms.float32)
            warm = self.base_lr * (step + 1.0) / self.warmup
            progress = ops.clip_by_value((step - self.warmup) / self.decay, 0.0, 1.0)
            cosine = 0.5 * self.base_lr * (1.0 + ops.cos(math.pi * progress))
            return ops.select(step < self.warmup, warm, cosine)

    return WarmupCosine


def WarmupCosineLR(base_lr: float, warmup: int, total: int) -> Any:  # noqa: N802 - a class factory
    """Build the demo's warmup + cosine ``LearningRateSchedule`` (MindSpore imported on use)."""
    return _schedule_class()(base_lr, warmup, total)


def run_demo(
    *,
    logdir: str = "./runs",
    steps: int = 300,
    seed: int = 0,
    mode: str = "graph",
    sink: bool = False,
    batch_size: int = 32,
    print_every: int = 25,
) -> Path:
    """Train, monitor, print a summary and the TensorBoard command; return the run folder."""
    ms = _mindspore()
    from mindspore import nn
    from mindspore.train import Model

    from mindwatch.mindspore.callback import TrainingMonitor
    from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    ms.set_seed(seed)
    root = Path(os.path.abspath(logdir))
    run_dir = make_run_dir(root, "demo")
    print(
        f"mindwatch demo: a {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES} MLP on synthetic data, "
        f"{steps} steps, {mode.upper()} mode, CPU, seed {seed}"
    )

    net = make_network()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    schedule = WarmupCosineLR(0.05, warmup=max(steps // 10, 1), total=steps)
    optimizer = nn.Momentum(net.trainable_params(), learning_rate=schedule, momentum=0.9)
    train_cell = TrainOneStepWithGradNormCell(
        nn.WithLossCell(net, loss_fn), optimizer, layer_norms=True
    )
    hparams = {
        "model": f"mlp-{FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES}",
        "base_lr": 0.05,
        "warmup_steps": max(steps // 10, 1),
        "momentum": 0.9,
        "seed": seed,
    }
    config = {
        "logdir": str(run_dir),
        "print_every": print_every,
        "hparams": hparams,
        # the first and the last layer: per-layer norms every 10 steps, histograms every 50
        "target": [r"^0\.", r"^4\."],
        "layer_norms_every": 10,
        "param_norm_every": 10,
        "histogram_every_steps": 50,
    }
    monitor = TrainingMonitor(
        config,
        eval_dataset=make_dataset(512, batch_size, seed + 1),
        eval_every=100,
    )
    started = time.perf_counter()
    Model(train_cell).train(
        1,
        make_dataset(steps * batch_size, batch_size, seed),
        callbacks=[monitor],
        dataset_sink_mode=sink,
    )
    elapsed = time.perf_counter() - started
    _summary(run_dir, root, elapsed, monitor)
    return run_dir


def _summary(run_dir: Path, root: Path, elapsed: float, monitor: Any) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    losses = [(e.step, e.value) for e in acc.Scalars("train/loss")] if "train/loss" in tags else []
    print()
    print(f"Run folder: {run_dir}")
    if losses:
        best_step, best = min(losses, key=lambda p: p[1])
        last = losses[-1][1]
        print(
            f"  {len(losses)} steps in {elapsed:.1f} s; loss {losses[0][1]:.4f} -> {last:.4f} "
            f"(best {best:.4f} at step {best_step})"
        )
    if "eval/loss" in tags:
        evals = ", ".join(f"{e.value:.4f}@{e.step}" for e in acc.Scalars("eval/loss"))
        print(f"  eval/loss: {evals}")
    print(f"  {len(tags)} curves: {', '.join(sorted(tags))}")
    if monitor.monitor.nonfinite:
        print(f"  non-finite values: {monitor.monitor.nonfinite}")
    print()
    print("View it in TensorBoard:")
    print(f"  tensorboard --logdir {_quote(str(root))}")


def _quote(path: str) -> str:
    import shlex

    return shlex.quote(path)
