"""What a report says about a run, from its event files and ``run.json`` alone.

Statistics use every point; only drawing thins them (:func:`downsample`, which keeps
each bucket's minimum and maximum so a one-step spike stays visible). Two choices make
the numbers describe the run rather than one moment of it:

* the best and final loss are read from the loss smoothed as TensorBoard smooths it
  (:mod:`mindwatch.metrics.smoothing`, weight ``loss.smoothing``): the raw minimum of a
  noisy loss is one lucky batch. The raw values stay as ``final_raw`` / ``best_raw``;
* step-time and throughput statistics leave out the compile and warm-up steps at the
  start (:mod:`mindwatch.tools.report.warmup`); ``throughput.excluded_steps`` says how many
  and ``throughput.excluded_reason`` why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from mindwatch.alerts.reading import read_alerts
from mindwatch.common.i18n import N_
from mindwatch.common.json_values import json_float
from mindwatch.events.mixing import mixed_runs
from mindwatch.events.reader import find_runs
from mindwatch.metrics.smoothing import DEFAULT_WEIGHT, ema
from mindwatch.run.layout import ALERTS_FILE
from mindwatch.run.ranks import rank_of_run
from mindwatch.run.record import RunRecord, read_run_info
from mindwatch.tools.completeness import held_steps, steps_gap
from mindwatch.tools.report.formatting import milliseconds
from mindwatch.tools.report.ranks import rank_facts
from mindwatch.tools.report.warmup import FACTOR, warmup_points

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RunSummary",
    "Series",
    "before_first_stamp",
    "downsample",
    "excluded_reason",
    "summarize",
    "throughput_band",
]


@dataclass
class Series:
    """One tag's points, in step order (the last value per step), and when each was
    written (seconds since the epoch; None when the source had no times)."""

    steps: np.ndarray[Any, Any]
    values: np.ndarray[Any, Any]
    walls: Optional[np.ndarray[Any, Any]] = None

    def __len__(self) -> int:
        return len(self.steps)

    def finite(self) -> np.ndarray[Any, Any]:
        kept: np.ndarray[Any, Any] = self.values[np.isfinite(self.values)]
        return kept


@dataclass
class RunSummary:
    """A run's facts (JSON-ready in :meth:`as_dict`) and the series the charts draw."""

    name: str
    folder: Path
    info: RunRecord  # its run.json (empty without one)
    series: dict[str, Series]
    alerts: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def get(self, tag: str) -> Optional[Series]:
        return self.series.get(tag)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "folder": str(self.folder), **self.facts}


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: they become strings, as in protobuf's JSON mapping."""
    if isinstance(value, float):
        return json_float(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _stats(values: np.ndarray[Any, Any]) -> Optional[dict[str, float]]:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return None
    return {
        "mean": float(np.mean(finite)),
        "p50": float(np.percentile(finite, 50)),
        "p95": float(np.percentile(finite, 95)),
        "min": float(np.min(finite)),
        "max": float(np.max(finite)),
    }


def summarize(frame: pd.DataFrame, logdir: Path) -> list[RunSummary]:
    """One :class:`RunSummary` per run in ``frame`` (``read_scalars`` output).

    A run's ``rank_<r>/`` folders are part of it (their spread is in the run's own
    ``ranks/*`` tags), not runs of their own. A folder that mixes runs (see
    :mod:`mindwatch.events.mixing`) has the fact ``mixed_runs`` saying so; an ended run
    whose files hold fewer steps than its ``run.json`` says it logged (a file cut or
    damaged since) has ``missing_steps`` (:mod:`mindwatch.tools.completeness`).
    """
    names = {n for n, _ in find_runs(logdir)}
    runs = []
    groups = list(frame.groupby("run", sort=True))
    ranks: dict[str, dict[int, tuple[Path, dict[str, Series]]]] = {}
    for key, group in groups:
        name = str(key)
        parent = name.rsplit("/", 1)[0] if "/" in name else "."
        rank = rank_of_run(name)
        if rank is not None and parent in names:
            ranks.setdefault(parent, {})[rank] = (logdir / name, _tag_series(group))
    for key, group in groups:
        name = str(key)
        parent = name.rsplit("/", 1)[0] if "/" in name else "."
        if rank_of_run(name) is not None and parent in names:
            continue
        folder = logdir if name == "." else logdir / name
        series = _tag_series(group)
        own = dict(ranks.get(name, {}))
        if own and 0 not in own:  # ranks that wrote runs of their own: this is rank 0's
            own[0] = (folder, series)
        run = RunSummary(
            name=name if name != "." else logdir.resolve().name,
            folder=folder,
            info=read_run_info(folder),
            series=series,
            alerts=read_alerts(folder / ALERTS_FILE),
        )
        run.facts = _clean(_facts(run, group))
        entries = rank_facts(folder, run.info, own) if len(own) > 1 else []
        known = ("node", "input_score", "compute_score", "peak_rss_mb")
        if any(entry.get(key) is not None for entry in entries for key in known):
            run.facts["ranks"] = _clean(entries)  # not a table of dashes (converted logs)
        mixed = mixed_runs(folder)
        if mixed is not None:  # its curves have two points per step: say so, first
            run.facts = {"mixed_runs": mixed.describe(), **run.facts}
        last, count = held_steps(group["tag"].to_numpy(), group["step"].to_numpy())
        gap = steps_gap(run.info, last, count)
        if gap is not None:  # the numbers describe part of the run: say so, first
            run.facts = {"missing_steps": gap.describe(), **run.facts}
        runs.append(run)
    return runs


def _tag_series(group: pd.DataFrame) -> dict[str, Series]:
    """Each tag's points in step order, the last one per step (a step logged twice: the
    later value), in the order the tags first appear. With numpy, not a pandas groupby
    per tag: a million points' groupbys were a tenth of a report's time."""
    import pandas as pd

    codes, tags = pd.factorize(group["tag"].to_numpy(), sort=False)
    steps = group["step"].to_numpy(dtype=np.int64)
    values = group["value"].to_numpy(dtype=np.float64)
    walls = group["wall_time"].to_numpy(dtype=np.float64)
    order = np.argsort(codes, kind="stable")  # by tag, each tag's rows in file order
    ranked = codes[order]
    bounds = np.flatnonzero(np.diff(ranked)) + 1
    series = {}
    for start, stop in zip(np.append(0, bounds), np.append(bounds, len(order))):
        index = order[start:stop]
        at = steps[index]
        if np.any(at[1:] < at[:-1]):  # a resumed run: steps again from an earlier one
            index = index[np.argsort(at, kind="stable")]
            at = steps[index]
        index = index[np.append(at[1:] != at[:-1], True)]  # the last point of each step
        series[str(tags[ranked[start]])] = Series(steps[index], values[index], walls[index])
    return series


def before_first_stamp(run: RunSummary) -> float:
    """Seconds the run ran before its first point's wall time: a point is stamped when
    its step ends, so the first step's own time (compiling the graph, often most of a
    short run) came before it. 0 without a step time."""
    first = run.get("perf/step_time_ms")
    if first is not None and len(first) and np.isfinite(first.values[0]):
        return float(first.values[0]) / 1000.0
    return 0.0


def _facts(run: RunSummary, group: pd.DataFrame) -> dict[str, Any]:
    info = run.info
    facts: dict[str, Any] = {
        "status": info.status,
        "world_size": info.world_size or 1,
        "start_time": info.start_time,
        "end_time": info.end_time,
        "points": len(group),
        "tags": len(run.series),
        "hparams": dict(info.hparams),
    }
    walls = group["wall_time"].to_numpy()
    if len(walls):
        facts["duration_s"] = float(walls.max() - walls.min()) + before_first_stamp(run)
    loss = run.get("train/loss")
    if loss is not None and len(loss):
        facts["steps"] = int(loss.steps[-1])
        facts["loss"] = _loss_facts(loss)
    evals = {}
    for tag, series in run.series.items():
        if tag.startswith("eval/") and len(series):
            evals[tag] = {"last": float(series.values[-1]), "last_step": int(series.steps[-1])}
    if evals:
        facts["eval"] = evals
    lr = run.get("train/lr")
    if lr is not None and len(lr):
        facts["lr"] = {"first": float(lr.values[0]), "last": float(lr.values[-1])}
        facts["lr"]["max"] = float(np.nanmax(lr.values)) if np.isfinite(lr.values).any() else None
    grad = run.get("train/grad_norm")
    if grad is not None:
        facts["grad_norm"] = _stats(grad.values)
    throughput = _throughput_facts(run)
    if throughput:
        facts["throughput"] = throughput
    tokens_rate, step_ms = run.get("perf/tokens_per_s"), run.get("perf/step_time_ms")
    if tokens_rate is not None and step_ms is not None:
        common = np.intersect1d(tokens_rate.steps, step_ms.steps)
        per_s = dict(zip(tokens_rate.steps.tolist(), tokens_rate.values.tolist()))
        ms = dict(zip(step_ms.steps.tolist(), step_ms.values.tolist()))
        # tokens per step (rate x step time) times the steps each logged point stands
        # for (every N-th step logged: sink mode, collect_freq)
        total, previous = 0.0, 0
        for s in common.tolist():
            total += per_s[s] * ms[s] / 1000.0 * max(s - previous, 1)
            previous = s
        facts["tokens"] = total
    spread: dict[str, dict[str, Any]] = {}
    for tag, series in run.series.items():
        if tag.startswith("ranks/") and tag.endswith("_argmax") and len(series):
            metric = tag[len("ranks/") : -len("_argmax")]
            ranks, counts = np.unique(series.finite().astype(int), return_counts=True)
            entry: dict[str, Any] = {
                "most_often_highest_rank": int(ranks[np.argmax(counts)]) if len(ranks) else None
            }
            spread[metric] = entry
            high = run.get(f"ranks/{metric}_max")
            low = run.get(f"ranks/{metric}_min")
            if high is not None and low is not None and len(high) == len(low):
                gap = high.values - low.values
                spread[metric]["max_gap"] = float(np.nanmax(gap)) if len(gap) else None
    if spread:
        facts["rank_spread"] = spread
    layers = {}
    for tag, series in run.series.items():
        if tag.startswith("layers/param_norm/") and len(series):
            layers[tag[len("layers/param_norm/") :]] = {
                "start": float(series.values[0]),
                "end": float(series.values[-1]),
            }
    if layers:
        facts["param_norms"] = layers
    facts["alerts"] = run.alerts
    return facts


def _loss_facts(loss: Series) -> dict[str, Any]:
    raw = loss.values
    smooth = ema(raw, DEFAULT_WEIGHT)
    out: dict[str, Any] = {
        "smoothing": DEFAULT_WEIGHT,
        "first": float(raw[0]),
        "final": float(smooth[-1]),
        "final_raw": float(raw[-1]),
        "nonfinite": int((~np.isfinite(raw)).sum()),
    }
    if np.isfinite(raw).any():
        best = int(np.nanargmin(np.where(np.isfinite(smooth), smooth, np.nan)))
        out["best"], out["best_step"] = float(smooth[best]), int(loss.steps[best])
        best = int(np.nanargmin(np.where(np.isfinite(raw), raw, np.nan)))
        out["best_raw"], out["best_raw_step"] = float(raw[best]), int(loss.steps[best])
    return out


_PERF = ("samples_per_s", "tokens_per_s", "step_time_ms")


def _throughput_facts(run: RunSummary) -> dict[str, Any]:
    """Statistics of each ``perf/*`` tag without the compile and warm-up steps."""
    present = {name: s for name in _PERF if (s := run.get(f"perf/{name}")) is not None}
    if not present:
        return {}
    # Step times say directly which steps were slow; else a rate's inverse does.
    name = "step_time_ms" if "step_time_ms" in present else next(iter(present))
    driver = present[name]
    with np.errstate(divide="ignore"):
        cost = driver.values if name == "step_time_ms" else 1.0 / driver.values
    count = warmup_points(cost)
    out: dict[str, Any] = {}
    until = int(driver.steps[count - 1]) if count else None
    for metric, series in present.items():
        kept = series.values if until is None else series.values[series.steps > until]
        out[metric] = _stats(kept if np.isfinite(kept).any() else series.values)
    out["excluded_steps"] = count
    out["excluded_until_step"] = until
    if count:
        out["excluded_compile_step"] = int(driver.steps[0])
        if name == "step_time_ms":
            out["excluded_compile_ms"] = float(driver.values[0])
    if count > 1:
        out["excluded_warmup_steps"] = [int(driver.steps[1]), int(driver.steps[count - 1])]
    out["excluded_reason"] = excluded_reason(out)
    return out


def excluded_reason(throughput: dict[str, Any], tr: Callable[[str], str] = str) -> str:
    """Why a run's first steps are left out of its speed statistics, from its
    ``throughput`` facts; ``tr`` translates (the JSON keeps English, the report shows
    its language)."""
    if not throughput.get("excluded_steps"):
        return tr(N_("none excluded: fewer than 3 points, too few to tell warm-up from the run"))
    first = tr(N_("step {step}")).format(step=throughput.get("excluded_compile_step"))
    if throughput.get("excluded_compile_ms") is not None:
        first += f", {milliseconds(throughput['excluded_compile_ms'])}"
    reason = tr(N_("the first logged step ({step}) includes compiling the graph"))
    reason = reason.format(step=first)
    warmup = throughput.get("excluded_warmup_steps")
    if warmup:
        low, high = warmup
        steps = tr(N_("step {step}")).format(step=low)
        if high != low:
            steps = tr(N_("steps {first}-{last}")).format(first=low, last=high)
        more = N_("; {steps} ran more than {factor}x slower than the median of the rest (warm-up)")
        reason += tr(more).format(steps=steps, factor=f"{FACTOR:g}")
    return reason


def throughput_band(
    run: RunSummary, name: str
) -> Optional[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], int]]:
    """``perf/<name>`` (``samples_per_s``, ``tokens_per_s``) as the job would run if
    every rank were its slowest, or its fastest, one: ``ranks/<name>_min`` and ``_max``
    times the ranks, with the steps and the number of ranks. The job's value is the sum
    over ranks, so it lies in this band; the ranks' own values would sit far below it."""
    low, high = run.get(f"ranks/{name}_min"), run.get(f"ranks/{name}_max")
    if low is None or high is None or not len(low) or len(low) != len(high):
        return None
    ranks = run.info.world_size or 1
    return low.steps, low.values * ranks, high.values * ranks, ranks


