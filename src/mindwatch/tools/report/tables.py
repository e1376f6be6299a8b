"""Tables of a report, the same in HTML, PDF and Markdown: the multi-run comparison and
the spread across ranks.

A row per run; per column the best value is marked (lowest loss and duration, highest
throughput). Cells are text, already formatted (:mod:`mindwatch.tools.report.formatting`);
the marks are indices; ``notes`` say how the numbers were made.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mindwatch.common.i18n import _
from mindwatch.tools.report import formatting as fmt
from mindwatch.tools.report.summary import RunSummary

__all__ = ["Table", "comparison_table", "shared_hparams", "spread_rows"]


_RATES = ("samples_per_s", "tokens_per_s", "step_time_ms")


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    best: dict[int, int] = field(default_factory=dict)  # column -> row holding its best
    notes: list[str] = field(default_factory=list)  # how the numbers were made

    def is_best(self, row: int, column: int) -> bool:
        """Whether a cell is marked: the column's best, or printed the same (two runs
        of "2.0 s" are both marked, not one by its hidden digits)."""
        best = self.best.get(column)
        return best is not None and self.rows[row][column] == self.rows[best][column]


def _number(value: Any) -> Optional[float]:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None


def _loss(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda f: (f.get("loss") or {}).get(key)


def _rate(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda f: ((f.get("throughput") or {}).get(name) or {}).get("p50")


def _loss_text(value: Optional[float]) -> str:
    return fmt.number(value, fmt.LOSS_DIGITS)


@dataclass(frozen=True)
class _Column:
    header: str
    get: Callable[[dict[str, Any]], Any]
    text: Callable[[Optional[float]], str]
    lower_is_better: bool


def _columns(runs: Sequence[RunSummary]) -> list[_Column]:
    rate = "samples_per_s"
    has = {name: any(_rate(name)(r.facts) is not None for r in runs) for name in _RATES}
    if not has[rate] and has["tokens_per_s"]:
        rate = "tokens_per_s"
    unit = _("samples/s") if rate == "samples_per_s" else _("tokens/s")
    return [
        _Column(_("final loss (smoothed)"), _loss("final"), _loss_text, True),
        _Column(_("best loss (smoothed)"), _loss("best"), _loss_text, True),
        _Column(
            _("{unit} (median)").format(unit=unit),
            _rate(rate),
            lambda v: fmt.quantity(v, unit),
            False,
        ),
        _Column(_("duration"), lambda f: f.get("duration_s"), fmt.duration, True),
    ]


def comparison_table(runs: Sequence[RunSummary]) -> Table:
    """One row per run, the best value of each column marked."""
    columns = _columns(runs)
    table = Table([_("run")] + [c.header for c in columns], [])
    values = [[_number(c.get(run.facts)) for c in columns] for run in runs]
    for run, row in zip(runs, values):
        table.rows.append([run.name] + [c.text(v) for c, v in zip(columns, row)])
    for i, column in enumerate(columns):
        present = [(v[i], r) for r, v in enumerate(values) if v[i] is not None]
        if len(present) > 1:
            table.best[i + 1] = (min if column.lower_is_better else max)(present)[1]
    weights = {_number((r.facts.get("loss") or {}).get("smoothing")) for r in runs}
    if weights - {None}:
        shown = ", ".join(f"{w:g}" for w in sorted(w for w in weights if w is not None))
        table.notes.append(
            _(
                "Loss: smoothed as TensorBoard smooths it (moving average, weight {weight});"
                " the raw minimum of a noisy loss is one lucky batch."
            ).format(weight=shown)
        )
    excluded = {run.name: (run.facts.get("throughput") or {}).get("excluded_steps") for run in runs}
    counts = {n for n in excluded.values() if n is not None}
    if counts:
        if len(counts) == 1 and None not in excluded.values():
            left_out = _("{count} in each run").format(count=counts.pop())
        else:
            left_out = ", ".join(f"{name} {n}" for name, n in excluded.items() if n is not None)
        table.notes.append(
            _(
                "Throughput: median per run without the first logged step (graph compilation)"
                " and the warm-up steps after it; steps left out: {runs}."
            ).format(runs=left_out)
        )
    return table


def spread_rows(run: RunSummary) -> list[tuple[str, str, str]]:
    """The spread across ranks as (metric, rank most often highest, largest max-min
    gap) rows, formatted: what the report's "Across ranks" table shows."""
    rows = []
    for metric, info in sorted((run.facts.get("rank_spread") or {}).items()):
        gap = info.get("max_gap")
        rows.append(
            (metric, fmt.value(info.get("most_often_highest_rank")), fmt.metric_value(metric, gap))
        )
    return rows


def shared_hparams(runs: Sequence[RunSummary]) -> dict[str, Any]:
    """Hyperparameters every run has with the same value (several runs): shown once,
    so each run's own table lists only what sets it apart."""
    if len(runs) < 2:
        return {}
    first = runs[0].facts.get("hparams") or {}
    return {
        k: v
        for k, v in first.items()
        if all(k in (r.facts.get("hparams") or {}) and r.facts["hparams"][k] == v for r in runs)
    }
