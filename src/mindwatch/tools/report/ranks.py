"""The report's "Ranks" table: per rank of a data-parallel run, where it ran, how much
it held the job up, and its peaks.

Read from each rank's own folder (``<run>/rank_<r>/``; rank 0's is ``rank_0/``, or the
run's folder itself when the ranks wrote runs of their own) and where it ran from its
``rank.json`` / ``run.json`` (:func:`mindwatch.run.rank_file.rank_identity`):

* **input score**: ``1 - (its median data wait - the fastest rank's) / its median step
  time``, from the per-interval medians every rank writes for the ``straggler`` rule
  (``straggler/input_wait_ms``, ``straggler/step_ms``): the share of a step the rank
  was not held up by its own input pipeline beyond the fastest rank;
* **compute score**: the median of the other ranks' median micro-benchmark times /
  this rank's (``straggler/bench_ms``, where the run measured it), the rule's relative
  score over the whole run;
* **slowest part**: the part whose score is below the ``straggler`` rule's threshold
  for it (the run's own, from run.json; by default 0.4 for the input pipeline, 0.5 for
  compute), the lower one if both; else none;
* peak host memory (``hw/rss_mb``), peak device memory (``hw/device_mem_peak_mb``, or
  ``hw/npu_hbm_used_mb`` where npu-smi reported it) and the highest NPU temperature
  (``hw/npu_temp_c``); "—" where the rank had none.

The first intervals are left out of the medians as the ``straggler`` rule leaves them
out (compiling the graph and filling the prefetch buffer make them unlike the run's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Protocol

import numpy as np

from mindwatch.common.i18n import N_, _
from mindwatch.rules.straggler import BENCH, INPUT_WAIT, STEP, StragglerSettings
from mindwatch.run.rank_file import rank_identity
from mindwatch.run.ranks import device_label
from mindwatch.run.record import RunRecord
from mindwatch.tools.report import formatting as fmt


class Series(Protocol):
    """A tag's points (:class:`mindwatch.tools.report.summary.Series`)."""

    def finite(self) -> np.ndarray[Any, Any]: ...


__all__ = ["PARTS", "rank_facts", "ranks_header", "ranks_notes", "ranks_rows"]

_DEFAULTS = StragglerSettings()
THRESHOLD = _DEFAULTS.threshold  # the straggler rule's defaults
BENCH_THRESHOLD = _DEFAULTS.bench_threshold
SKIP = _DEFAULTS.skip  # intervals left out, as the rule leaves them out
PARTS = {"input": N_("input pipeline"), "compute": N_("compute"), "none": N_("none")}
_DEVICE_MEMORY = ("hw/device_mem_peak_mb", "hw/npu_hbm_used_mb")


def _median(series: Optional[Series]) -> Optional[float]:
    if series is None:
        return None
    values = series.finite()
    if len(values) > SKIP:
        values = values[SKIP:]
    return float(np.median(values)) if len(values) else None


def _peak(series: Optional[Series]) -> Optional[float]:
    if series is None:
        return None
    values = series.finite()
    return float(values.max()) if len(values) else None


def _threshold(info: RunRecord, key: str, default: float) -> float:
    config = info.get("config") or {}
    rule = ((config.get("alerts") or {}) if isinstance(config, Mapping) else {}).get("straggler")
    value = rule.get(key) if isinstance(rule, Mapping) else None
    if isinstance(value, float) and 0 < value < 1:
        return value
    return default


def _others(values: Mapping[int, Optional[float]], rank: int) -> Optional[float]:
    """The median of every other rank's value (None when no other rank has one)."""
    others = [v for r, v in values.items() if r != rank and v is not None and v > 0]
    return float(np.median(others)) if others else None


