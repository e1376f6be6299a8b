"""Cost of the default anomaly rules on the training thread, per logged scalar.

The same loop twice, alternating in rounds: ``Monitor.log_step`` with 10 values per
step (loss, lr, grad norm, samples -> step time and samples/s, and 5 more) with the
rules off (``alerts: {enabled: false}``) and with the default rule set. The difference
per step, divided by the scalars per step, is what the rules cost. Target: <= 1 us
per logged scalar.

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


def loop(folder: Path, steps: int, rules: bool, noise: np.ndarray) -> tuple[float, int]:
    config = {"print_every": 0, "max_queue": 10**7, "alerts": {"enabled": rules}}
    with mindwatch.Monitor(folder, config) as mon:
        start = time.perf_counter()
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
        elapsed = time.perf_counter() - start
        scalars = 10  # 9 given + step time (samples/s makes 11 on all but the first step)
    return elapsed / steps, scalars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    noise = np.random.default_rng(0).lognormal(0, 0.2, args.steps)
    # A loop of microsecond "steps" trips throughput_drop on every GC pause; the alerts
    # are written (their cost is in the numbers) but not printed.
    logging.getLogger("mindwatch").setLevel(logging.ERROR)
    bare: list[float] = []
    ruled: list[float] = []
    with tempfile.TemporaryDirectory() as root:
        for i in range(args.rounds):
            bare.append(loop(Path(root, f"bare{i}"), args.steps, False, noise)[0])
            ruled.append(loop(Path(root, f"rules{i}"), args.steps, True, noise)[0])
    per_step_bare = statistics.median(bare) * 1e6
    per_step_rules = statistics.median(ruled) * 1e6
    extra = per_step_rules - per_step_bare
    print(f"log_step with 11 scalars per step, {args.steps:,} steps, median of {args.rounds}")
    print(f"  rules off          {per_step_bare:6.2f} us per step")
    ratio = per_step_rules / per_step_bare
    print(f"  default rules      {per_step_rules:6.2f} us per step  = {ratio:.2f}x")
    print(f"  rules cost         {extra:6.2f} us per step = {extra / 11:.2f} us per logged scalar")


if __name__ == "__main__":
    main()
