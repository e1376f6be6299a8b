"""What every check of ``mindwatch compare`` shares: the tolerances, a check's verdict,
the noise of a difference and how a limit is set from it (:mod:`.checks`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from mindwatch.common.i18n import _
from mindwatch.tools.compare.noise import spread

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Align",
    "Check",
    "CompareError",
    "Estimate",
    "Noise",
    "SetBy",
    "Tolerances",
    "allowed",
    "limit_reason",
    "mean",
    "noise_of",
    "series_of",
    "status_of",
    "worst_of",
]

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
            return _("spread of {count} baselines").format(count=self.baselines)
        return _("standard error")


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
class Estimate:
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


def noise_of(estimates: Sequence[Estimate], scale: float = 1.0) -> Noise:
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


def series_of(frame: pd.DataFrame, tag: str) -> Optional[pd.Series]:
    points = frame[frame["tag"] == tag]
    if points.empty:
        return None
    # One value per step: the last one logged at that step.
    series = points.groupby("step", sort=True)["value"].last()
    series = series[np.isfinite(series.to_numpy())] if tag.startswith("perf/") else series
    return series if len(series) else None


def allowed(ref: float, floor: float, noise: Noise, sigmas: float) -> tuple[float, Optional[SetBy]]:
    """The allowed change from ``ref``: the floor, or ``sigmas`` x noise when larger."""
    if noise.value is not None and sigmas * noise.value > floor and math.isfinite(ref):
        return sigmas * noise.value, noise.source
    return floor, "tolerance"


def limit_reason(set_by: Optional[SetBy], noise: Noise, sigmas: float, *, relative: bool) -> str:
    if set_by == "tolerance" or noise.value is None:
        return _("limit: tolerance")
    size = f"{math.expm1(noise.value):.2%}" if relative else f"{noise.value:.3g}"
    return _("limit: {sigmas:.3g} x {source} {size}").format(
        sigmas=sigmas, source=noise.describe(), size=size
    )


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values))


def status_of(bad: bool) -> Literal["ok", "regression"]:
    return "regression" if bad else "ok"
