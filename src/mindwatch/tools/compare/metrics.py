"""The eval and speed checks of ``mindwatch compare``: the last value of each eval
metric, and the median throughput and step time in logarithms (:mod:`.checks`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np

from mindwatch.common.i18n import _
from mindwatch.tools.compare.noise import point_noise, standard_error
from mindwatch.tools.compare.verdict import (
    Check,
    Estimate,
    Noise,
    Tolerances,
    allowed,
    limit_reason,
    mean,
    noise_of,
    series_of,
    status_of,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["eval_checks", "step_time", "throughput"]


def _higher_is_worse(name: str) -> bool:
    lowered = name.lower()
    return "loss" in lowered or "perplexity" in lowered or "error" in lowered


def eval_checks(
    run: pd.DataFrame,
    baselines: Sequence[pd.DataFrame],
    tol: Tolerances,
) -> list[Check]:
    tags = {t for t in run["tag"] if t.startswith("eval/")}
    for frame in baselines:
        tags &= {t for t in frame["tag"] if t.startswith("eval/")}
    checks = []
    for tag in sorted(tags):
        got_s = series_of(run, tag)
        ref_ss = [series_of(frame, tag) for frame in baselines]
        if got_s is None or any(s is None for s in ref_ss):
            continue
        got = float(got_s.iloc[-1])
        values = [float(s.iloc[-1]) for s in ref_ss if s is not None]
        ref = mean(values)
        noise = _eval_noise(tag, [s for s in ref_ss if s is not None])
        floor = abs(ref) * tol.eval_rtol
        band, set_by = allowed(ref, floor, noise, tol.loss_sigmas)
        if _higher_is_worse(tag):
            limit = ref + band
            bad = not got <= limit
        else:
            limit = ref - band
            bad = not got >= limit
        why = limit_reason(set_by, noise, tol.loss_sigmas, relative=False)
        statistic = _("last value")
        if noise.value is None:
            why += " " + _("(one value per run: more baselines measure its noise)")
        checks.append(
            Check(
                tag,
                ref,
                got,
                limit,
                status_of(bad),
                _("{statistic}; {why}").format(statistic=statistic, why=why),
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
    if len(series) > 1:  # the spread alone: no error of their own floors it
        return noise_of([Estimate(float(s.iloc[-1]), None) for s in series])
    errors = [point_noise(s.to_numpy(dtype=np.float64)) for s in series]
    known = [e for e in errors if e is not None]
    if not known:
        return Noise(None, "standard error", len(series))
    return noise_of([Estimate(float(s.iloc[-1]), e) for s, e in zip(series, errors)])


def _perf_estimate(frame: pd.DataFrame, tag: str) -> Optional[tuple[Estimate, int]]:
    """The median of the logarithm of ``tag``'s positive values after the first 10 % of
    steps (compile, warm-up), its standard error, and the number of steps."""
    series = series_of(frame, tag)
    if series is None:
        return None
    values = series.to_numpy(dtype=np.float64)
    values = values[len(values) // 10 :]
    values = np.log(values[values > 0])
    if not len(values):
        return None
    return Estimate(float(np.median(values)), standard_error(values)), len(values)


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
    log_ref = mean([e.value for e in estimates])
    noise = noise_of(estimates)
    floor = -math.log1p(-min(rtol, 0.999)) if lower_is_worse else math.log1p(rtol)
    band, set_by = allowed(log_ref, floor, noise, tol.perf_sigmas)
    log_got = got_e[0].value
    ref, got = math.exp(log_ref), math.exp(log_got)
    if lower_is_worse:
        limit = math.exp(log_ref - band)
        bad = not got >= limit
    else:
        limit = math.exp(log_ref + band)
        bad = not got <= limit
    statistic = _("median of {count} steps").format(count=got_e[1])
    why = limit_reason(set_by, noise, tol.perf_sigmas, relative=True)
    detail = _("{statistic}; {why}").format(statistic=statistic, why=why)
    return Check(
        name,
        ref,
        got,
        limit,
        status_of(bad),
        detail,
        noise.value,
        set_by,
        statistic,
        tol.perf_sigmas,
    )


def throughput(run: pd.DataFrame, baselines: Sequence[pd.DataFrame], tol: Tolerances) -> Check:
    for tag in ("perf/samples_per_s", "perf/tokens_per_s"):
        name = f"throughput ({tag[5:]})"
        check = _perf_check(
            name, tag, run, baselines, tol=tol, rtol=tol.throughput_rtol, lower_is_worse=True
        )
        if check is not None:
            return check
    return Check("throughput", None, None, None, "skipped", _("no perf/samples_per_s in all runs"))


def step_time(run: pd.DataFrame, baselines: Sequence[pd.DataFrame], tol: Tolerances) -> Check:
    name, tag = "step time (ms)", "perf/step_time_ms"
    check = _perf_check(
        name, tag, run, baselines, tol=tol, rtol=tol.step_time_rtol, lower_is_worse=False
    )
    if check is None:
        return Check(name, None, None, None, "skipped", _("no perf/step_time_ms in all runs"))
    return check
