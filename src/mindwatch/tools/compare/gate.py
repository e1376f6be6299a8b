"""What ``mindwatch compare`` reads and prints around its checks (:mod:`.checks`): the
two runs, the tolerances from flags and a YAML file, and the result as a table or JSON.
A change fails only when it exceeds both its tolerance and the noise measured in the
runs. Exit status: 0 within tolerance, 1 regression found, 2 bad input.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from mindwatch.events.mixing import mixed_runs
from mindwatch.run.record import read_run_info
from mindwatch.tools.compare.checks import Check, CompareError, Tolerances
from mindwatch.tools.completeness import held_steps, steps_gap

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

__all__ = ["checks_table", "load_run", "load_tolerances", "report_json"]


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
        where = folder if name == "." else folder / name
        gap = steps_gap(read_run_info(where), *held_steps(chosen["tag"], chosen["step"]))
        if gap is not None:  # a gate on part of a run: say so, and compare what is there
            log.warning(
                "mindwatch: %s: %s; the comparison uses what they hold "
                "(`mindwatch doctor %s` says why)",
                where,
                gap.describe(),
                where,
            )
        return chosen
    raise CompareError(
        f"'{folder}' holds {len(runs)} runs ({', '.join(runs[:5])}...); pass one of them"
    )


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
    from pydantic import ValidationError

    from mindwatch.config import ConfigError
    from mindwatch.config.yaml import load_yaml

    settings: dict[str, Any] = {}
    if file is not None:
        try:  # the config's reader: UTF-8, UTF-16/32 with a BOM, GBK; errors name the file
            settings.update(load_yaml(file, "tolerances file"))
        except ConfigError as exc:
            raise CompareError(f"cannot read tolerances: {exc}") from None
    settings.update({k: v for k, v in flags.items() if v is not None})
    try:
        return Tolerances.model_validate(settings)
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
