"""JSON for numbers that may not be finite."""

from __future__ import annotations

import math
from typing import Union

__all__ = ["json_float"]


def json_float(value: float) -> Union[float, str]:
    """``value``, or for NaN and infinities the strings of protobuf's JSON mapping
    (``"NaN"``, ``"Infinity"``, ``"-Infinity"``): JSON has no such numbers, and a
    line written with them is not valid JSON for most readers."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
