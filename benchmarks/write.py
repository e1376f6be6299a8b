"""Write throughput and caller-thread cost: mindwatch vs torch's and tensorboardX's SummaryWriter.

Workload (as in the design notes' perf anchors): 200,000 scalar points, 10 tags x 20,000
steps, every step writing all 10 tags. Each writer gets a fresh folder; the writers run
round-robin within each repeat so they share the machine's noise; medians are printed,
and ratios are taken per repeat, then the median.

* caller: time in the logging loop on the calling thread (what training feels);
* drain:  close(), i.e. waiting for the background work to reach the disk;
* total:  caller + drain -> points/s end to end.

``mindwatch SummaryWriter.add_scalar`` is torch's call on mindwatch's writer (each value
also reaches the anomaly rules and the console); the line under the table gives its
caller time per call against torch's and tensorboardX's ``add_scalar``.

A second table paces the loop like training (10 scalars, then 2 ms of GIL-free
"compute") and reports the per-scalar latency seen by the caller.

Every file is read back with TensorBoard's EventAccumulator and checked for exact steps
and values before any number is printed.

    python benchmarks/write.py [--repeats 3] [--steps 20000] [--paced-only]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import mindwatch
from mindwatch.events import EventFileWriter

TAGS = [f"bench/tag{i}" for i in range(10)]
SUMMARY_WRITER = "mindwatch SummaryWriter.add_scalar"
PEERS = {
    "torch": "torch SummaryWriter.add_scalar",
    "tensorboardX": "tensorboardX SummaryWriter.add_scalar",
}
Loop = Callable[[Path, int], tuple[float, float]]


def values(steps: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.random((steps, len(TAGS))).astype(np.float32).astype(np.float64)


def per_point(writer: Any, data: np.ndarray) -> tuple[float, float]:
    """Caller and drain time of one ``add_scalar(tag, value, step)`` call per point."""
    rows = data.tolist()
    add = writer.add_scalar
    t0 = time.perf_counter()
    for step, row in enumerate(rows):
        for tag, value in zip(TAGS, row):
            add(tag, value, step)
    t1 = time.perf_counter()
    writer.close()
    return t1 - t0, time.perf_counter() - t1


def run_mindwatch_add_scalar(folder: Path, data: np.ndarray) -> tuple[float, float]:
    return per_point(EventFileWriter(folder), data)


def run_mindwatch_add_scalars(folder: Path, data: np.ndarray) -> tuple[float, float]:
    rows = data.tolist()
    writer = EventFileWriter(folder)
    t0 = time.perf_counter()
    for step, row in enumerate(rows):
        writer.add_scalars(step, list(zip(TAGS, row)))
    t1 = time.perf_counter()
    writer.close()
    return t1 - t0, time.perf_counter() - t1


def run_monitor_log_step(folder: Path, data: np.ndarray) -> tuple[float, float]:
    """Monitor.log_step with 10 user scalars (it also derives perf/step_time_ms)."""
    kwargs = [dict(zip(TAGS, row)) for row in data.tolist()]  # built outside the timing
    mon = mindwatch.Monitor(folder, {"print_every": 0})
    log_step = mon.log_step
    t0 = time.perf_counter()
    for step, row in enumerate(kwargs):
        log_step(step, **row)
    t1 = time.perf_counter()
    mon.close()
    return t1 - t0, time.perf_counter() - t1


def run_summarywriter_add_scalar(folder: Path, data: np.ndarray) -> tuple[float, float]:
    """mindwatch.SummaryWriter.add_scalar: torch's call, through a Monitor (the rules,
    console and run.json see every value)."""
    return per_point(mindwatch.SummaryWriter(folder, config={"print_every": 0}), data)


def _summary_writer(module: str) -> Any:
    try:
        if module == "torch":
            from torch.utils.tensorboard import SummaryWriter
        else:
            from tensorboardX import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter


def run_peer(module: str) -> Callable[[Path, np.ndarray], tuple[float, float]]:
    def run(folder: Path, data: np.ndarray) -> tuple[float, float]:
        return per_point(_summary_writer(module)(str(folder)), data)

    return run


def verify(folder: Path, data: np.ndarray) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    for i, tag in enumerate(TAGS):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        got = np.array([e.value for e in events], dtype=np.float32)
        if steps != list(range(len(data))) or not np.array_equal(
            got, data[:, i].astype(np.float32)
        ):
            raise SystemExit(f"{folder.name}: {tag} read back wrong")


def _nothing() -> None:
    return None


def paced(writer_kind: str, folder: Path, steps: int = 1000) -> float:
    """Median per-value caller latency (us) with 2 ms of sleep between steps."""
    row = [0.5] * len(TAGS)
    kwargs = dict(zip(TAGS, row))
    per_step = len(TAGS)  # values logged per step
    close: Callable[[], None] = _nothing
    if writer_kind == "monitor":
        mon = mindwatch.Monitor(folder, {"print_every": 0})

        def step_fn(step: int) -> None:
            mon.log_step(step, **kwargs)

        close = mon.close
    elif writer_kind == "monitor_typical":
        # loss, lr, grad_norm + derived step time and samples/s: 5 values per step
        mon = mindwatch.Monitor(folder, {"print_every": 0})
        per_step = 5

        def step_fn(step: int) -> None:
            mon.log_step(step, loss=0.5, lr=1e-3, grad_norm=1.5, samples=32)

        close = mon.close
    elif writer_kind == "summarywriter":
        sw = mindwatch.SummaryWriter(folder, config={"print_every": 0})

        def step_fn(step: int) -> None:
            for tag, value in zip(TAGS, row):
                sw.add_scalar(tag, value, step)

        close = sw.close
    elif writer_kind == "floor":
        # A no-op call per step: on a VM, the first instructions after a sleep are slow
        # (cold caches, CPU wake-up); this is the part of every row nobody can avoid.
        def step_fn(step: int) -> None:
            return None

    else:  # one add_scalar call per value: mindwatch's writer or a peer SummaryWriter
        writer = (
            EventFileWriter(folder)
            if writer_kind == "writer"
            else _summary_writer(writer_kind)(str(folder))
        )

        def step_fn(step: int) -> None:
            for tag, value in zip(TAGS, row):
                writer.add_scalar(tag, value, step)

        close = writer.close
    samples = []
    for step in range(steps):
        t0 = time.perf_counter_ns()
        step_fn(step)
        samples.append((time.perf_counter_ns() - t0) / per_step)
        time.sleep(0.002)
    close()
    return statistics.median(samples) / 1000.0


def tight(args: argparse.Namespace, tmp: Path) -> None:
    """The first table: the writers in a tight loop, against torch's and tensorboardX's."""
    data = values(args.steps)
    points = data.size
    contenders: dict[str, Callable[[Path, np.ndarray], tuple[float, float]]] = {
        "mindwatch EventFileWriter.add_scalar": run_mindwatch_add_scalar,
        "mindwatch EventFileWriter.add_scalars (10/step)": run_mindwatch_add_scalars,
        "mindwatch Monitor.log_step (10 scalars/step)": run_monitor_log_step,
        SUMMARY_WRITER: run_summarywriter_add_scalar,
    }
    for module, label in PEERS.items():
        if _summary_writer(module) is None:
            print(f"({label}: not installed, skipped; `make bench` installs it)")
        else:
            contenders[label] = run_peer(module)
    baseline = PEERS["torch"] if PEERS["torch"] in contenders else None

    results: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for rep in range(args.repeats):
        for i, (name, run) in enumerate(contenders.items()):
            folder = tmp / f"r{rep}_{i}"
            results[name].append(run(folder, data))
            if rep == 0:
                verify(folder, data)
    print(
        f"\n{points:,} scalar points ({len(TAGS)} tags x {args.steps:,} steps), "
        f"median of {args.repeats}; every file verified with EventAccumulator\n"
    )
    header = f"{'writer':50} {'caller us/pt':>12} {'drain s':>8} {'total s':>8} {'points/s':>11}"
    if baseline:
        header += f" {'total / torch':>13} {'caller / torch':>14}"
    print(header)
    for name, runs in results.items():
        caller = statistics.median(c for c, _ in runs)
        drain = statistics.median(d for _, d in runs)
        total = statistics.median(c + d for c, d in runs)
        line = (
            f"{name:50} {caller / points * 1e6:12.3f} {drain:8.3f} {total:8.3f} "
            f"{points / total:11,.0f}"
        )
        if baseline:
            base = results[baseline]
            t_ratio = statistics.median((c + d) / (bc + bd) for (c, d), (bc, bd) in zip(runs, base))
            c_ratio = statistics.median(c / bc for (c, _), (bc, _) in zip(runs, base))
            line += f" {t_ratio:13.3f} {c_ratio:14.4f}"
        print(line)
    for label in PEERS.values():
        peer = results.get(label)
        if peer:  # the same call, side by side: how much less the caller waits
            ours = results[SUMMARY_WRITER]
            speedup = statistics.median(bc / c for (c, _), (bc, _) in zip(ours, peer))
            print(f"{SUMMARY_WRITER} vs {label}: {speedup:.1f}x less caller time per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument(
        "--paced-only", action="store_true", help="only the second table (paced like training)"
    )
    args = parser.parse_args()
    peers = PEERS
    with tempfile.TemporaryDirectory() as tmp:
        if not args.paced_only:
            tight(args, Path(tmp))
        print("\nPaced like training: 10 scalars, then 2 ms of compute (sleep), 1,000 steps")
        print(f"{'writer':58} {'caller p50 us/scalar':>21}")
        kinds = {
            "mindwatch EventFileWriter.add_scalar": "writer",
            "mindwatch Monitor.log_step (10 scalars)": "monitor",
            "mindwatch Monitor.log_step (loss, lr, grad_norm, samples)": "monitor_typical",
            f"{SUMMARY_WRITER} (10 calls)": "summarywriter",
            "floor: one no-op call per step, / 10": "floor",
        }
        kinds.update({peers[m]: m for m in peers if _summary_writer(m) is not None})
        for label, kind in kinds.items():
            p50 = statistics.median(
                paced(kind, Path(tmp) / f"paced_{kind}_{r}") for r in range(args.repeats)
            )
            print(f"{label:58} {p50:21.3f}")
    print(f"\npython {sys.version.split()[0]}, crc32c backend: {mindwatch.events.crc.BACKEND}")


if __name__ == "__main__":
    main()
