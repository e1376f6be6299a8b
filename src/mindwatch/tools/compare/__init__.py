"""``mindwatch compare RUN --baseline BASE``: a regression gate for CI.

The flow: :func:`load_run` reads each run's scalars and :func:`load_tolerances` the
limits (:mod:`.gate`); :func:`compare_runs` runs the checks (:mod:`.checks`), each
against its tolerance and the noise measured in the two runs (:mod:`.noise`); the result
is :func:`report_json` or :func:`checks_table`.
"""

from mindwatch.tools.compare.checks import Check, CompareError, Tolerances, compare_runs
from mindwatch.tools.compare.gate import checks_table, load_run, load_tolerances, report_json

__all__ = [
    "Check",
    "CompareError",
    "Tolerances",
    "checks_table",
    "compare_runs",
    "load_run",
    "load_tolerances",
    "report_json",
]
