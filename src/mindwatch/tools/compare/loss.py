"""The loss checks of ``mindwatch compare``: the final loss (the median of the last
points) and the loss at matched positions (the mean of each stretch), each against the
standard error of the baselines' values or their spread (:mod:`.checks`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from mindwatch.common.i18n import _
from mindwatch.tools.compare.noise import spread, standard_error
from mindwatch.tools.compare.verdict import (
    Align,
    Check,
    CompareError,
    Estimate,
    Noise,
    SetBy,
    Tolerances,
    allowed,
    limit_reason,
    mean,
    noise_of,
    series_of,
    status_of,
    worst_of,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["final_loss", "matched_loss"]

Array = np.ndarray[Any, Any]


def _axis(frame: pd.DataFrame, loss: pd.Series, align: Align) -> Optional[Array]:
    """Positions of ``loss``'s steps on the chosen axis (cumulative samples or tokens)."""
    if align == "step":
        return loss.index.to_numpy(dtype=np.float64)
    rate = series_of(frame, f"perf/{align}_per_s")
    step_ms = series_of(frame, "perf/step_time_ms")
    if rate is None or step_ms is None:
        return None
    # samples_per_s x step_time_ms / 1000 = samples per step, exactly (both from one interval)
    per_step = (rate * step_ms / 1000.0).reindex(loss.index).ffill().bfill()
    if per_step.isna().any():
        return None
    steps = loss.index.to_numpy(dtype=np.float64)
    widths = np.diff(np.concatenate([[0.0], steps]))
    positions: Array = np.cumsum(per_step.to_numpy() * widths)
    return positions


def _stretch(x: Array, position: float, width: float) -> slice:
    """The points of ``x`` in ``(position - width, position]``; the nearest point at or
    before ``position`` when there is none. The same stretch in the same units for every
    run, so runs logged at different granularity compare fairly."""
    right = int(np.searchsorted(x, position, side="right"))
    left = int(np.searchsorted(x, position - width, side="right"))
    left = max(0, min(left, right - 1))
    return slice(left, max(right, left + 1))


def _final_points(values: Array, tol: Tolerances) -> Array:
    count = max(tol.final_window, math.ceil(len(values) * tol.final_fraction))
    last: Array = values[-count:]
    return last


def _final_estimate(loss: pd.Series, tol: Tolerances) -> Estimate:
    values = loss.to_numpy(dtype=np.float64)
    finite = values[~np.isnan(values)]
    if not len(finite):
        raise CompareError("a baseline's train/loss is NaN throughout: choose another baseline")
    window = _final_points(finite, tol)
    return Estimate(float(np.median(window)), standard_error(window, trend="quadratic"))


def final_loss(run: pd.Series, bases: Sequence[pd.Series], tol: Tolerances) -> Check:
    run_window = _final_points(run.to_numpy(dtype=np.float64), tol)
    got = float(np.median(run_window))  # a NaN in the run's window makes it NaN: it fails
    estimates = [_final_estimate(base, tol) for base in bases]
    ref = mean([e.value for e in estimates])
    noise = noise_of(estimates)
    floor = abs(ref) * tol.loss_rtol + tol.loss_atol
    band, set_by = allowed(ref, floor, noise, tol.loss_sigmas)
    limit = ref + band
    statistic = _("median of the last {count} points").format(count=len(run_window))
    detail = _("{statistic} (run ends at step {step}); ").format(
        statistic=statistic, step=int(run.index[-1])
    ) + limit_reason(set_by, noise, tol.loss_sigmas, relative=False)
    return Check(
        "final loss",
        ref,
        got,
        limit,
        status_of(not got <= limit),
        detail,
        noise.value,
        set_by,
        statistic,
        tol.loss_sigmas,
    )


def _pool_errors(
    stretches: list[tuple[float, list[Estimate]]],
) -> list[tuple[float, list[Estimate]]]:
    """Each stretch's standard errors, raised to what the stretches say together. One
    stretch of 30-60 points has a standard error uncertain by a fifth; the loss's noise
    scales with its level (a cross entropy's does), so ``n x (se / level)^2`` of each
    stretch estimates one number, whose median over the stretches is far steadier. A
    stretch whose own error is larger keeps it."""
    per_point = []
    for _got, known in stretches:
        for e in known:
            if e.error is not None and e.value != 0 and e.points > 1:
                per_point.append(e.points * (e.error / e.value) ** 2)
    if len(per_point) < 3:
        return stretches
    pooled = float(np.median(per_point))
    raised = []
    for got, known in stretches:
        kept = [
            Estimate(e.value, max(e.error, abs(e.value) * math.sqrt(pooled / e.points)), e.points)
            if e.error is not None and e.points > 1
            else e
            for e in known
        ]
        raised.append((got, kept))
    return raised


