"""Cost of reducing metrics across ranks: a real data-parallel job under msrun (CPU).

The same data-parallel ``Model.train`` (GRAPH mode, gradients all-reduced by MindSpore)
runs with:

* no callbacks (bare);
* ``TrainingMonitor`` with ``aggregate_every: 0``: no reduction, rank 0 writes its own
  values (the baseline the reduction is compared with);
* ``TrainingMonitor`` reducing every 1, 10 and 50 steps, and with the default
  ``auto`` interval (the interval it settled on is shown).

With ``--telemetry`` it measures the cluster-health telemetry instead, every
configuration reducing with the default ``auto`` interval:

* hardware telemetry and the ``straggler`` rule off (the baseline);
* the defaults: a hardware sample every 5 s joining the interval's last step, the
  per-interval medians of the data waits, and the compute micro-benchmark every 30 s;
* the same with the micro-benchmark every 2 s, to measure what one run costs (a round
  is too short to hold a 30 s period; the cost at 30 s is scaled from it).

Rounds must then span several hardware periods: ``--steps 3000`` (about 12 s here).

Two measurements per configuration, as in ``benchmarks/overhead.py``:

* **in-callback**: median time per step spent inside the callbacks on rank 0,
  including the wait for the all-reduces on reduction steps, averaged over all steps (a
  reduction every N steps costs 1/N of its time per step);
* **end to end**: the median interval between consecutive steps. Configurations
  alternate in short rounds; each is compared with the no-reduction run of the same
  round and the median of these paired ratios is printed with its spread.

    python benchmarks/aggregate.py [--workers 2] [--rounds 6] [--steps 400] [--warmup 100]
    python benchmarks/aggregate.py --telemetry --steps 3000 --rounds 6

It starts itself under ``msrun`` with ``--workers`` CPU processes (this environment's
``msrun`` and ``python``); rank 0 prints the table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

os.environ.setdefault("GLOG_v", "3")

CONFIGS: dict[str, Optional[dict[str, Any]]] = {
    "bare": None,
    "no reduction": {"aggregate_every": 0},
    "every 1": {"aggregate_every": 1},
    "every 10": {"aggregate_every": 10},
    "every 50": {"aggregate_every": 50},
    "auto (default)": {},
}
BASELINE = "no reduction"
OFF = {"hardware": {"enabled": False}, "alerts": {"straggler": {"enabled": False}}}
TELEMETRY: dict[str, Optional[dict[str, Any]]] = {
    "bare": None,
    "telemetry off": OFF,
    "defaults (telemetry on)": {},
    "micro-benchmark every 2 s": {"alerts": {"straggler": {"bench_every_s": 2.0}}},
}
TELEMETRY_BASELINE = "telemetry off"


def launch(args: argparse.Namespace) -> int:
    """Run this script under msrun and relay rank 0's output."""
    bindir = Path(sys.executable).parent
    msrun = shutil.which("msrun", path=str(bindir)) or shutil.which("msrun")
    if msrun is None:
        print("msrun not found: install MindSpore in this environment", file=sys.stderr)
        return 2
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    logs = tempfile.mkdtemp(prefix="mindwatch-bench-msrun-")
    command = [
        msrun,
        f"--worker_num={args.workers}",
        f"--local_worker_num={args.workers}",
        f"--master_port={port}",
        f"--log_dir={logs}",
        "--join=True",
        "--tail_worker_log=0",
        str(Path(__file__).resolve()),
        f"--workers={args.workers}",
        f"--rounds={args.rounds}",
        f"--steps={args.steps}",
        f"--hidden={args.hidden}",
        f"--warmup={args.warmup}",
        *(["--telemetry"] if args.telemetry else []),
    ]
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(command, env=env, check=False, capture_output=True, text=True)
    report = Path(logs) / "worker_0.log"
    lines = report.read_text(errors="replace").splitlines() if report.exists() else []
    shown = [line for line in lines if line.startswith(("|", "#", " ", "-")) or not line]
    print("\n".join(line for line in shown if "DISTRIBUTED" not in line))
    if done.returncode != 0 and not any(line.startswith("|") for line in shown):
        print(done.stdout[-4000:], done.stderr[-4000:], file=sys.stderr)
        return 1
    return 0


