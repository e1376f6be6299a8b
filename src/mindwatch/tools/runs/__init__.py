"""``mindwatch runs ROOT``: list the runs below a folder and prune them by a retention policy.

The flow: :func:`find_runs` finds each run and its status (:mod:`.folders`);
:func:`prune` marks the runs a policy would delete and, when asked, deletes them
(:mod:`.retention`); :mod:`.listing` shows the result as a table or JSON.
"""

from mindwatch.tools.runs.folders import DEFAULT_ACTIVE_SECS, STALE_SECS, Run, find_runs
from mindwatch.tools.runs.listing import pruning_json, runs_json, runs_table, summary_lines
from mindwatch.tools.runs.retention import (
    Pruning,
    delete_run,
    format_size,
    parse_size,
    plan,
    prune,
)

__all__ = [
    "DEFAULT_ACTIVE_SECS",
    "STALE_SECS",
    "Pruning",
    "Run",
    "delete_run",
    "find_runs",
    "format_size",
    "parse_size",
    "plan",
    "prune",
    "pruning_json",
    "runs_json",
    "runs_table",
    "summary_lines",
]
