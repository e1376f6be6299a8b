"""How noisy a run's series is: robust spreads that set how large a change must be before
``mindwatch compare`` calls it a regression.

Both estimates use the median absolute deviation (MAD), scaled by 1.4826 so that it
equals the standard deviation for normal noise, and so ignore rare spikes and stalls:

* :func:`step_noise` - the noise of one step's value around the series' own course:
  the MAD of successive differences over sqrt(2). A falling loss's trend does not count as
  noise; a loss that jumps from batch to batch does.
* :func:`level_noise` - the spread of the values themselves: the MAD around the median.
  For step times and throughput, whose level is what varies (a busy machine).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

__all__ = ["MAD_TO_SIGMA", "difference_noise", "level_noise", "step_noise"]

MAD_TO_SIGMA = 1.4826  # the MAD of normal noise is 0.6745 sigma


def _finite(values: Any) -> np.ndarray[Any, Any]:
    array = np.asarray(values, dtype=np.float64)
    finite: np.ndarray[Any, Any] = array[np.isfinite(array)]
    return finite


def step_noise(values: Any) -> Optional[float]:
    """The noise of one point around the series' course (None below 3 finite points)."""
    finite = _finite(values)
    if len(finite) < 3:
        return None
    steps = np.diff(finite)
    mad = float(np.median(np.abs(steps - np.median(steps))))
    return MAD_TO_SIGMA * mad / math.sqrt(2.0)


def level_noise(values: Any) -> Optional[float]:
    """The robust spread of the values around their median (None below 3 finite points)."""
    finite = _finite(values)
    if len(finite) < 3:
        return None
    return MAD_TO_SIGMA * float(np.median(np.abs(finite - np.median(finite))))


def difference_noise(run: Optional[float], baseline: Optional[float]) -> Optional[float]:
    """The noise of the difference between two runs' values, each as noisy as given:
    sqrt(run^2 + baseline^2). A run's level varies from run to run about as much as its
    steps do (measured on a shared machine, docs/compare.md), so two healthy runs differ
    by this much. An unknown noise counts as equal to the known one."""
    run = baseline if run is None else run
    baseline = run if baseline is None else baseline
    if run is None or baseline is None:
        return None
    return math.hypot(run, baseline)
