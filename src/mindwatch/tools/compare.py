"""``mindwatch compare RUN --baseline BASE``: a regression gate for CI.

Checks, each against a tolerance (defaults below; a YAML file or flags override them):

* **final loss** - the mean of the last ``final_window`` points of ``train/loss`` may be
  at most ``loss_rtol`` (relative) + ``loss_atol`` (absolute) above the baseline's;
* **loss at matched steps** - at ``checkpoints`` evenly spaced positions the runs share
  (by step, or by samples / tokens seen with ``align``), the run's loss may be at most
  as much above the baseline's; both are averaged over the same stretch of the axis
  before each position (``final_window`` of the baseline's points), and the worst
  position is reported;
* **eval metrics** - the last value of every ``eval/<metric>`` both runs have: metrics
  named like a loss or perplexity may not rise, others (accuracy, F1, ...) may not
  fall, by more than ``eval_rtol``;
* **throughput** - the median ``perf/samples_per_s`` (else ``perf/tokens_per_s``) may be
  at most ``throughput_rtol`` below the baseline's;
* **step time** - the median ``perf/step_time_ms`` may be at most ``step_time_rtol``
  above the baseline's.

Lower loss, higher throughput and shorter steps never fail. A check whose metric one of
the runs lacks is reported as skipped. Exit status: 0 within tolerance, 1 regression
found, 2 bad input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from mindwatch.events.mixing import mixed_runs

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Check",
    "CompareError",
    "Tolerances",
    "checks_table",
    "compare_runs",
    "load_run",
    "load_tolerances",
]

Align = Literal["step", "samples", "tokens"]


class CompareError(ValueError):
    """Bad input for a comparison; the message names what and how to fix it."""


class Tolerances(BaseModel):
    """How much worse than the baseline a run may be. All relative values are fractions
    (0.05 = 5 %)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    loss_rtol: float = Field(0.05, ge=0, description="Relative loss increase allowed.")
    loss_atol: float = Field(0.0, ge=0, description="Absolute loss increase allowed on top.")
    eval_rtol: float = Field(0.05, ge=0, description="Relative eval metric change allowed.")
    throughput_rtol: float = Field(0.10, ge=0, description="Relative throughput drop allowed.")
    step_time_rtol: float = Field(0.10, ge=0, description="Relative step time rise allowed.")
    final_window: int = Field(10, ge=1, description="Points averaged for a loss value.")
    checkpoints: int = Field(10, ge=1, description="Matched positions compared.")
    align: Align = Field("step", description="Match positions by step, samples or tokens.")


@dataclass(frozen=True)
class Check:
    """One compared quantity."""

    name: str
    baseline: Optional[float]
    run: Optional[float]
    limit: Optional[float]
    status: Literal["ok", "regression", "skipped"]
    detail: str = ""

    @property
    def change(self) -> Optional[float]:
        if self.baseline is None or self.run is None or self.baseline == 0:
            return None
        change = (self.run - self.baseline) / abs(self.baseline)
        return change if math.isfinite(change) else None


def load_run(folder: Path) -> pd.DataFrame:
    """The scalars of the run in ``folder`` (its own events, not its rank_<r>/ sub-runs)."""
    from mindwatch.tools.tables import read_scalars

    if not folder.is_dir():
        raise CompareError(f"'{folder}' is not a folder; pass a run folder")
    frame = read_scalars(folder)
    runs = sorted(set(frame["run"]))
    if not runs:
        raise CompareError(f"no TensorBoard event files below '{folder}'")
    if "." in runs or len(runs) == 1:
        name = "." if "." in runs else runs[0]
        mixed = mixed_runs(folder if name == "." else folder / name)
        if mixed is not None:  # a gate on two runs' mixed points would pass or fail by chance
            raise CompareError(
                f"'{mixed.folder}': {mixed.describe()}. Compare one run, not their mix; "
                "to split the folder: " + "; ".join(mixed.split_commands())
            )
        chosen: pd.DataFrame = frame[frame["run"] == name]
        return chosen
    raise CompareError(
        f"'{folder}' holds {len(runs)} runs ({', '.join(runs[:5])}...); pass one of them"
    )


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


def _upper(baseline: float, rtol: float, atol: float = 0.0) -> float:
    return baseline + abs(baseline) * rtol + atol


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
    checks.extend(_eval_checks(run, baseline, tol))
    checks.append(_throughput(run, baseline, tol))
    checks.append(_step_time(run, baseline, tol))
    return checks


