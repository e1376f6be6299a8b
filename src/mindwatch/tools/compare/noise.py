"""How much a compared statistic varies between two runs of the same job: the noise that
sets how large a change must be before ``mindwatch compare`` calls it a regression.

The compared quantities are statistics of many steps (the median of the last 20 % of
the loss, the mean of a stretch, the median step time of a run), so their noise is far
smaller than one step's: the median of 540 steps with 30 % jitter moves by about 1.6 %
between runs, not by 30 %. Two estimates:

* :func:`standard_error` - from one run: the statistic's own standard error, by a
  moving-block bootstrap. The series is split into its trend (a least-squares quadratic
  for a loss, which still falls; none for step times) and residuals; the residuals are
  resampled in blocks as long as they stay correlated (so a slow wander, or a machine
  that is busy for a while, counts as what it is: fewer independent points), added back
  to the trend, and the statistic recomputed 400 times. Its spread is the standard
  error. The resampling is seeded: one input always gives one verdict.
* :func:`point_noise` - for a statistic that is one point (an eval metric's last
  value): one point's noise around the series' course.
* :func:`spread` - from several baseline runs: the sample standard deviation of their
  values of the statistic, measured directly (it contains what one run cannot show:
  another seed's trajectory, another day's machine).

:func:`autocorrelation_time`, the integrated autocorrelation time of the residuals, says
how many steps make one independent point, for the block length and the docs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Callable, Literal, Optional

import numpy as np

__all__ = [
    "BOOTSTRAP_REPLICATES",
    "autocorrelation_time",
    "block_length",
    "point_noise",
    "spread",
    "standard_error",
]

Array = np.ndarray[Any, Any]
Statistic = Callable[..., Array]  # f(samples, axis=1) -> one value per row
Trend = Literal["quadratic", "none"]

BOOTSTRAP_REPLICATES = 400  # the resampling adds under 4 % (1 / sqrt(2 x 399))
_CHUNK = 4_000_000  # resampled values held at once (32 MB)
MIN_POINTS = 8  # fewer points have no standard error worth the name


def _trend(values: Array, kind: Trend) -> Array:
    if kind == "none" or len(values) < 6:
        return np.full(len(values), float(np.median(values)))
    x = np.linspace(-1.0, 1.0, len(values))
    fitted: Array = np.polyval(np.polyfit(x, values, 2), x)
    return fitted


def autocorrelation_time(residuals: Array) -> float:
    """The integrated autocorrelation time 1 + 2 sum(rho_k) of ``residuals``, summed
    while the autocorrelation of consecutive lag pairs stays positive (Geyer's initial
    positive sequence): 1 for independent steps, about (1 + r) / (1 - r) for a series
    whose neighbours correlate by r."""
    n = len(residuals)
    centred = residuals - residuals.mean()
    variance = float(centred @ centred)
    if n < 4 or variance == 0.0:
        return 1.0
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(centred, size)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), size)[: n // 2] / variance
    total = -1.0  # the pairs below count rho_0 = 1 twice
    for k in range(0, len(acf) - 1, 2):
        pair = float(acf[k] + acf[k + 1])
        if pair <= 0.0:
            break
        total += 2.0 * pair
    return max(1.0, total)


def block_length(residuals: Array) -> int:
    """Blocks of about two autocorrelation times, and at least n^(1/3) (the usual rate
    for a moving-block bootstrap), at most a quarter of the series."""
    n = len(residuals)
    length = max(math.ceil(n ** (1 / 3)), math.ceil(2 * autocorrelation_time(residuals)))
    return int(max(1, min(length, n // 4)))


def standard_error(
    values: Any,
    statistic: Statistic = np.median,
    *,
    trend: Trend = "none",
    seed: int = 0,
) -> Optional[float]:
    """The standard error of ``statistic(values)`` (None below :data:`MIN_POINTS`
    finite values). Non-finite values are left out: they have no size to resample."""
    array = np.asarray(values, dtype=np.float64)
    array = array[np.isfinite(array)]
    n = len(array)
    if n < MIN_POINTS:
        return None
    base = _trend(array, trend)
    residuals = array - base
    length = block_length(residuals)
    blocks = math.ceil(n / length)
    rng = np.random.default_rng(seed)
    offsets = np.arange(length)
    estimates: list[Array] = []
    rows = max(1, _CHUNK // (blocks * length))
    for first in range(0, BOOTSTRAP_REPLICATES, rows):
        count = min(rows, BOOTSTRAP_REPLICATES - first)
        starts = rng.integers(0, n, size=(count, blocks))
        # Circular blocks: every point is as likely to be drawn as any other.
        index = ((starts[:, :, None] + offsets) % n).reshape(count, -1)[:, :n]
        estimates.append(statistic(base + residuals[index], axis=1))
    # The block bootstrap's variance is low by about (2L + 2p) / n for n points, blocks
    # of L and a trend of p parameters (the autocorrelations it implicitly measures are
    # low by ~1/n per lag, the trend takes p degrees of freedom): scaled back up, checked
    # on simulated independent and AR(1) series (tests/tools/test_compare_noise.py).
    params = 3 if trend == "quadratic" and n >= 6 else 1
    spare = max(n - 2 * length - 2 * params, n / 2)
    error = float(np.std(np.concatenate(estimates), ddof=1)) * math.sqrt(n / spare)
    return error if math.isfinite(error) else None


def point_noise(values: Any) -> Optional[float]:
    """The noise of one point of a series around its course: the median absolute
    deviation of successive differences, over sqrt(2), scaled to a standard deviation
    (1.4826). The standard error of a statistic that *is* one point, such as an eval
    metric's last value (None below :data:`MIN_POINTS` finite points)."""
    array = np.asarray(values, dtype=np.float64)
    array = array[np.isfinite(array)]
    if len(array) < MIN_POINTS:
        return None
    steps = np.diff(array)
    return 1.4826 * float(np.median(np.abs(steps - np.median(steps)))) / math.sqrt(2.0)


def spread(values: Sequence[float]) -> Optional[float]:
    """The sample standard deviation of several runs' values (None below two finite)."""
    array = np.asarray(values, dtype=np.float64)
    array = array[np.isfinite(array)]
    if len(array) < 2:
        return None
    return float(np.std(array, ddof=1))
