"""``mindwatch demo``: a small, real MindSpore training run with full monitoring.

An MLP classifier (64-128-128-10) learns ten Gaussian clusters made in memory, under
``Model.train`` with :class:`TrainingMonitor` and
:class:`TrainOneStepWithGradNormCell`, a warmup + cosine learning-rate schedule, a
validation loss every 100 steps, per-layer norms of the first and last layer every 10
steps and their parameter and gradient histograms every 50. It runs on CPU in seconds.

``--workers N`` runs the same training data-parallel: the command starts itself under
``msrun`` with N CPU worker processes (MindSpore's own launcher and collectives), each
rank trains on its shard of the data, and mindwatch writes one global run with the
values reduced across ranks plus a ``rank_<r>/`` folder per rank.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from mindwatch.common import invocation
from mindwatch.mindspore.demo_summary import print_summary, say
from mindwatch.run.layout import make_run_dir
from mindwatch.run.record import read_run_info

__all__ = ["WarmupCosineLR", "launch_workers", "make_dataset", "make_network", "run_demo"]

FEATURES, HIDDEN, CLASSES = 64, 128, 10


def _mindspore() -> Any:
    os.environ.setdefault("GLOG_v", "3")  # MindSpore's INFO/WARNING flood hides the demo
    import mindspore as ms

    return ms


def make_data(samples: int, seed: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Ten noisy Gaussian clusters in 64 dimensions (the same centres for every seed)."""
    centres = np.random.default_rng(1234).normal(size=(CLASSES, FEATURES)).astype(np.float32)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=samples).astype(np.int32)
    noise = rng.normal(scale=2.0, size=(samples, FEATURES)).astype(np.float32)
    return centres[labels] + noise, labels


