"""Cost of the default anomaly rules, on the training thread and in the background.

The same loop twice, alternating in rounds: ``Monitor.log_step`` with 10 values per
step (loss, lr, grad norm, samples -> step time and samples/s, and 5 more) with the
rules off (``alerts: {enabled: false}``) and with the default rule set. Two numbers
per configuration: the caller's time in the loop (what training feels; the rules run
on the pipeline's thread, so they should cost it nothing beyond GIL contention in a
tight loop like this one) and the total until ``close()`` returns (all the work,
wherever it ran). The differences, divided by the scalars per step, are what the rules
cost. Target: <= 1 us per logged scalar in total, ~0 on the caller.

    python benchmarks/rules.py [--steps 50000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import mindwatch


def loop(folder: Path, steps: int, rules: bool, noise: np.ndarray) -> tuple[float, float]:
    """(caller seconds per step, total seconds per step until close() returned)."""
    config = {"print_every": 0, "max_queue": 10**7, "alerts": {"enabled": rules}}
    start = time.perf_counter()
    with mindwatch.Monitor(folder, config) as mon:
        for step in range(1, steps + 1):
            n = float(noise[step - 1])
            mon.log_step(
                step,
                loss=2.0 / (1 + step / 500) * n,
                lr=1e-3,
                grad_norm=n,
                samples=32,
                a=n,
                b=n,
                c=n,
                d=n,
                e=n,
            )
        caller = time.perf_counter() - start
    total = time.perf_counter() - start
    return caller / steps, total / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    noise = np.random.default_rng(0).lognormal(0, 0.2, args.steps)
    # A loop of microsecond "steps" trips throughput_drop on every GC pause; the alerts
    # are written (their cost is in the numbers) but not printed.
    logging.getLogger("mindwatch").setLevel(logging.ERROR)
    bare: list[tuple[float, float]] = []
    ruled: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as root:
        for i in range(args.rounds):
            bare.append(loop(Path(root, f"bare{i}"), args.steps, False, noise))
            ruled.append(loop(Path(root, f"rules{i}"), args.steps, True, noise))
    print(f"log_step with 11 scalars per step, {args.steps:,} steps, median of {args.rounds}")
    print(f"{'':22}{'caller us/step':>16}{'total us/step':>16}")
    for what, runs in (("rules off", bare), ("default rules", ruled)):
        caller = statistics.median(r[0] for r in runs) * 1e6
        total = statistics.median(r[1] for r in runs) * 1e6
        print(f"  {what:20}{caller:16.2f}{total:16.2f}")
    for i, where in ((0, "on the caller"), (1, "in total")):
        extra = (
            statistics.median(r[i] for r in ruled) - statistics.median(r[i] for r in bare)
        ) * 1e6
        print(f"  rules cost {where:14} {extra:6.2f} us per step = {extra / 11:.2f} us per scalar")


if __name__ == "__main__":
    main()