def downsample(
    steps: np.ndarray[Any, Any], values: np.ndarray[Any, Any], max_points: int = 2000
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """At most ``max_points`` points for drawing: each bucket's minimum and maximum, in
    step order, so spikes survive (a mean or every-k-th point would hide them)."""
    n = len(steps)
    if n <= max_points:
        return steps, values
    buckets = max(max_points // 2, 1)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    starts = np.unique(edges[:-1])  # empty buckets (n < buckets) merge away
    safe = np.where(np.isnan(values), np.inf, values)  # NaN: never a bucket's minimum...
    high = np.where(np.isinf(safe), -np.inf, safe)  # ... nor, like +inf, its maximum
    index = np.unique(
        np.concatenate([_first(safe, starts, np.minimum), _first(high, starts, np.maximum)])
    )
    return steps[index], values[index]


def _first(values: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], reduce: Any) -> Any:
    """Per bucket (``starts``: first indices), the index of the first value equal to the
    bucket's ``reduce`` (np.minimum: its argmin), all buckets at once."""
    extreme = reduce.reduceat(values, starts)
    counts = np.diff(np.append(starts, len(values)))
    hits = np.flatnonzero(values == np.repeat(extreme, counts))
    bucket = np.searchsorted(starts, hits, side="right") - 1
    _, first = np.unique(bucket, return_index=True)
    return hits[first]
