"""Seconds that reach ``Event.wait``, ``Thread.join``, ``Lock.acquire`` and ``time.sleep``.

Those calls raise ``OverflowError`` above :data:`threading.TIMEOUT_MAX` (about 292
years) and ``ValueError`` on NaN, which, on a background thread, ends it silently and, on
the training thread, crashes training (issue 20: ``flush_secs: 1e10``). Two lines of
defence:

* :func:`finite_seconds` at the edge: a public constructor refuses a NaN, an infinity or
  a negative duration with a ``ValueError`` naming the parameter (configs are bounded
  earlier still, in :mod:`mindwatch.config`);
* :func:`wait_seconds` at every wait: whatever arrives (a huge finite value through the
  Python API, a computed deadline) is clamped into what the call accepts.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Optional, overload

__all__ = ["TIMEOUT_MAX", "finite_seconds", "wait_seconds"]

# The longest wait threading (and time.sleep, which has the same limit) accepts.
TIMEOUT_MAX = float(threading.TIMEOUT_MAX)


def finite_seconds(name: str, value: Any, *, positive: bool = False) -> float:
    """``value`` as seconds, or a ``ValueError`` naming ``name``: a real number, finite,
    ``>= 0`` (``> 0`` with ``positive``)."""
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {value!r:.60}") from None
    if isinstance(value, bool) or not math.isfinite(seconds):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r:.60}")
    if seconds < 0 or (positive and seconds == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be {bound} seconds, got {value!r:.60}")
    return seconds


@overload
def wait_seconds(timeout: float) -> float: ...
@overload
def wait_seconds(timeout: None) -> None: ...
@overload
def wait_seconds(timeout: Optional[float]) -> Optional[float]: ...


def wait_seconds(timeout: Optional[float]) -> Optional[float]:
    """``timeout`` as every wait accepts it: ``None`` stays ``None`` (no limit);
    negatives and NaN become 0 (do not wait: a wait must never hang on a value that
    means nothing); anything above :data:`TIMEOUT_MAX` becomes it."""
    if timeout is None:
        return None
    if not timeout > 0:  # also NaN
        return 0.0
    return timeout if timeout < TIMEOUT_MAX else TIMEOUT_MAX
