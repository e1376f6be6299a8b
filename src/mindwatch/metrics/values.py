"""Logged values as Python numbers: checked at the front door, counted when not finite.

:func:`number` and :func:`step_number` run on the training thread for every value
logged, so their common cases (a ``float``, an ``int`` step) cost one type check.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["INT64", "NonFiniteCounter", "number", "step_number"]

INT64 = 1 << 63  # TensorBoard's steps are int64


def number(key: str, value: Any) -> float:
    """``float(value)``, or a TypeError that names the key.

    Accepts Python and numpy numbers and one-element arrays / framework tensors (via
    ``item()``); rejects strings, which ``float()`` would silently parse.

    A value that is not a number raises instead of being skipped with a warning: it is
    a programming error, visible on the very first step, and a curve that silently
    never appears is worse.
    """
    if type(value) is float:
        return value
    if isinstance(value, (str, bytes)):
        raise TypeError(
            f"mindwatch: '{key}' must be a number, got the string {value!r:.60}; "
            "pass the number itself"
        )
    if not getattr(value, "ndim", 0):  # numbers, 0-d arrays and tensors
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    # A one-element array: NumPy >= 1.25 deprecates float() on it, NumPy 2 refuses it.
    if getattr(value, "size", None) == 1 and hasattr(value, "item"):
        try:
            return float(value.item())  # numpy 2 refuses float() on shape (1,) arrays
        except (TypeError, ValueError):
            pass
    shape = getattr(value, "shape", None)
    what = f"{type(value).__name__} of shape {tuple(shape)}" if shape else type(value).__name__
    raise TypeError(
        f"mindwatch: '{key}' must be a number (int, float, or a one-element "
        f"numpy array / tensor), got {what}: {value!r:.60}"
    ) from None


def step_number(step: Any) -> int:
    """``step`` as an int that fits TensorBoard's int64, or a TypeError saying why."""
    try:
        value = int(step.__index__())
    except AttributeError:
        if isinstance(step, float) and step.is_integer():
            value = int(step)
        else:
            raise TypeError(
                f"mindwatch: step must be an int, got {type(step).__name__}: {step!r}"
            ) from None
    if not -INT64 <= value < INT64:
        raise TypeError(f"mindwatch: step must fit in 64 bits (TensorBoard's int64), got {value}")
    return value


class NonFiniteCounter:
    """How many NaN / +-Inf values each tag had (written as they are; counted for
    ``run.json`` and the end-of-run warning). Thread-safe: local values are counted
    where they are derived, which is the pipeline's thread or, under reduction, the
    collective thread."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, values: Iterable[tuple[str, float]]) -> None:
        bad = [tag for tag, value in values if value - value != 0.0]  # NaN or +-Inf
        if bad:
            with self._lock:
                for tag in bad:
                    self._counts[tag] = self._counts.get(tag, 0) + 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
