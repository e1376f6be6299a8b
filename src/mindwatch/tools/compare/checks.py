"""The checks of ``mindwatch compare``: each one's statistic, noise and limit.

A change counts as a regression only when it is larger than both an explicit tolerance
(the floor, ``*_rtol`` / ``loss_atol``) and ``loss_sigmas`` / ``perf_sigmas`` times the
noise of the difference between two runs, measured in them with robust statistics
(:mod:`mindwatch.tools.compare.noise`). Two seeds of one job, or one job on a busy machine,
differ by about that noise; a regression differs by much more. Checks:

* **final loss** - the median of the last ``final_fraction`` of ``train/loss`` (at least
  ``final_window`` points); noise: the baseline window's per-step noise, for both runs
  (a worse loss is also a noisier one, which must not widen its own limit);
* **loss at matched steps** - at ``checkpoints`` evenly spaced positions the runs share
  (by step, or by samples / tokens seen with ``align``), the mean of each run over the
  stretch of the axis since the previous position; noise: the baseline's per-step noise
  over the last two stretches; the worst position is reported;
* **eval metrics** - the last value of every ``eval/<metric>`` both runs have: metrics
  named like a loss or perplexity may not rise, others (accuracy, F1, ...) may not
  fall, by more than ``eval_rtol``. One value per run has no noise of its own: an eval
  loss (perplexity) gets the baseline train loss's relative (absolute) per-step noise;
* **throughput** - the median ``perf/samples_per_s`` (else ``perf/tokens_per_s``) after
  the first 10 % of steps; noise: the spread of its logarithm (jitter is relative) in
  each run;
* **step time** - the same for ``perf/step_time_ms``.

Lower loss, higher throughput and shorter steps never fail. A check whose metric one of
the runs lacks is reported as skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from mindwatch.tools.compare.noise import difference_noise, level_noise, step_noise

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Check", "CompareError", "Tolerances", "compare_runs"]

Align = Literal["step", "samples", "tokens"]


class CompareError(ValueError):
    """Bad input for a comparison; the message names what and how to fix it."""


class Tolerances(BaseModel):
    """How much worse than the baseline a run may be: by more than the larger of the
    explicit tolerance (a floor) and ``*_sigmas`` times the runs' measured noise. All
    relative values are fractions (0.05 = 5 %)."""

    # Finite numbers only: a NaN or infinite tolerance would make a gate that never fails.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    loss_rtol: float = Field(0.05, ge=0, description="Relative loss increase always allowed.")
    loss_atol: float = Field(0.0, ge=0, description="Absolute loss increase allowed on top.")
    eval_rtol: float = Field(0.05, ge=0, description="Relative eval change always allowed.")
    throughput_rtol: float = Field(0.10, ge=0, description="Throughput drop always allowed.")
    step_time_rtol: float = Field(0.10, ge=0, description="Step time rise always allowed.")
    loss_sigmas: float = Field(
        2.0, ge=0, description="Loss rise allowed, in the runs' per-step loss noise (0: off)."
    )
    perf_sigmas: float = Field(
        3.5, ge=0, description="Throughput / step time change allowed, in their jitter (0: off)."
    )
    final_fraction: float = Field(
        0.2, gt=0, le=1, description="Last fraction of the points compared as the final loss."
    )
    final_window: int = Field(10, ge=1, description="Least points in the final loss window.")
    checkpoints: int = Field(
        10, ge=1, le=1000, description="Matched positions compared (at most 1000)."
    )
    align: Align = Field("step", description="Match positions by step, samples or tokens.")


@dataclass(frozen=True)
class Check:
    """One compared quantity. ``noise`` is the noise of the difference between the runs
    (for throughput and step time: of its logarithm); ``*_sigmas`` times it is allowed."""

    name: str
    baseline: Optional[float]
    run: Optional[float]
    limit: Optional[float]
    status: Literal["ok", "regression", "skipped"]
    detail: str = ""
    noise: Optional[float] = None

    @property
    def change(self) -> Optional[float]:
        if self.baseline is None or self.run is None or self.baseline == 0:
            return None
        change = (self.run - self.baseline) / abs(self.baseline)
        return change if math.isfinite(change) else None


def _series(frame: pd.DataFrame, tag: str) -> Optional[pd.Series]:
    points = frame[frame["tag"] == tag]
    if points.empty:
        return None
    # One value per step: the last one logged at that step.
    series = points.groupby("step", sort=True)["value"].last()
    series = series[np.isfinite(series.to_numpy())] if tag.startswith("perf/") else series
    return series if len(series) else None


def _axis(frame: pd.DataFrame, loss: pd.Series, align: Align) -> Optional[np.ndarray[Any, Any]]:
    """Positions of ``loss``'s steps on the chosen axis (cumulative samples or tokens)."""
    if align == "step":
        return loss.index.to_numpy(dtype=np.float64)
    rate = _series(frame, f"perf/{align}_per_s")
    step_ms = _series(frame, "perf/step_time_ms")
    if rate is None or step_ms is None:
        return None
    # samples_per_s x step_time_ms / 1000 = samples per step, exactly (both from one interval)
    per_step = (rate * step_ms / 1000.0).reindex(loss.index).ffill().bfill()
    if per_step.isna().any():
        return None
    steps = loss.index.to_numpy(dtype=np.float64)
    widths = np.diff(np.concatenate([[0.0], steps]))
    positions: np.ndarray[Any, Any] = np.cumsum(per_step.to_numpy() * widths)
    return positions