def worker(args: argparse.Namespace) -> None:
    import mindspore as ms
    import numpy as np
    from mindspore import nn
    from mindspore.communication import get_group_size, get_rank, init
    from mindspore.train import Callback, Model

    from mindwatch.mindspore import TrainingMonitor
    from mindwatch.mindspore.demo import CLASSES, FEATURES, make_dataset, make_network

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    init()
    rank, world = get_rank(), get_group_size()
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)
    ms.set_seed(0)
    batch = 32
    net = make_network(args.hidden)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss_fn, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    data = make_dataset(args.steps * batch * world, batch, 0, shards=world, shard=rank)

    class Timed(Callback):  # type: ignore[misc]
        """Runs the monitor's hooks and times them; records step-end times."""

        def __init__(self, inner: Optional[Any]) -> None:
            self.inner = inner
            self.inside: list[float] = []
            self.ends: list[float] = []

        def on_train_begin(self, run_context: Any) -> None:
            if self.inner is not None:
                self.inner.on_train_begin(run_context)

        def on_train_step_end(self, run_context: Any) -> None:
            run_context.original_args().net_outputs.asnumpy()  # the step's own time ends here
            start = time.perf_counter()
            if self.inner is not None:
                self.inner.on_train_step_end(run_context)
            now = time.perf_counter()
            self.inside.append(now - start)
            self.ends.append(now)

        def on_train_end(self, run_context: Any) -> None:
            if self.inner is not None:
                self.inner.on_train_end(run_context)

    configs, baseline = (TELEMETRY, TELEMETRY_BASELINE) if args.telemetry else (CONFIGS, BASELINE)
    intervals: dict[str, list[float]] = {name: [] for name in configs}
    inside: dict[str, list[float]] = {name: [] for name in configs}
    paired: dict[str, list[float]] = {name: [] for name in configs}
    chosen: list[int] = []
    benches: list[int] = []  # micro-benchmark runs per round, every 2 s
    root = tempfile.mkdtemp(prefix="mindwatch-bench-")
    model.train(1, make_dataset(20 * batch * world, batch, 1, shards=world, shard=rank))  # compile
    for round_no in range(args.rounds):
        medians = {}
        for name, options in configs.items():
            monitor = None
            if options is not None:
                logdir = os.path.join(root, f"r{round_no}", name.replace(" ", "_"))
                monitor = TrainingMonitor({"logdir": logdir, "print_every": 0, **options})
            timed = Timed(monitor)
            model.train(1, data, callbacks=[timed], dataset_sink_mode=False)
            # Steady state: after the first reductions (the first collective also waits
            # for the slower rank to arrive, and auto has settled by then).
            skip = min(args.warmup, len(timed.ends) // 2)
            steps = np.diff(timed.ends[skip:])
            medians[name] = float(np.median(steps))
            intervals[name].extend(steps.tolist())
            inside[name].append(float(np.mean(timed.inside[skip + 1 :])))
            if name in ("auto (default)", "defaults (telemetry on)") and monitor is not None:
                aggregator = monitor.monitor.aggregator
                chosen.append(aggregator.every if aggregator is not None else 0)
            if name == "micro-benchmark every 2 s" and monitor is not None and rank == 0:
                benches.append(bench_runs(Path(logdir)))
        for name in configs:
            paired[name].append(medians[name] / medians[baseline])
    shutil.rmtree(root, ignore_errors=True)
    if rank != 0:
        return

    bare_step = statistics.median(intervals["bare"])
    base_inside = statistics.median(inside[baseline])
    what = "Cluster-health telemetry" if args.telemetry else "Reducing metrics"
    print(
        f"# {what} across {world} ranks: MLP {FEATURES}-{args.hidden}-"
        f"{args.hidden}-{CLASSES}, batch {batch} per rank, data parallel, GRAPH mode, CPU; "
        f"{args.rounds} rounds x {args.steps} steps"
    )
    print()
    print(
        f"| configuration | step (median) | in callbacks / step | vs {baseline} "
        f"(in-callback, % of step) | vs {baseline} (end to end, p25-p75) |"
    )
    print("|---|---|---|---|---|")
    for name in configs:
        step_ms = statistics.median(intervals[name]) * 1e3
        cb_us = statistics.median(inside[name]) * 1e6
        extra = (statistics.median(inside[name]) - base_inside) / bare_step * 100
        ratios = sorted(paired[name])
        p25 = ratios[len(ratios) // 4]
        p75 = ratios[(3 * len(ratios)) // 4 - (1 if len(ratios) % 4 == 0 else 0)]
        e2e = f"x{statistics.median(ratios):.3f} ({p25:.3f}-{p75:.3f})"
        delta = "-" if name in ("bare", baseline) else f"{extra:+.2f} %"
        print(f"| {name} | {step_ms:.2f} ms | {cb_us:.0f} us | {delta} | {e2e} |")
    print()
    print(
        f"  auto settled on an interval of {statistics.median(chosen):.0f} steps "
        f"(per round: {chosen})"
    )
    if args.telemetry:
        every_2s = "micro-benchmark every 2 s"
        extra_ms = (statistics.median(inside[every_2s]) - base_inside) * 1e3 * args.steps
        defaults_ms = (statistics.median(inside["defaults (telemetry on)"]) - base_inside) * 1e3
        runs = statistics.median(benches) if benches else 0
        per_run = (extra_ms - defaults_ms * args.steps) / runs if runs else float("nan")
        print(
            f"  micro-benchmark: {runs:.0f} runs per round every 2 s, about {per_run:.1f} ms "
            f"each on the training thread; every 30 s (the default) that is "
            f"{per_run / 30_000 * 100:.3f} % of the time"
        )


def bench_runs(logdir: Path) -> int:
    """How many micro-benchmark runs rank 0 wrote in ``logdir`` (its global run)."""
    from mindwatch import read_scalars

    return len(read_scalars(logdir, runs={"."}, tags={"ranks/bench_ms_max"}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=100, help="steps not measured")
    parser.add_argument(
        "--telemetry", action="store_true", help="hardware telemetry and straggler on vs off"
    )
    args = parser.parse_args()
    if os.environ.get("MS_ROLE") not in ("MS_WORKER", "MS_SCHED"):
        return launch(args)
    worker(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
