"""The checks of ``mindwatch compare``: each one's statistic, its noise and its limit.

Each check computes one statistic per run (below) and asks whether the run's value is
worse than the baseline's by more than both

* its explicit tolerance (``*_rtol``, ``loss_atol``): a floor, always allowed, and
* ``loss_sigmas`` / ``perf_sigmas`` standard errors of the difference between two runs
  of the same job (:class:`Noise`): with several baselines, their measured spread; with
  one, the statistic's own standard error in the baseline (:mod:`.noise`).

Checks and their statistics:

* **final loss** - the median of the last ``final_fraction`` of ``train/loss`` (at least
  ``final_window`` points), each run's own last points;
* **loss at matched steps** - at ``checkpoints`` evenly spaced positions all the runs
  reached (by step, or by samples / tokens seen with ``align``), the mean of each run
  over the stretch of the axis since the previous position; the worst is reported;
* **eval metrics** - the last value of every ``eval/<metric>`` all runs have: metrics
  named like a loss or perplexity may not rise, others (accuracy, F1, ...) may not fall;
  its standard error is one evaluation's noise around the metric's course (with 8 or
  more evaluations), else only the tolerance holds;
* **throughput** - the median ``perf/samples_per_s`` (else ``perf/tokens_per_s``) after
  the first 10 % of steps, compared in logarithms (a busy machine slows by a factor);
* **step time** - the same for ``perf/step_time_ms``.

Lower loss, higher throughput and shorter steps never fail; a NaN in the run's loss
does (it diverged). A check whose metric one of the runs lacks is reported as skipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from mindwatch.tools.compare.noise import point_noise, spread, standard_error

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Check", "CompareError", "Noise", "Tolerances", "compare_runs"]

Align = Literal["step", "samples", "tokens"]
Array = np.ndarray[Any, Any]
SetBy = Literal["tolerance", "standard error", "baselines"]


class CompareError(ValueError):
    """Bad input for a comparison; the message names what and how to fix it."""


class Tolerances(BaseModel):
    """How much worse than the baseline a run may be: by more than the larger of the
    explicit tolerance (a floor) and ``*_sigmas`` standard errors of the difference
    between two runs of the job. Relative values are fractions (0.05 = 5 %)."""

    # Finite numbers only: a NaN or infinite tolerance would make a gate that never fails.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    loss_rtol: float = Field(0.05, ge=0, description="Relative loss increase always allowed.")
    loss_atol: float = Field(0.0, ge=0, description="Absolute loss increase allowed on top.")
    eval_rtol: float = Field(0.05, ge=0, description="Relative eval change always allowed.")
    throughput_rtol: float = Field(0.10, ge=0, description="Throughput drop always allowed.")
    step_time_rtol: float = Field(0.10, ge=0, description="Step time rise always allowed.")
    loss_sigmas: float = Field(
        3.5, ge=0, description="Loss rise allowed, in standard errors of the difference (0: off)."
    )
    perf_sigmas: float = Field(
        3.5,
        ge=0,
        description="Throughput / step time change allowed, in standard errors (0: off).",
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
class Noise:
    """The standard error of the difference between the run's statistic and the
    baseline's (for throughput and step time: of their logarithms), and what set it.

    * one baseline: its own standard error, taken for the run as well (if the run is
      another draw of the baseline's job, it is as noisy; a worse run, often a noisier
      one, must not widen its own limit): sqrt(2) x se;
    * ``n`` baselines, compared with their mean: their spread ``s`` x sqrt(1 + 1/n),
      or the standard error x sqrt(1 + 1/n) when that is larger (a few runs can agree
      by chance more closely than their own sampling noise allows).
    """

    value: Optional[float]
    source: SetBy
    baselines: int = 1

    def describe(self) -> str:
        if self.source == "baselines":
            return f"spread of {self.baselines} baselines"
        return "standard error"


@dataclass(frozen=True)
class Check:
    """One compared quantity: the baselines' value (their mean), the run's, the limit,
    the verdict, and what set the limit (``set_by``: the tolerance floor, the standard
    error, or the baselines' spread). ``noise`` is the standard error of the
    difference, in the metric's units (throughput, step time: of its logarithm)."""

    name: str
    baseline: Optional[float]
    run: Optional[float]
    limit: Optional[float]
    status: Literal["ok", "regression", "skipped"]
    detail: str = ""
    noise: Optional[float] = None
    set_by: Optional[SetBy] = None
    statistic: str = ""
    sigmas: Optional[float] = None

    @property
    def change(self) -> Optional[float]:
        if self.baseline is None or self.run is None or self.baseline == 0:
            return None
        change = (self.run - self.baseline) / abs(self.baseline)
        return change if math.isfinite(change) else None


@dataclass(frozen=True)
class _Estimate:
    """One run's value of a statistic and its standard error (None: too few points)."""

    value: float
    error: Optional[float]
    points: int = 1


def worst_of(sigmas: float, count: int) -> float:
    """The standard errors a limit allows at each of ``count`` positions so that the worst
    of them exceeds it as rarely as one quantity exceeds ``sigmas`` (Sidak): 3.5 for
    one, 4.07 for ten. Without it, ten positions would false-alarm ten times as often."""
    if sigmas <= 0 or count <= 1:
        return sigmas
    tail = NormalDist().cdf(-sigmas)
    each = -math.expm1(math.log1p(-tail) / count)
    return -NormalDist().inv_cdf(each) if each > 0 else sigmas


def _noise(estimates: Sequence[_Estimate], scale: float = 1.0) -> Noise:
    """The noise of the difference between a run and the ``estimates`` (the baselines')."""
    count = len(estimates)
    errors = [e.error for e in estimates if e.error is not None]
    factor = math.sqrt(1.0 + 1.0 / count)
    se = math.sqrt(sum(e * e for e in errors) / len(errors)) * factor if errors else None
    if count > 1:
        measured = spread([e.value for e in estimates])
        if measured is not None and (se is None or measured * factor >= se):
            return Noise(measured * factor * scale, "baselines", count)
    return Noise(None if se is None else se * scale, "standard error", count)


def _series(frame: pd.DataFrame, tag: str) -> Optional[pd.Series]:
    points = frame[frame["tag"] == tag]
    if points.empty:
        return None
    # One value per step: the last one logged at that step.
    series = points.groupby("step", sort=True)["value"].last()
    series = series[np.isfinite(series.to_numpy())] if tag.startswith("perf/") else series
    return series if len(series) else None


def _axis(frame: pd.DataFrame, loss: pd.Series, align: Align) -> Optional[Array]:
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


def _limit(ref: float, floor: float, noise: Noise, sigmas: float) -> tuple[float, Optional[SetBy]]:
    """The allowed change from ``ref``: the floor, or ``sigmas`` x noise when larger."""
    if noise.value is not None and sigmas * noise.value > floor and math.isfinite(ref):
        return sigmas * noise.value, noise.source
    return floor, "tolerance"


def _why(set_by: Optional[SetBy], noise: Noise, sigmas: float, *, relative: bool) -> str:
    if set_by == "tolerance" or noise.value is None:
        return "limit: tolerance"
    size = f"{math.expm1(noise.value):.2%}" if relative else f"{noise.value:.3g}"
    return f"limit: {sigmas:.3g} x {noise.describe()} {size}"


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values))


