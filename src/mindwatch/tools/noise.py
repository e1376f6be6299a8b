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

__all__ = ["MAD_TO_SIGMA", "level_noise", "pooled", "step_noise"]

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


def pooled(*noises: Optional[float]) -> Optional[float]:
    """The root mean square of the known noises: both runs' noise counts."""
    known = [n for n in noises if n is not None]
    if not known:
        return None
    return math.sqrt(sum(n * n for n in known) / len(known))
