"""Where one paced ``Monitor.log_step`` call spends its time, stage by stage.

Paced like training (as ``benchmarks/write.py``'s second table): one call, then 2 ms of
GIL-free "compute" (a sleep), ``--steps`` times; the median per call is printed, in
microseconds and per value. After a sleep the first instructions run on cold caches
and a waking CPU, so even a no-op call costs far more than in a tight loop: that
floor is the first row, and each later row adds one stage of ``log_step``:

* ``call with the same arguments``: a no-op function taking ``log_step``'s keyword
  arguments (building the keyword dict is the caller's cost);
* ``log_step, route does nothing``: the real ``log_step`` with its route's ``log``
  replaced by a no-op: the value checks, the clock reads and the ``Logged`` tuple;
* ``log_step``: the whole call (the route's append to the pipeline's queue, its
  checks for controls, the step bookkeeping).

The difference between consecutive rows is what that stage costs. Two workloads: the
typical step of a training loop (loss, lr, grad_norm and samples: 5 values written
with the derived step time and samples/s) and 10 named scalars.

    python benchmarks/hot_path.py [--steps 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mindwatch

TAGS = [f"bench/tag{i}" for i in range(10)]
TYPICAL: dict[str, Any] = {"loss": 0.5, "lr": 1e-3, "grad_norm": 1.5, "samples": 32}
SCALARS: dict[str, Any] = dict.fromkeys(TAGS, 0.5)


def paced(call: Callable[[int], Any], steps: int) -> float:
    """Median microseconds of ``call(step)`` with 2 ms of sleep before each."""
    samples = []
    for step in range(steps):
        time.sleep(0.002)
        t0 = time.perf_counter_ns()
        call(step)
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1000.0


def _noop(step: int) -> None:
    return None


def _noop_kwargs(
    step: int,
    *,
    loss: Any = None,
    lr: Any = None,
    grad_norm: Any = None,
    samples: Any = None,
    tokens: Any = None,
    reduce: Any = None,
    **scalars: Any,
) -> None:
    return None


def stages(folder: Path, kwargs: dict[str, Any], steps: int) -> dict[str, float]:
    """Median us per call of each stage (see the module doc)."""
    out = {"no-op call (floor)": paced(_noop, steps)}
    out["call with the same arguments"] = paced(lambda s: _noop_kwargs(s, **kwargs), steps)
    mon = mindwatch.Monitor(folder / "a", {"print_every": 0})
    real = mon._route.log
    mon._route.log = lambda logged: None  # type: ignore[method-assign]
    out["log_step, route does nothing"] = paced(lambda s: mon.log_step(s, **kwargs), steps)
    mon._route.log = real  # type: ignore[method-assign]
    mon.close()
    mon = mindwatch.Monitor(folder / "b", {"print_every": 0})
    out["log_step"] = paced(lambda s: mon.log_step(s, **kwargs), steps)
    mon.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    workloads = {
        "typical step (loss, lr, grad_norm, samples): 5 values": (TYPICAL, 5),
        "10 named scalars: 11 values": (SCALARS, 11),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for title, (kwargs, values) in workloads.items():
            runs = [
                stages(Path(tmp) / f"{values}_{r}", kwargs, args.steps) for r in range(args.repeats)
            ]
            print(f"\n{title}, paced (2 ms sleep), median of {args.repeats} x {args.steps}")
            print(f"{'stage':40} {'us/call':>9} {'us/value':>9} {'x floor':>8}")
            floor = statistics.median(r["no-op call (floor)"] for r in runs)
            for stage in runs[0]:
                us = statistics.median(r[stage] for r in runs)
                print(f"{stage:40} {us:9.3f} {us / values:9.3f} {us / floor:8.2f}")


if __name__ == "__main__":
    main()