def compare_runs(
    run: pd.DataFrame, baselines: Sequence[pd.DataFrame], tol: Tolerances
) -> list[Check]:
    """Every check of ``run`` against one baseline run or several of the same job."""
    if not baselines:
        raise CompareError("no baseline run given: pass --baseline RUN (one or more)")
    run_loss = _series(run, "train/loss")
    if run_loss is None:
        raise CompareError("the run has no train/loss scalars: nothing to compare")
    base_losses = []
    for number, frame in enumerate(baselines, start=1):
        loss = _series(frame, "train/loss")
        if loss is None:
            which = "the baseline" if len(baselines) == 1 else f"baseline {number}"
            raise CompareError(f"{which} has no train/loss scalars: nothing to compare")
        base_losses.append(loss)
    final = _final_loss(run_loss, base_losses, tol)
    checks = [final, _matched_loss(run, baselines, run_loss, base_losses, tol)]
    checks.extend(_eval_checks(run, baselines, tol))
    checks.append(_throughput(run, baselines, tol))
    checks.append(_step_time(run, baselines, tol))
    return checks


def _final_points(values: Array, tol: Tolerances) -> Array:
    count = max(tol.final_window, math.ceil(len(values) * tol.final_fraction))
    last: Array = values[-count:]
    return last


def _final_estimate(loss: pd.Series, tol: Tolerances) -> _Estimate:
    values = loss.to_numpy(dtype=np.float64)
    finite = values[~np.isnan(values)]
    if not len(finite):
        raise CompareError("a baseline's train/loss is NaN throughout: choose another baseline")
    window = _final_points(finite, tol)
    return _Estimate(float(np.median(window)), standard_error(window, trend="quadratic"))