def _window_means(
    x: np.ndarray[Any, Any],
    y: np.ndarray[Any, Any],
    positions: np.ndarray[Any, Any],
    width: float,
    *,
    skip_nan: bool,
) -> np.ndarray[Any, Any]:
    """Mean of ``y`` over ``x`` in ``(p - width, p]`` for each position ``p`` (the nearest
    point at or before ``p`` when the window holds none). The same window in the same
    units for both runs, so runs logged at different granularity compare fairly. The
    run keeps its NaNs (a diverged run must fail); the baseline skips them."""
    finite = ~np.isnan(y) if skip_nan else np.ones(len(y), dtype=bool)
    sums = np.concatenate([[0.0], np.cumsum(np.where(finite, y, 0.0))])
    counts = np.concatenate([[0], np.cumsum(finite)])
    right = np.searchsorted(x, positions, side="right")
    left = np.searchsorted(x, positions - width, side="right")
    left = np.minimum(left, right - 1).clip(min=0)
    right = np.maximum(right, left + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means: np.ndarray[Any, Any] = (sums[right] - sums[left]) / (counts[right] - counts[left])
    return means


def _band(ref: float, rtol: float, atol: float, sigmas: float, noise: Optional[float]) -> float:
    """The allowed rise above ``ref``: the explicit tolerance, widened to ``sigmas`` x
    ``noise`` when the runs are noisier than that."""
    floor = abs(ref) * rtol + atol
    return max(floor, sigmas * noise) if noise is not None and math.isfinite(ref) else floor


def _why(band: float, floor: float, noise: Optional[float], sigmas: float) -> str:
    if noise is not None and band > floor:
        return f"limit: {sigmas:g} x noise {noise:.3g}"
    return "limit: tolerance"


def _higher_is_worse(name: str) -> bool:
    lowered = name.lower()
    return "loss" in lowered or "perplexity" in lowered or "error" in lowered


def compare_runs(run: pd.DataFrame, baseline: pd.DataFrame, tol: Tolerances) -> list[Check]:
    """Every check of ``run`` against ``baseline``."""
    checks: list[Check] = []
    run_loss, base_loss = _series(run, "train/loss"), _series(baseline, "train/loss")
    if run_loss is None or base_loss is None:
        which = "the run" if run_loss is None else "the baseline"
        raise CompareError(f"{which} has no train/loss scalars: nothing to compare")
    checks.append(_final_loss(run_loss, base_loss, tol))
    checks.append(_matched_loss(run, baseline, run_loss, base_loss, tol))
    checks.extend(_eval_checks(run, baseline, tol, _base_loss_noise(base_loss, tol)))
    checks.append(_throughput(run, baseline, tol))
    checks.append(_step_time(run, baseline, tol))
    return checks


def _final_points(values: np.ndarray[Any, Any], tol: Tolerances) -> np.ndarray[Any, Any]:
    count = max(tol.final_window, math.ceil(len(values) * tol.final_fraction))
    last: np.ndarray[Any, Any] = values[-count:]
    return last


def _base_loss_noise(base: pd.Series, tol: Tolerances) -> tuple[float, Optional[float]]:
    """The baseline's final train loss (median) and its per-step noise."""
    values = base.to_numpy(dtype=np.float64)
    window = _final_points(values[~np.isnan(values)], tol)
    return float(np.median(window)), step_noise(window)


def _final_loss(run: pd.Series, base: pd.Series, tol: Tolerances) -> Check:
    run_window = _final_points(run.to_numpy(dtype=np.float64), tol)
    values = base.to_numpy(dtype=np.float64)
    finite = values[~np.isnan(values)]
    if not len(finite):
        raise CompareError("the baseline's train/loss is NaN throughout: choose another baseline")
    base_window = _final_points(finite, tol)
    got = float(np.median(run_window))  # a NaN in the run's window makes it NaN: it fails
    ref = float(np.median(base_window))
    # The baseline's noise for both: a worse loss is also a noisier one, which must not
    # widen its own limit.
    noise = difference_noise(None, step_noise(base_window))
    band = _band(ref, tol.loss_rtol, tol.loss_atol, tol.loss_sigmas, noise)
    limit = ref + band
    bad = not got <= limit
    detail = (
        f"median of the last {len(run_window)} points (run ends at step {int(run.index[-1])}); "
        + _why(band, abs(ref) * tol.loss_rtol + tol.loss_atol, noise, tol.loss_sigmas)
    )
    return Check("final loss", ref, got, limit, _status(bad), detail, noise)


def _noise_near(
    x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], position: float, width: float
) -> Optional[float]:
    """Per-step noise of ``y`` over ``x`` in ``(position - width, position]``."""
    left = int(np.searchsorted(x, position - width, side="right"))
    right = int(np.searchsorted(x, position, side="right"))
    return step_noise(y[left:right])


