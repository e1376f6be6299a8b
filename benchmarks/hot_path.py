"""Where one paced ``Monitor.log_step`` call spends its time, stage by stage.

Paced like training (as ``benchmarks/write.py``'s second table): one call, then 2 ms of
GIL-free "compute" (a sleep), ``--steps`` times; the median per call is printed, in
microseconds and per value. After a sleep the first instructions run on cold caches
and a waking CPU, so even a no-op call costs far more than in a tight loop: that
floor is the first row, and each later row adds one stage of ``log_step``:

* ``call with the same arguments``: a no-op function taking ``log_step``'s keyword
  arguments (building the keyword dict is the caller's cost);
* ``log_step, route and clock do nothing``: the real ``log_step`` with its route's
  ``log`` and its step clock's ``tick`` replaced by no-ops: the value checks, the wall
  clock and the ``Logged`` tuple;
* ``log_step, route does nothing``: the step clock back (a ``perf_counter`` read and
  the interval since the previous step);
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


def paced(calls: dict[str, Callable[[int], Any]], steps: int) -> dict[str, float]:
    """Median microseconds of each ``call(step)``, each after 2 ms of sleep; the calls
    take turns at every step, so they share the machine's drift."""
    samples: dict[str, list[int]] = {name: [] for name in calls}
    for step in range(steps):
        for name, call in calls.items():
            time.sleep(0.002)
            t0 = time.perf_counter_ns()
            call(step)
            samples[name].append(time.perf_counter_ns() - t0)
    return {name: statistics.median(got) / 1000.0 for name, got in samples.items()}


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
    bare = mindwatch.Monitor(folder / "a", {"print_every": 0})
    bare._route.log = lambda logged: None  # type: ignore[method-assign]
    bare._clock.tick = lambda step: None  # type: ignore[method-assign]
    clocked = mindwatch.Monitor(folder / "b", {"print_every": 0})
    clocked._route.log = lambda logged: None  # type: ignore[method-assign]
    whole = mindwatch.Monitor(folder / "c", {"print_every": 0})
    out = paced(
        {
            "no-op call (floor)": _noop,
            "call with the same arguments": lambda s: _noop_kwargs(s, **kwargs),
            "log_step, route and clock do nothing": lambda s: bare.log_step(s, **kwargs),
            "log_step, route does nothing": lambda s: clocked.log_step(s, **kwargs),
            "log_step": lambda s: whole.log_step(s, **kwargs),
        },
        steps,
    )
    for mon in (bare, clocked, whole):
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