def _final_loss(run: pd.Series, bases: Sequence[pd.Series], tol: Tolerances) -> Check:
    run_window = _final_points(run.to_numpy(dtype=np.float64), tol)
    got = float(np.median(run_window))  # a NaN in the run's window makes it NaN: it fails
    estimates = [_final_estimate(base, tol) for base in bases]
    ref = _mean([e.value for e in estimates])
    noise = _noise(estimates)
    floor = abs(ref) * tol.loss_rtol + tol.loss_atol
    band, set_by = _limit(ref, floor, noise, tol.loss_sigmas)
    limit = ref + band
    statistic = f"median of the last {len(run_window)} points"
    detail = f"{statistic} (run ends at step {int(run.index[-1])}); " + _why(
        set_by, noise, tol.loss_sigmas, relative=False
    )
    return Check(
        "final loss",
        ref,
        got,
        limit,
        _status(not got <= limit),
        detail,
        noise.value,
        set_by,
        statistic,
        tol.loss_sigmas,
    )


def _pool_errors(
    stretches: list[tuple[float, list[_Estimate]]],
) -> list[tuple[float, list[_Estimate]]]:
    """Each stretch's standard errors, raised to what the stretches say together. One
    stretch of 30-60 points has a standard error uncertain by a fifth; the loss's noise
    scales with its level (a cross entropy's does), so ``n x (se / level)^2`` of each
    stretch estimates one number, whose median over the stretches is far steadier. A
    stretch whose own error is larger keeps it."""
    per_point = []
    for _, known in stretches:
        for e in known:
            if e.error is not None and e.value != 0 and e.points > 1:
                per_point.append(e.points * (e.error / e.value) ** 2)
    if len(per_point) < 3:
        return stretches
    pooled = float(np.median(per_point))
    raised = []
    for got, known in stretches:
        kept = [
            _Estimate(e.value, max(e.error, abs(e.value) * math.sqrt(pooled / e.points)), e.points)
            if e.error is not None and e.points > 1
            else e
            for e in known
        ]
        raised.append((got, kept))
    return raised


def _stretch_estimate(x: Array, y: Array, position: float, width: float) -> _Estimate:
    """A baseline's mean over the stretch before ``position`` and its standard error;
    NaNs (a baseline's own blow-up) are left out."""
    values = y[_stretch(x, position, width)]
    values = values[~np.isnan(values)]
    if not len(values):
        return _Estimate(math.nan, None)
    error = standard_error(values, np.mean, trend="quadratic")
    return _Estimate(float(values.mean()), error, len(values))