def _matched_loss(
    run_frame: pd.DataFrame,
    base_frame: pd.DataFrame,
    run: pd.Series,
    base: pd.Series,
    tol: Tolerances,
) -> Check:
    name = f"loss at matched {tol.align}"
    run_x, base_x = _axis(run_frame, run, tol.align), _axis(base_frame, base, tol.align)
    if run_x is None or base_x is None:
        return Check(name, None, None, None, "skipped", f"no perf/{tol.align}_per_s to align by")
    lo, hi = max(run_x[0], base_x[0]), min(run_x[-1], base_x[-1])
    if not hi > lo:
        return Check(name, None, None, None, "skipped", "the runs share no positions")
    positions = np.linspace(lo, hi, tol.checkpoints + 1)[1:]
    # Each position averages its whole stretch since the previous one: every point counts
    # once, and a burst of a few noisy steps does not decide alone.
    width = (hi - lo) / tol.checkpoints
    run_y, base_y = run.to_numpy(dtype=np.float64), base.to_numpy(dtype=np.float64)
    got = _window_means(run_x, run_y, positions, width, skip_nan=False)
    ref = _window_means(base_x, base_y, positions, width, skip_nan=True)
    # The baseline's noise near each position, over two stretches (a steadier estimate).
    noises = [difference_noise(None, _noise_near(base_x, base_y, p, 2 * width)) for p in positions]
    bands = np.array(
        [
            _band(float(r), tol.loss_rtol, tol.loss_atol, tol.loss_sigmas, n)
            for r, n in zip(ref, noises)
        ]
    )
    limits = ref + bands
    # A run NaN fails; a position where the baseline itself has no finite value is skipped.
    excess = np.where(np.isnan(ref), -np.inf, np.where(np.isnan(got), np.inf, got - limits))
    worst = int(np.argmax(excess))
    bad = bool(excess[worst] > 0)
    floor = abs(float(ref[worst])) * tol.loss_rtol + tol.loss_atol
    why = _why(float(bands[worst]), floor, noises[worst], tol.loss_sigmas)
    detail = f"worst of {tol.checkpoints} positions: {tol.align} {positions[worst]:,.0f}; {why}"
    return Check(
        name,
        float(ref[worst]),
        float(got[worst]),
        float(limits[worst]),
        _status(bad),
        detail,
        noises[worst],
    )


