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
    """``values`` smoothed as TensorBoard smooths them with ``weight`` (0 <= w < 1)."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight!r}")
    data = np.asarray(values, dtype=np.float64)
    out = data.copy()
    finite = np.isfinite(data)
    if not finite.any() or np.all(data[finite] == data[finite][0]):
        return out
    last, count = 0.0, 0
    for i, value in enumerate(data.tolist()):
        if not math.isfinite(value):
            continue
        last = last * weight + (1.0 - weight) * value
        count += 1
        out[i] = last / (1.0 - weight**count)
    return out