def make_dataset(
    samples: int, batch_size: int, seed: int, *, shards: int = 1, shard: int = 0
) -> Any:
    """A MindSpore dataset of ``(features, label)`` rows, each row a numpy array;
    with ``shards > 1``, this rank's share of it (data parallelism)."""
    import mindspore.dataset as ds

    features, labels = make_data(samples, seed)

    class Source:
        def __getitem__(self, i: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
            return features[i], labels[i : i + 1].reshape(())

        def __len__(self) -> int:
            return samples

    sharding = {"num_shards": shards, "shard_id": shard} if shards > 1 else {}
    dataset = ds.GeneratorDataset(Source(), ["x", "y"], shuffle=False, **sharding)
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


def warmup_cosine(
    step: np.ndarray[Any, Any], base_lr: float, warmup: int, total: int
) -> np.ndarray[Any, Any]:
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


def in_msrun() -> bool:
    """Whether this process was started by ``msrun`` (a worker or its scheduler)."""
    return os.environ.get("MS_ROLE") in ("MS_WORKER", "MS_SCHED")


def run_demo(
    *,
    logdir: str = "./runs",
    steps: int = 300,
    seed: int = 0,
    mode: str = "graph",
    sink: bool = False,
    batch_size: int = 32,
    print_every: int = 25,
    workers: int = 1,
    run_dir: Optional[str] = None,
) -> Path:
    """Train, monitor, print a summary and the TensorBoard command; return the run folder.

    With ``workers > 1`` this is one rank of a data-parallel job under ``msrun`` (see
    :func:`launch_workers`), writing to ``run_dir``.
    """
    ms = _mindspore()
    from mindspore import nn
    from mindspore.train import Model

    from mindwatch.mindspore.callback import TrainingMonitor
    from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    rank, world = 0, 1
    if workers > 1:
        from mindspore.communication import init

        from mindwatch.mindspore.collective import rank_and_world_size

        init()  # in msrun's scheduler process this serves the job and never returns
        rank, world = rank_and_world_size()
        ms.set_auto_parallel_context(
            parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True
        )
    ms.set_seed(seed)  # the same initial weights on every rank
    root = Path(os.path.abspath(logdir))
    folder = Path(run_dir) if run_dir else make_run_dir(root, "demo")
    if rank == 0:
        where = f"{world} CPU workers (msrun, data parallel)" if world > 1 else "CPU"
        say(
            f"mindwatch demo: a {FEATURES}-{HIDDEN}-{HIDDEN}-{CLASSES} MLP on synthetic data, "
            f"{steps} steps, seed {seed}"
        )
        say(f"{mode.upper()} mode, {where}", indent="  ")

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
        "logdir": str(folder),
        "print_every": print_every,
        "hparams": hparams,
        # the first and the last layer: per-layer norms every 10 steps, histograms every 50
        "target": [r"^0\.", r"^4\."],
        "layer_norms_every": 10,
        "param_norm_every": 10,
        "histogram_every_steps": 50,
        "per_rank": world > 1,
    }
    monitor = TrainingMonitor(
        config,
        eval_dataset=make_dataset(512, batch_size, seed + 1),
        eval_every=100,
    )
    started = time.perf_counter()
    Model(train_cell).train(
        1,
        make_dataset(steps * batch_size * world, batch_size, seed, shards=world, shard=rank),
        callbacks=[monitor],
        dataset_sink_mode=sink,
    )
    elapsed = time.perf_counter() - started
    if rank == 0:
        print_summary(folder, root, elapsed, world)
    return folder


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch_workers(
    *,
    workers: int,
    logdir: str = "./runs",
    steps: int = 300,
    seed: int = 0,
    mode: str = "graph",
    sink: bool = False,
) -> Path:
    """Run the demo under ``msrun`` with ``workers`` CPU processes; return the run folder.

    ``msrun`` starts every process as ``python <script>`` with whatever ``python`` is
    first on PATH, so this environment's interpreter is put first. Its exit status is
    not trusted (in PyNative mode it reports 1 after a clean run, MindSpore 2.10): the
    run's ``run.json`` says whether training finished.
    """
    _mindspore()
    bindir = Path(sys.executable).parent
    msrun = shutil.which("msrun", path=str(bindir)) or shutil.which("msrun")
    if msrun is None:
        raise RuntimeError("msrun (MindSpore's launcher) was not found next to this Python")
    root = Path(os.path.abspath(logdir))
    folder = make_run_dir(root, f"demo_{workers}workers")
    logs = folder / "msrun_logs"
    logs.mkdir()
    # msrun needs a script file; one outside the package, since Python puts a script's
    # folder first on sys.path (mindwatch/mindspore/ would then shadow MindSpore).
    script = logs / "mindwatch_worker.py"
    script.write_text("from mindwatch.cli import main\n\nmain()\n", encoding="utf-8")
    command = [
        msrun,
        f"--worker_num={workers}",
        f"--local_worker_num={workers}",
        f"--master_port={_free_port()}",
        f"--log_dir={logs}",
        "--join=True",  # msrun's output (its tail of every worker log) goes to msrun.log;
        # rank 0's log is followed here instead, without MindSpore's log lines
        str(script),
        "demo",
        f"--workers={workers}",
        f"--run-dir={folder}",
        f"--logdir={root}",
        f"--steps={steps}",
        f"--seed={seed}",
        f"--mode={mode}",
        "--sink" if sink else "--no-sink",
    ]
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    # rank 0 prints the closing command for this shell, whose PATH is not msrun's
    env[invocation.ENVIRONMENT] = invocation.mindwatch_command()
    env.setdefault("GLOG_v", "3")
    if sys.stdout.isatty():  # rank 0 prints to a log file: tell it the terminal's width
        env.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    say(f"mindwatch demo: starting {workers} workers with msrun; their logs:")
    say(str(logs), indent="  ")
    with open(logs / "msrun.log", "wb") as launcher_log:
        process = subprocess.Popen(command, env=env, stdout=launcher_log, stderr=subprocess.STDOUT)
        try:
            follow_rank0(process, logs / "worker_0.log")
        finally:
            if process.poll() is None:  # interrupted: do not leave the workers behind
                process.terminate()
                process.wait(30)
    status = read_run_info(folder).status or "missing"
    if status != "finished":
        raise RuntimeError(
            f"the {workers}-worker demo did not finish (run.json status: {status}); "
            f"see the worker logs and msrun.log in {logs}"
        )
    return folder


# MindSpore's own log lines (glog): ``[INFO] DISTRIBUTED(pid,thread,python):time [file] ...``.
# They stay in the worker logs; the demo's console shows only what rank 0 prints.
_MINDSPORE_LOG = re.compile(rb"^\[(DEBUG|INFO|WARNING)\] [A-Z_]+\(\d+,")


def follow_rank0(process: subprocess.Popen[bytes], log: Path, period: float = 0.1) -> None:
    """Print rank 0's output (``log``, which msrun writes) as it comes, until ``process``
    ends, leaving out MindSpore's INFO and WARNING log lines: one ordered stream from
    one rank. Every rank's whole output stays in its ``worker_<r>.log``."""
    position, pending = 0, b""
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    while True:
        ended = process.poll() is not None
        try:
            with open(log, "rb") as handle:
                handle.seek(position)
                pending += handle.read()
                position = handle.tell()
        except FileNotFoundError:
            pass  # the worker has not started yet
        *lines, pending = pending.split(b"\n")
        if ended and pending:
            lines.append(pending)
        for line in lines:
            if not _MINDSPORE_LOG.match(line):
                if out is not None:
                    out.write(line + b"\n")
                else:
                    print(line.decode("utf-8", "replace"))
        sys.stdout.flush()
        if ended:
            return
        time.sleep(period)
