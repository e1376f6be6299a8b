"""What ``mindwatch compare`` reads and writes around its checks (:mod:`.checks`): the
run and its baselines, the tolerances from flags and a YAML file, and the result as a
table, JSON or JUnit XML. Exit status: 0 within tolerance, 1 regression found, 2 bad
input.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from mindwatch.common.i18n import _
from mindwatch.common.invocation import command_line
from mindwatch.events.mixing import mixed_runs
from mindwatch.run.record import read_run_info
from mindwatch.tools.compare.checks import Check, CompareError, Tolerances
from mindwatch.tools.compare.facts import Change, facts
from mindwatch.tools.completeness import held_steps, steps_gap

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

__all__ = [
    "RunData",
    "changes_table",
    "checks_lines",
    "display_name",
    "load_run",
    "load_runs",
    "load_tolerances",
    "report_json",
    "report_junit",
]


@dataclass(frozen=True)
class RunData:
    """One run: its folder, its scalars and its facts (:func:`.facts.facts`)."""

    folder: Path
    frame: pd.DataFrame = field(repr=False)
    facts: dict[str, Any] = field(repr=False)


def _top_runs(names: Sequence[str]) -> list[str]:
    """The run names that are not a sub-run (``rank_<r>/``, ...) of another listed run."""
    listed = set(names)

    def inside_another(name: str) -> bool:
        parts = Path(name).parts
        return any(str(Path(*parts[:i])) in listed for i in range(1, len(parts)))

    return [n for n in names if not inside_another(n)]


def _one(folder: Path, frame: pd.DataFrame, name: str) -> RunData:
    where = folder if name == "." else folder / name
    mixed = mixed_runs(where)
    if mixed is not None:  # a gate on two runs' mixed points would pass or fail by chance
        raise CompareError(
            f"'{mixed.folder}': {mixed.describe()}. Compare one run, not their mix; "
            "to split the folder: " + "; ".join(mixed.split_commands())
        )
    chosen: pd.DataFrame = frame[frame["run"] == name]
    record = read_run_info(where)
    gap = steps_gap(record, *held_steps(chosen["tag"], chosen["step"]))
    if gap is not None:  # a gate on part of a run: say so, and compare what is there
        log.warning(
            "mindwatch: %s: %s; the comparison uses what they hold (`%s` says why)",
            where,
            gap.describe(),
            command_line("doctor", where),
        )
    return RunData(where, chosen, facts(record))


def load_runs(folder: Path) -> list[RunData]:
    """The run in ``folder`` (its own events, not its ``rank_<r>/`` sub-runs), or, for a
    folder of runs, each of them (a set of baselines)."""
    from mindwatch.tools.tables import read_scalars

    if not folder.is_dir():
        raise CompareError(f"'{folder}' is not a folder; pass a run folder")
    frame = read_scalars(folder)
    runs = sorted(set(frame["run"]))
    if not runs:
        raise CompareError(f"no TensorBoard event files below '{folder}'")
    if "." in runs:
        return [_one(folder, frame, ".")]
    return [_one(folder, frame, name) for name in _top_runs(runs)]


def load_run(folder: Path) -> RunData:
    """The one run in ``folder``."""
    runs = load_runs(folder)
    if len(runs) > 1:
        names = ", ".join(r.folder.name for r in runs[:5])
        raise CompareError(
            f"'{folder}' holds {len(runs)} runs ({names}{'...' if len(runs) > 5 else ''}); "
            "pass one of them"
        )
    return runs[0]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf": JSON has no such numbers
    return value


def report_json(
    checks: Sequence[Check],
    tol: Tolerances,
    run: RunData,
    baselines: Sequence[RunData],
    changed: Sequence[Change] = (),
) -> dict[str, Any]:
    """The machine-readable result (``--json``): one entry per check with its
    statistic, value per side, noise (standard error of the difference), what set the
    limit, the limit and the verdict."""
    return {
        "run": str(run.folder),
        "baseline": str(baselines[0].folder) if len(baselines) == 1 else None,
        "baselines": [str(b.folder) for b in baselines],
        "passed": not any(c.status == "regression" for c in checks),
        "tolerances": tol.model_dump(),
        "facts": {
            "run": {k: v for k, v in run.facts.items() if k != "config"},
            "baselines": [{k: v for k, v in b.facts.items() if k != "config"} for b in baselines],
        },
        "changes": [c.to_dict() for c in changed],
        "checks": [
            {k: _clean(v) for k, v in {**asdict(c), "change": c.change}.items()} for c in checks
        ],
    }


def report_junit(checks: Sequence[Check], run: RunData, baselines: Sequence[RunData]) -> bytes:
    """The result as JUnit XML: one test suite, one test case per check; a regression is
    a failure, a skipped check skipped. What CI systems (GitLab, Jenkins, GitHub
    reporters) render as a test report."""
    from xml.etree import ElementTree as ET

    failures = sum(c.status == "regression" for c in checks)
    skipped = sum(c.status == "skipped" for c in checks)
    suites = ET.Element("testsuites", tests=str(len(checks)), failures=str(failures))
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="mindwatch compare",
        tests=str(len(checks)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="run", value=str(run.folder))
    for base in baselines:
        ET.SubElement(properties, "property", name="baseline", value=str(base.folder))
    for check in checks:
        case = ET.SubElement(
            suite, "testcase", name=check.name, classname="mindwatch.compare", time="0"
        )
        summary = (
            f"baseline {_number(check.baseline)}, run {_number(check.run)}, "
            f"limit {_number(check.limit)}; {check.detail}"
        )
        if check.status == "regression":
            failure = ET.SubElement(case, "failure", message=summary, type="regression")
            failure.text = summary
        elif check.status == "skipped":
            ET.SubElement(case, "skipped", message=check.detail)
        else:
            ET.SubElement(case, "system-out").text = summary
    ET.indent(suites)
    body: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return body + b"\n"


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


def _number(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.5g}"


def display_name(name: str) -> str:
    """A check's name as the table shows it (translated; JSON and JUnit keep the name)."""
    if name == "final loss":
        return _("final loss")
    matched = {
        "loss at matched step": _("loss at matched step"),
        "loss at matched samples": _("loss at matched samples"),
        "loss at matched tokens": _("loss at matched tokens"),
    }
    if name in matched:
        return matched[name]
    if name.startswith("throughput"):
        return _("throughput") + name[len("throughput") :]
    if name == "step time (ms)":
        return _("step time (ms)")
    return name  # eval/<metric>: a tag