def rank_facts(
    run_folder: Path, info: RunRecord, ranks: Mapping[int, tuple[Path, Mapping[str, Series]]]
) -> list[dict[str, Any]]:
    """One JSON-ready entry per rank (``ranks``: rank -> its folder and series)."""
    waits = {r: _median(s.get(INPUT_WAIT)) for r, (_f, s) in ranks.items()}
    steps = {r: _median(s.get(STEP)) for r, (_f, s) in ranks.items()}
    benches = {r: _median(s.get(BENCH)) for r, (_f, s) in ranks.items()}
    fastest_wait = min((w for w in waits.values() if w is not None), default=None)
    threshold = _threshold(info, "threshold", THRESHOLD)
    thresholds = {
        "input": threshold,
        "compute": _threshold(info, "bench_threshold", BENCH_THRESHOLD),
    }
    out = []
    for rank, (folder, series) in sorted(ranks.items()):
        identity = rank_identity(folder, rank, run_folder)
        wait, step, bench = waits[rank], steps[rank], benches[rank]
        input_score = None
        if wait is not None and step is not None and step > 0 and fastest_wait is not None:
            input_score = min(1.0, max(0.0, 1.0 - (wait - fastest_wait) / step))
        compute_score = None
        others = _others(benches, rank)
        if bench is not None and bench > 0 and others is not None:
            compute_score = min(1.0, others / bench)
        low = {
            part: score
            for part, score in (("input", input_score), ("compute", compute_score))
            if score is not None and score < thresholds[part]
        }
        slowest: Optional[str] = min(low, key=lambda part: low[part]) if low else "none"
        if input_score is None and compute_score is None:
            slowest = None  # nothing measured
        device_memory = [_peak(series.get(tag)) for tag in _DEVICE_MEMORY]
        out.append(
            {
                "rank": rank,
                "node": identity.node,
                "device": device_label(identity.kind, identity.device),
                "device_id": identity.device,
                "input_score": input_score,
                "compute_score": compute_score,
                "slowest_part": slowest,
                "threshold": threshold,
                "compute_threshold": thresholds["compute"],
                "peak_rss_mb": _peak(series.get("hw/rss_mb")),
                "peak_device_memory_mb": max(
                    (m for m in device_memory if m is not None), default=None
                ),
                "max_temperature_c": _peak(series.get("hw/npu_temp_c")),
            }
        )
    return out


def ranks_header() -> list[str]:
    return [
        _("rank"),
        _("node"),
        _("device"),
        _("input score"),
        _("compute score"),
        _("slowest part"),
        _("peak host memory"),
        _("peak device memory"),
        _("max temperature"),
    ]


def _text(value: Any, unit: str = "", digits: int = 0) -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}f}{unit}"


def _megabytes(value: Any) -> str:
    text = fmt.quantity(value, "MB")
    return "—" if text == "-" else text


def ranks_rows(ranks: list[dict[str, Any]]) -> list[list[str]]:
    """The table's cells, formatted, in the report's language."""
    rows = []
    for entry in ranks:
        part = entry.get("slowest_part")
        rows.append(
            [
                str(entry["rank"]),
                entry.get("node") or "—",
                entry.get("device") or "—",
                _text(entry.get("input_score"), digits=2),
                _text(entry.get("compute_score"), digits=2),
                _(PARTS[part]) if part in PARTS else "—",
                _megabytes(entry.get("peak_rss_mb")),
                _megabytes(entry.get("peak_device_memory_mb")),
                _text(entry.get("max_temperature_c"), " °C"),
            ]
        )
    return rows


def ranks_notes(ranks: list[dict[str, Any]]) -> list[str]:
    """How the scores were made (below the table)."""
    first = ranks[0] if ranks else {}
    threshold = first.get("threshold", THRESHOLD)
    compute = first.get("compute_threshold", BENCH_THRESHOLD)
    return [
        _(
            "Input score: 1 - (the rank's median data wait - the fastest rank's) / its "
            "median step time. Compute score: the other ranks' median micro-benchmark "
            "time / the rank's. An input score below {threshold:.2f} or a compute score "
            "below {compute:.2f} names the slowest part; — : not measured (the straggler "
            "rule off, one rank, or no benchmark)."
        ).format(threshold=threshold, compute=compute)
    ]
