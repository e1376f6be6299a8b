"""``mindwatch compare RUN --baseline BASE [--baseline ...]``: a regression gate for CI.

The flow: :func:`load_runs` reads each run's scalars and facts and :func:`load_tolerances`
the limits (:mod:`.gate`); :func:`compare_runs` runs the checks (:mod:`.checks`), each
against its tolerance and the run-to-run noise of its statistic (:mod:`.noise`);
:func:`changes` lists what differs between the run and its baselines (:mod:`.facts`); the
result is a table, :func:`report_json` or :func:`report_junit`. Named baselines are
stored with :func:`save` (:mod:`.baselines`).
"""

from mindwatch.tools.compare.baselines import baselines_dir, resolve, save
from mindwatch.tools.compare.checks import Check, CompareError, Tolerances, compare_runs
from mindwatch.tools.compare.facts import Change, changes
from mindwatch.tools.compare.gate import (
    RunData,
    changes_table,
    checks_table,
    display_name,
    load_run,
    load_runs,
    load_tolerances,
    report_json,
    report_junit,
)

__all__ = [
    "Change",
    "Check",
    "CompareError",
    "RunData",
    "Tolerances",
    "baselines_dir",
    "changes",
    "changes_table",
    "checks_table",
    "compare_runs",
    "display_name",
    "load_run",
    "load_runs",
    "load_tolerances",
    "report_json",
    "report_junit",
    "resolve",
    "save",
]