def _final_loss(run: pd.Series, base: pd.Series, tol: Tolerances) -> Check:
    window = tol.final_window
    got = float(np.mean(run.to_numpy()[-window:]))
    finite = base.to_numpy()[~np.isnan(base.to_numpy())]
    if not len(finite):
        raise CompareError("the baseline's train/loss is NaN throughout: choose another baseline")
    ref = float(np.mean(finite[-window:]))
    limit = _upper(ref, tol.loss_rtol, tol.loss_atol)
    bad = not got <= limit  # NaN fails
    detail = f"mean of the last {window} points; run ends at step {int(run.index[-1])}"
    return Check("final loss", ref, got, limit, "regression" if bad else "ok", detail)


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
    # Each position averages the baseline's last `final_window` points' worth of axis.
    width = float(np.median(np.diff(base_x))) * tol.final_window if len(base_x) > 1 else 0.0
    got = _window_means(run_x, run.to_numpy(dtype=np.float64), positions, width, skip_nan=False)
    ref = _window_means(base_x, base.to_numpy(dtype=np.float64), positions, width, skip_nan=True)
    limits = ref + np.abs(ref) * tol.loss_rtol + tol.loss_atol
    # A run NaN fails; a position where the baseline itself has no finite value is skipped.
    excess = np.where(np.isnan(ref), -np.inf, np.where(np.isnan(got), np.inf, got - limits))
    worst = int(np.argmax(excess))
    bad = bool(excess[worst] > 0)
    detail = f"worst of {tol.checkpoints} positions: {tol.align} {positions[worst]:,.0f}"
    return Check(
        name,
        float(ref[worst]),
        float(got[worst]),
        float(limits[worst]),
        "regression" if bad else "ok",
        detail,
    )


def _eval_checks(run: pd.DataFrame, baseline: pd.DataFrame, tol: Tolerances) -> list[Check]:
    tags = sorted(
        {t for t in run["tag"] if t.startswith("eval/")}
        & {t for t in baseline["tag"] if t.startswith("eval/")}
    )
    checks = []
    for tag in tags:
        got_s, ref_s = _series(run, tag), _series(baseline, tag)
        if got_s is None or ref_s is None:
            continue
        got, ref = float(got_s.iloc[-1]), float(ref_s.iloc[-1])
        if _higher_is_worse(tag):
            limit = _upper(ref, tol.eval_rtol)
            bad = not got <= limit
        else:
            limit = ref - abs(ref) * tol.eval_rtol
            bad = not got >= limit
        checks.append(Check(tag, ref, got, limit, "regression" if bad else "ok", "last value"))
    return checks


def _median_of(frame: pd.DataFrame, tag: str) -> Optional[float]:
    series = _series(frame, tag)
    if series is None:
        return None
    values = series.to_numpy()
    values = values[len(values) // 10 :]  # leave out the first 10 %: compile, warm-up
    return float(np.median(values)) if len(values) else None


def _throughput(run: pd.DataFrame, baseline: pd.DataFrame, tol: Tolerances) -> Check:
    for tag in ("perf/samples_per_s", "perf/tokens_per_s"):
        got, ref = _median_of(run, tag), _median_of(baseline, tag)
        if got is not None and ref is not None:
            limit = ref * (1 - tol.throughput_rtol)
            bad = not got >= limit
            return Check(f"throughput ({tag[5:]})", ref, got, limit, _status(bad), "median")
    return Check("throughput", None, None, None, "skipped", "no perf/samples_per_s in both")


def _step_time(run: pd.DataFrame, baseline: pd.DataFrame, tol: Tolerances) -> Check:
    got, ref = _median_of(run, "perf/step_time_ms"), _median_of(baseline, "perf/step_time_ms")
    if got is None or ref is None:
        return Check("step time (ms)", None, None, None, "skipped", "no perf/step_time_ms")
    limit = _upper(ref, tol.step_time_rtol)
    return Check("step time (ms)", ref, got, limit, _status(not got <= limit), "median")


def _status(bad: bool) -> Literal["ok", "regression"]:
    return "regression" if bad else "ok"


def report_json(checks: list[Check], tol: Tolerances, run: Path, baseline: Path) -> dict[str, Any]:
    """The machine-readable result (``--json``)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)  # "nan", "inf": JSON has no such numbers
        return value

    return {
        "run": str(run),
        "baseline": str(baseline),
        "passed": not any(c.status == "regression" for c in checks),
        "tolerances": tol.model_dump(),
        "checks": [
            {k: clean(v) for k, v in {**asdict(c), "change": c.change}.items()} for c in checks
        ],
    }


def load_tolerances(file: Optional[Path], flags: Mapping[str, Any]) -> Tolerances:
    """Tolerances from a YAML file of tolerance keys, with ``flags`` (not None) on top."""
    import yaml
    from pydantic import ValidationError

    settings: dict[str, Any] = {}
    if file is not None:
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CompareError(f"cannot read tolerances '{file}': {exc}") from exc
        if not isinstance(loaded, dict):
            raise CompareError(f"'{file}' must be a mapping of tolerance keys")
        settings.update(loaded)
    settings.update({k: v for k, v in flags.items() if v is not None})
    try:
        return Tolerances(**settings)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        known = ", ".join(Tolerances.model_fields)
        raise CompareError(f"bad tolerances: {problems} (known keys: {known})") from exc


def checks_table(checks: list[Check]) -> Any:
    """The checks as a rich table: check, baseline, run, change, limit, result, detail."""
    from rich.table import Table

    def number(value: Optional[float]) -> str:
        return "-" if value is None else f"{value:.5g}"

    table = Table(box=None, pad_edge=False)
    for column in ("check", "baseline", "run", "change", "limit", "result", ""):
        table.add_column(column, justify="right" if column in ("baseline", "run") else "left")
    for check in checks:
        change = "-" if check.change is None else f"{check.change:+.1%}"
        result = {"ok": "ok", "regression": "REGRESSION", "skipped": "skipped"}[check.status]
        table.add_row(
            check.name,
            number(check.baseline),
            number(check.run),
            change,
            number(check.limit),
            result,
            check.detail,
        )
    return table
