"""Which leading steps of a run are compile and warm-up, left out of its speed statistics.

The first step a process runs compiles the graph (881 ms against 5 ms afterwards in a
small CPU run), and the next few are often slower while caches and the allocator settle.
Averaged in, they make a mean step time describe nothing that happened. The rule:

* the first logged step is always left out: it includes compiling the graph (every
  process start compiles, resumed runs too);
* so are the steps right after it that took more than ``factor`` (2) times the median
  of the steady part of the run, stopping at the first normal one;
* at most 10 % of the points (and at most 20) beyond the first go, so a run that is
  slow throughout keeps its numbers; a run with fewer than 3 points keeps them all.

Slow steps later in the run (a recompile, a checkpoint save) are kept: they are part of
its speed, and show in its p95 and maximum.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FACTOR", "warmup_points"]

FACTOR = 2.0
_MAX_FRACTION = 0.1
_MAX_POINTS = 20


def warmup_points(cost: Any, factor: float = FACTOR) -> int:
    """How many leading points of ``cost`` (step times, or anything where larger is
    slower) are compile and warm-up; 0 when there are too few points to tell."""
    data = np.asarray(cost, dtype=np.float64)
    n = len(data)
    if n < 3:
        return 0
    cap = 1 + min(_MAX_POINTS, int(n * _MAX_FRACTION))
    steady = data[cap:]
    steady = steady[np.isfinite(steady)]
    if not len(steady):
        return 1
    limit = factor * float(np.median(steady))
    count = 1
    while count < cap and data[count] > limit:  # NaN compares False: it stops here
        count += 1
    return count
