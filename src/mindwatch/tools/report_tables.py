"""Tables of a report, the same in HTML, PDF and Markdown: the multi-run comparison.

A row per run; per column the best value is marked (lowest loss and duration, highest
throughput). Cells are text, already formatted; the marks are indices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mindwatch.tools.summary import RunSummary

__all__ = ["Table", "comparison_table"]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    best: dict[int, int] = field(default_factory=dict)  # column -> row holding its best


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _text(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g}"


# (header, value of a run's facts, lower is better)
_COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], Any], bool], ...] = (
    ("final loss", lambda f: (f.get("loss") or {}).get("final"), True),
    ("best loss", lambda f: (f.get("loss") or {}).get("best"), True),
    (
        "samples/s (median)",
        lambda f: ((f.get("throughput") or {}).get("samples_per_s") or {}).get("p50"),
        False,
    ),
    ("duration (s)", lambda f: f.get("duration_s"), True),
)


def comparison_table(runs: Sequence[RunSummary]) -> Table:
    """One row per run, the best value of each column marked."""
    table = Table(["run"] + [header for header, _, _ in _COLUMNS], [])
    values = [[_number(get(run.facts)) for _, get, _ in _COLUMNS] for run in runs]
    for run, row in zip(runs, values):
        table.rows.append([run.name] + [_text(v) for v in row])
    for c, (_, _, lower) in enumerate(_COLUMNS):
        present = [(v[c], r) for r, v in enumerate(values) if v[c] is not None]
        if len(present) > 1:
            table.best[c + 1] = (min if lower else max)(present)[1]
    return table