def checks_lines(checks: Sequence[Check], width: Optional[int] = None) -> list[str]:
    """The checks as text: a table of check, baseline, run, change, limit and result, one
    line per check, each followed by its detail (statistic and what set the limit),
    indented and wrapped to ``width`` (None: not wrapped, as for a log file)."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False)
    headings = (_("check"), _("baseline"), _("run"), _("change"), _("limit"), _("result"))
    for i, column in enumerate(headings):
        table.add_column(
            column, justify="right" if i in (1, 2) else "left", no_wrap=True, overflow="ellipsis"
        )
    words = {"ok": _("ok"), "regression": _("REGRESSION"), "skipped": _("skipped")}
    for check in checks:
        change = "-" if check.change is None else f"{check.change:+.1%}"
        table.add_row(
            display_name(check.name),
            _number(check.baseline),
            _number(check.run),
            change,
            _number(check.limit),
            words[check.status],
        )
    console = Console(width=width or 1000, highlight=False, markup=False, emoji=False)
    with console.capture() as captured:
        console.print(table)
    rows = [line.rstrip() for line in captured.get().splitlines()]
    lines = rows[:1]
    for row, check in zip(rows[1:], checks):
        lines.append(row)
        if not check.detail:
            continue
        if width is None:
            lines.append("    " + check.detail)
            continue
        # rich wraps by display width: a Chinese character takes two columns
        with console.capture() as captured:
            console.print(Padding(Text(check.detail), (0, 0, 0, 4)))
        lines += [line.rstrip() for line in captured.get().splitlines()]
    return lines


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"  # 0.0025, not 0.0025000000000000005
    return _("(not set)") if value is None else str(value)


def changes_table(changed: Sequence[Change]) -> Any:
    """What changed between the baselines and the run: key, baseline value(s), run."""
    from rich.table import Table

    from mindwatch.tools.compare.facts import FACTS

    labels = dict(FACTS)
    table = Table(box=None, pad_edge=False)
    for column in (_("what changed"), _("baseline"), _("run")):
        table.add_column(column)
    for change in changed:
        name = _(labels[change.key]) if change.kind == "fact" else change.key
        table.add_row(name, ", ".join(_value(v) for v in change.baseline), _value(change.run))
    return table