def _stretch_estimate(x: Array, y: Array, position: float, width: float) -> Estimate:
    """A baseline's mean over the stretch before ``position`` and its standard error;
    NaNs (a baseline's own blow-up) are left out."""
    values = y[_stretch(x, position, width)]
    values = values[~np.isnan(values)]
    if not len(values):
        return Estimate(math.nan, None)
    error = standard_error(values, np.mean, trend="quadratic")
    return Estimate(float(values.mean()), error, len(values))


def matched_loss(
    run_frame: pd.DataFrame,
    base_frames: Sequence[pd.DataFrame],
    run: pd.Series,
    bases: Sequence[pd.Series],
    tol: Tolerances,
) -> Check:
    name = f"loss at matched {tol.align}"
    run_x = _axis(run_frame, run, tol.align)
    base_xs = [_axis(frame, base, tol.align) for frame, base in zip(base_frames, bases)]
    if run_x is None or any(x is None for x in base_xs):
        reason = _("no {tag} to align by").format(tag=f"perf/{tol.align}_per_s")
        return Check(name, None, None, None, "skipped", reason)
    axes = [run_x, *(x for x in base_xs if x is not None)]
    lo, hi = max(float(x[0]) for x in axes), min(float(x[-1]) for x in axes)
    if not hi > lo:
        return Check(name, None, None, None, "skipped", _("the runs share no positions"))
    positions = np.linspace(lo, hi, tol.checkpoints + 1)[1:]
    # Each position averages its whole stretch since the previous one: every point counts
    # once, and a burst of a few noisy steps does not decide alone.
    width = (hi - lo) / tol.checkpoints
    sigmas = worst_of(tol.loss_sigmas, tol.checkpoints)
    run_y = run.to_numpy(dtype=np.float64)
    stretches = []
    for position in positions:
        values = run_y[_stretch(run_x, float(position), width)]
        estimates = [
            _stretch_estimate(x, base.to_numpy(dtype=np.float64), float(position), width)
            for x, base in zip(axes[1:], bases)
        ]
        # The run keeps its NaNs (a diverged run fails); a baseline's are left out.
        stretches.append((float(values.mean()), [e for e in estimates if not math.isnan(e.value)]))
    pooled = _pooled_relative_spread([known for _got, known in stretches])
    stretches = _pool_errors(stretches)
    worst: Optional[tuple[float, int, float, float, float, Noise, Optional[SetBy]]] = None
    for i, (got, known) in enumerate(stretches):
        if not known:
            continue  # no baseline has a finite value here: nothing to hold the run to
        ref = mean([e.value for e in known])
        noise = noise_of(known)
        if pooled is not None and len(known) > 1:
            widened = pooled * abs(ref) * math.sqrt(1.0 + 1.0 / len(known))
            if noise.value is None or widened > noise.value:
                noise = Noise(widened, "baselines", len(known))
        floor = abs(ref) * tol.loss_rtol + tol.loss_atol
        band, set_by = allowed(ref, floor, noise, sigmas)
        excess = math.inf if math.isnan(got) else got - (ref + band)
        if worst is None or excess > worst[0]:
            worst = (excess, i, ref, got, band, noise, set_by)
    if worst is None:
        return Check(name, None, None, None, "skipped", _("the baselines have no finite loss"))
    excess, i, ref, got, band, noise, set_by = worst
    where = {
        "step": _("step {position:,.0f}"),
        "samples": _("{position:,.0f} samples"),
        "tokens": _("{position:,.0f} tokens"),
    }[tol.align].format(position=positions[i])
    statistic = _("mean of the stretch before {position}").format(position=where)
    why = limit_reason(set_by, noise, sigmas, relative=False)
    detail = _("worst of {count} positions: {position}; {why}").format(
        count=tol.checkpoints, position=where, why=why
    )
    if tol.checkpoints > 1 and set_by != "tolerance":
        detail += " " + _("({sigmas:g} sigma for the worst of {count})").format(
            sigmas=tol.loss_sigmas, count=tol.checkpoints
        )
    return Check(
        name,
        ref,
        got,
        ref + band,
        status_of(excess > 0),
        detail,
        noise.value,
        set_by,
        statistic,
        sigmas,
    )


def _pooled_relative_spread(stretches: Sequence[Sequence[Estimate]]) -> Optional[float]:
    """The baselines' spread relative to their mean, pooled over the positions: the
    root mean square of each position's coefficient of variation. A few runs' spread at
    one position is itself uncertain (four degrees of freedom for five runs); the
    pooled one holds the degrees of all positions, and seeds that part mid-run (a loss
    bump at another step in each) widen every position, not only the one they hit."""
    ratios = []
    for known in stretches:
        measured = spread([e.value for e in known]) if len(known) > 1 else None
        level = abs(mean([e.value for e in known])) if known else 0.0
        if measured is not None and level > 0:
            ratios.append((measured / level) ** 2)
    return math.sqrt(sum(ratios) / len(ratios)) if ratios else None
