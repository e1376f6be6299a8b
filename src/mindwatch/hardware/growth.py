"""Memory-growth statistics over a window of samples: the Theil-Sen slope and the share
of rising steps.

A leak shows as memory that keeps rising, step after step; a garbage collection, a cache
filled once or one large batch shows as a jump. Two numbers tell them apart, and a rule
(not this module: it only measures) can combine them:

* the **Theil-Sen slope**, the median of the slopes between every pair of samples: one
  jump or a few outliers move a least-squares line but barely move the median (it ignores
  up to ~29 % of arbitrary points), so a flat series with a spike reads as flat;
* the **rising share**, the share of consecutive differences above zero: near 1 for a
  steady leak, about 0.5 or below for noise around a level, 0 for a flat line (RSS moves
  by whole pages, so a flat process shows exact zeros, which do not count as rising).

Below :data:`MIN_SAMPLES` samples neither number means anything, so neither is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Optional

import numpy as np

__all__ = ["MAX_PAIRWISE_POINTS", "MIN_SAMPLES", "GrowthStats", "growth_stats"]

# Five differences are the fewest on which a share (0, 0.2, ... 1) says anything.
MIN_SAMPLES = 6
# Theil-Sen looks at n * (n - 1) / 2 pairs: 200 points are ~20,000 pairs (well under a
# millisecond in NumPy); a longer window is thinned evenly to this many points first, so
# a short period with a long window cannot make the sampler thread slow.
MAX_PAIRWISE_POINTS = 200


class GrowthStats(NamedTuple):
    """The growth of one series over its window."""

    per_minute: float
    """Theil-Sen slope in the series' unit per minute (MB/min for RSS in MB)."""
    rising_share: float
    """Share of consecutive differences > 0, in [0, 1]."""


def growth_stats(times_s: Sequence[float], values: Sequence[float]) -> Optional[GrowthStats]:
    """The growth of ``values`` measured at ``times_s`` (seconds, increasing), or None
    with fewer than :data:`MIN_SAMPLES` samples or no two distinct times."""
    if len(times_s) != len(values):
        raise ValueError(f"times_s has {len(times_s)} items but values has {len(values)}")
    if len(values) < MIN_SAMPLES:
        return None
    t = np.asarray(times_s, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    rising = float(np.count_nonzero(np.diff(y) > 0)) / (len(y) - 1)
    if len(t) > MAX_PAIRWISE_POINTS:
        keep = np.unique(np.linspace(0, len(t) - 1, MAX_PAIRWISE_POINTS).round().astype(int))
        t, y = t[keep], y[keep]
    i, j = np.triu_indices(len(t), k=1)
    dt = t[j] - t[i]
    usable = dt > 0
    if not usable.any():
        return None
    slopes = (y[j] - y[i])[usable] / dt[usable]
    return GrowthStats(per_minute=float(np.median(slopes)) * 60.0, rising_share=rising)