def _eval_checks(
    run: pd.DataFrame,
    baseline: pd.DataFrame,
    tol: Tolerances,
    train_loss: tuple[float, Optional[float]],
) -> list[Check]:
    tags = sorted(
        {t for t in run["tag"] if t.startswith("eval/")}
        & {t for t in baseline["tag"] if t.startswith("eval/")}
    )
    loss_level, loss_noise = train_loss
    checks = []
    for tag in tags:
        got_s, ref_s = _series(run, tag), _series(baseline, tag)
        if got_s is None or ref_s is None:
            continue
        got, ref = float(got_s.iloc[-1]), float(ref_s.iloc[-1])
        floor = abs(ref) * tol.eval_rtol
        noise: Optional[float] = None
        # One value per run: no noise of its own. An eval loss varies between runs as
        # the train loss does (relatively); a perplexity, exp(loss), by the loss's absolute
        # noise, relatively. Other metrics (accuracy) keep the explicit tolerance alone.
        if loss_noise is not None and loss_level > 0 and _higher_is_worse(tag):
            scale = loss_noise if "perplexity" in tag.lower() else loss_noise / loss_level
            noise = difference_noise(None, abs(ref) * scale)
        band = _band(ref, tol.eval_rtol, 0.0, tol.loss_sigmas, noise)
        if _higher_is_worse(tag):
            limit = ref + band
            bad = not got <= limit
        else:
            limit = ref - band
            bad = not got >= limit
        detail = "last value; " + _why(band, floor, noise, tol.loss_sigmas)
        checks.append(Check(tag, ref, got, limit, _status(bad), detail, noise))
    return checks


def _perf_window(frame: pd.DataFrame, tag: str) -> Optional[np.ndarray[Any, Any]]:
    """The logarithm of ``tag``'s positive values after the first 10 % of steps (compile,
    warm-up); logarithms, since a busy machine slows steps by a factor."""
    series = _series(frame, tag)
    if series is None:
        return None
    values = series.to_numpy(dtype=np.float64)
    values = values[len(values) // 10 :]
    values = values[values > 0]
    return np.log(values) if len(values) else None


def _perf_check(
    name: str,
    run: np.ndarray[Any, Any],
    base: np.ndarray[Any, Any],
    rtol: float,
    tol: Tolerances,
    *,
    lower_is_worse: bool,
) -> Check:
    got, ref = float(np.exp(np.median(run))), float(np.exp(np.median(base)))
    noise = difference_noise(level_noise(run), level_noise(base))
    spread = math.exp(tol.perf_sigmas * noise) if noise is not None else 1.0
    if lower_is_worse:
        floor = ref * (1 - rtol)
        limit = min(floor, ref / spread)
        bad = not got >= limit
    else:
        floor = ref * (1 + rtol)
        limit = max(floor, ref * spread)
        bad = not got <= limit
    if noise is not None and limit != floor:
        why = f"limit: {tol.perf_sigmas:g} x jitter {math.expm1(noise):.1%}"
    else:
        why = "limit: tolerance"
    detail = f"median of {len(run)} steps; {why}"
    return Check(name, ref, got, limit, _status(bad), detail, noise)


def _throughput(run: pd.DataFrame, baseline: pd.DataFrame, tol: Tolerances) -> Check:
    for tag in ("perf/samples_per_s", "perf/tokens_per_s"):
        got, ref = _perf_window(run, tag), _perf_window(baseline, tag)
        if got is not None and ref is not None:
            name = f"throughput ({tag[5:]})"
            return _perf_check(name, got, ref, tol.throughput_rtol, tol, lower_is_worse=True)
    return Check("throughput", None, None, None, "skipped", "no perf/samples_per_s in both")


def _step_time(run: pd.DataFrame, baseline: pd.DataFrame, tol: Tolerances) -> Check:
    tag = "perf/step_time_ms"
    got, ref = _perf_window(run, tag), _perf_window(baseline, tag)
    if got is None or ref is None:
        return Check("step time (ms)", None, None, None, "skipped", "no perf/step_time_ms")
    return _perf_check("step time (ms)", got, ref, tol.step_time_rtol, tol, lower_is_worse=False)


def _status(bad: bool) -> Literal["ok", "regression"]:
    return "regression" if bad else "ok"