def _matched_loss(
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
        return Check(name, None, None, None, "skipped", f"no perf/{tol.align}_per_s to align by")
    axes = [run_x, *(x for x in base_xs if x is not None)]
    lo, hi = max(float(x[0]) for x in axes), min(float(x[-1]) for x in axes)
    if not hi > lo:
        return Check(name, None, None, None, "skipped", "the runs share no positions")
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
    pooled = _pooled_relative_spread([known for _, known in stretches])
    stretches = _pool_errors(stretches)
    worst: Optional[tuple[float, int, float, float, Noise, Optional[SetBy]]] = None
    for i, (got, known) in enumerate(stretches):
        if not known:
            continue  # no baseline has a finite value here: nothing to hold the run to
        ref = _mean([e.value for e in known])
        noise = _noise(known)
        if pooled is not None and len(known) > 1:
            widened = pooled * abs(ref) * math.sqrt(1.0 + 1.0 / len(known))
            if noise.value is None or widened > noise.value:
                noise = Noise(widened, "baselines", len(known))
        floor = abs(ref) * tol.loss_rtol + tol.loss_atol
        band, set_by = _limit(ref, floor, noise, sigmas)
        excess = math.inf if math.isnan(got) else got - (ref + band)
        if worst is None or excess > worst[0]:
            worst = (excess, i, ref, got, noise, set_by)
    if worst is None:
        return Check(name, None, None, None, "skipped", "the baselines have no finite loss")
    excess, i, ref, got, noise, set_by = worst
    floor = abs(ref) * tol.loss_rtol + tol.loss_atol
    band, _ = _limit(ref, floor, noise, sigmas)
    statistic = f"mean of the stretch before {tol.align} {positions[i]:,.0f}"
    why = _why(set_by, noise, sigmas, relative=False)
    detail = f"worst of {tol.checkpoints} positions: {tol.align} {positions[i]:,.0f}; {why}"
    if tol.checkpoints > 1 and set_by != "tolerance":
        detail += f" ({tol.loss_sigmas:g} sigma for the worst of {tol.checkpoints})"
    return Check(
        name,
        ref,
        got,
        ref + band,
        _status(excess > 0),
        detail,
        noise.value,
        set_by,
        statistic,
        sigmas,
    )


def _pooled_relative_spread(stretches: Sequence[Sequence[_Estimate]]) -> Optional[float]:
    """The baselines' spread relative to their mean, pooled over the positions: the
    root mean square of each position's coefficient of variation. A few runs' spread at
    one position is itself uncertain (four degrees of freedom for five runs); the
    pooled one holds the degrees of all positions, and seeds that part mid-run (a loss
    bump at another step in each) widen every position, not only the one they hit."""
    ratios = []
    for known in stretches:
        measured = spread([e.value for e in known]) if len(known) > 1 else None
        level = abs(_mean([e.value for e in known])) if known else 0.0
        if measured is not None and level > 0:
            ratios.append((measured / level) ** 2)
    return math.sqrt(sum(ratios) / len(ratios)) if ratios else None


def _higher_is_worse(name: str) -> bool:
    lowered = name.lower()
    return "loss" in lowered or "perplexity" in lowered or "error" in lowered


def _eval_checks(
    run: pd.DataFrame,
    baselines: Sequence[pd.DataFrame],
    tol: Tolerances,
) -> list[Check]:
    tags = {t for t in run["tag"] if t.startswith("eval/")}
    for frame in baselines:
        tags &= {t for t in frame["tag"] if t.startswith("eval/")}
    checks = []
    for tag in sorted(tags):
        got_s = _series(run, tag)
        ref_ss = [_series(frame, tag) for frame in baselines]
        if got_s is None or any(s is None for s in ref_ss):
            continue
        got = float(got_s.iloc[-1])
        values = [float(s.iloc[-1]) for s in ref_ss if s is not None]
        ref = _mean(values)
        noise = _eval_noise(tag, [s for s in ref_ss if s is not None])
        floor = abs(ref) * tol.eval_rtol
        band, set_by = _limit(ref, floor, noise, tol.loss_sigmas)
        if _higher_is_worse(tag):
            limit = ref + band
            bad = not got <= limit
        else:
            limit = ref - band
            bad = not got >= limit
        why = _why(set_by, noise, tol.loss_sigmas, relative=False)
        statistic = "last value"
        if noise.value is None:
            why += " (one value per run: more baselines measure its noise)"
        checks.append(
            Check(
                tag,
                ref,
                got,
                limit,
                _status(bad),
                f"{statistic}; {why}",
                noise.value,
                set_by,
                statistic,
                tol.loss_sigmas,
            )
        )
    return checks


def _eval_noise(tag: str, series: Sequence[pd.Series]) -> Noise:
    """An eval metric's noise between runs. Several baselines measure it as their spread.
    One baseline has one last value: its standard error is one point's noise around the
    course of the metric, when it was evaluated often enough to show it (at least 8
    times); else there is none, and the explicit tolerance alone holds (one value per
    run says nothing about how another seed's would differ)."""
    if len(series) > 1:
        measured = spread([float(s.iloc[-1]) for s in series])
        if measured is not None:
            return Noise(measured * math.sqrt(1.0 + 1.0 / len(series)), "baselines", len(series))
    errors = [point_noise(s.to_numpy(dtype=np.float64)) for s in series]
    known = [e for e in errors if e is not None]
    if not known:
        return Noise(None, "standard error", len(series))
    return _noise([_Estimate(float(s.iloc[-1]), e) for s, e in zip(series, errors)])


def _perf_estimate(frame: pd.DataFrame, tag: str) -> Optional[tuple[_Estimate, int]]:
    """The median of the logarithm of ``tag``'s positive values after the first 10 % of
    steps (compile, warm-up), its standard error, and the number of steps."""
    series = _series(frame, tag)
    if series is None:
        return None
    values = series.to_numpy(dtype=np.float64)
    values = values[len(values) // 10 :]
    values = np.log(values[values > 0])
    if not len(values):
        return None
    return _Estimate(float(np.median(values)), standard_error(values)), len(values)


def _perf_check(
    name: str,
    tag: str,
    run: pd.DataFrame,
    baselines: Sequence[pd.DataFrame],
    *,
    tol: Tolerances,
    rtol: float,
    lower_is_worse: bool,
) -> Optional[Check]:
    got_e = _perf_estimate(run, tag)
    base_e = [_perf_estimate(frame, tag) for frame in baselines]
    if got_e is None or any(e is None for e in base_e):
        return None
    estimates = [e[0] for e in base_e if e is not None]
    log_ref = _mean([e.value for e in estimates])
    noise = _noise(estimates)
    floor = -math.log1p(-min(rtol, 0.999)) if lower_is_worse else math.log1p(rtol)
    band, set_by = _limit(log_ref, floor, noise, tol.perf_sigmas)
    log_got = got_e[0].value
    ref, got = math.exp(log_ref), math.exp(log_got)
    if lower_is_worse:
        limit = math.exp(log_ref - band)
        bad = not got >= limit
    else:
        limit = math.exp(log_ref + band)
        bad = not got <= limit
    statistic = f"median of {got_e[1]} steps"
    detail = f"{statistic}; " + _why(set_by, noise, tol.perf_sigmas, relative=True)
    return Check(
        name,
        ref,
        got,
        limit,
        _status(bad),
        detail,
        noise.value,
        set_by,
        statistic,
        tol.perf_sigmas,
    )


def _throughput(run: pd.DataFrame, baselines: Sequence[pd.DataFrame], tol: Tolerances) -> Check:
    for tag in ("perf/samples_per_s", "perf/tokens_per_s"):
        name = f"throughput ({tag[5:]})"
        check = _perf_check(
            name, tag, run, baselines, tol=tol, rtol=tol.throughput_rtol, lower_is_worse=True
        )
        if check is not None:
            return check
    return Check("throughput", None, None, None, "skipped", "no perf/samples_per_s in all runs")


def _step_time(run: pd.DataFrame, baselines: Sequence[pd.DataFrame], tol: Tolerances) -> Check:
    name, tag = "step time (ms)", "perf/step_time_ms"
    check = _perf_check(
        name, tag, run, baselines, tol=tol, rtol=tol.step_time_rtol, lower_is_worse=False
    )
    if check is None:
        return Check(name, None, None, None, "skipped", "no perf/step_time_ms in all runs")
    return check


def _status(bad: bool) -> Literal["ok", "regression"]:
    return "regression" if bad else "ok"
