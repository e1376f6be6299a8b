"""TensorBoard's smoothing, so a report's curves and numbers match what people see there.

TensorBoard's scalar dashboard smooths with a debiased exponential moving average whose
weight is the "Smoothing" slider (0.6 by default): ``last = last * w + (1 - w) * v``
over the finite points, each divided by ``1 - w ** n`` (n: finite points so far), so
the start is not pulled towards zero. Non-finite points keep their value and do not
move the average. A series whose values are all equal is returned as it is, as
TensorBoard does (``isConstant``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["DEFAULT_WEIGHT", "ema"]

DEFAULT_WEIGHT = 0.6  # TensorBoard's default


def ema(values: Any, weight: float = DEFAULT_WEIGHT) -> np.ndarray[Any, Any]:
    """``values`` smoothed as TensorBoard smooths them with ``weight`` (0 <= w < 1).

    Vectorised (a report smooths a million points): the recurrence's closed form,
    ``s[k] = w**(k+1) * c + (1-w) * w**k * cumsum(x[j] * w**-j)``, in blocks short
    enough that ``w**-j`` stays far from overflowing, each starting from the last
    block's end ``c``."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight!r}")
    data = np.asarray(values, dtype=np.float64)
    out = data.copy()
    finite = np.isfinite(data)
    if not finite.any() or np.all(data[finite] == data[finite][0]):
        return out
    x = data[finite]
    if weight == 0.0:
        return out  # each point is its own average
    smoothed = np.empty_like(x)
    block = max(int(_BLOCK_EXPONENT / -math.log(weight)), 1)  # w**-block <= 1e150
    powers = weight ** np.arange(min(block, len(x)) + 1, dtype=np.float64)
    last = 0.0
    for start in range(0, len(x), block):
        chunk = x[start : start + block]
        n = len(chunk)
        up = powers[1 : n + 1]  # w**(k+1)
        down = 1.0 / powers[:n]  # w**-k
        smoothed[start : start + n] = up * last + (1.0 - weight) * powers[:n] * np.cumsum(
            chunk * down
        )
        last = float(smoothed[start + n - 1])
    count = np.arange(1, len(x) + 1, dtype=np.float64)
    out[finite] = smoothed / (1.0 - weight**count)
    return out


_BLOCK_EXPONENT = 150 * math.log(10)  # a block's w**-j stays below 1e150
