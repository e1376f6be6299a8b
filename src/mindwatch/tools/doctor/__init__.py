"""``mindwatch doctor``: why TensorBoard shows nothing (or too little), checked.

The flow: :func:`diagnose` runs the checks of the folder and a config file
(:mod:`.checks`), of each run (:mod:`.runs`), of what the event files hold against what
``run.json`` says they should (:mod:`.event_files`) and of a data-parallel run's ranks
(:mod:`.ranks`); each returns :class:`Finding` values (:mod:`.findings`): a verdict, what
was found, and the fix, in the current language (:mod:`mindwatch.common.i18n`).
"""

from mindwatch.tools.doctor.checks import diagnose
from mindwatch.tools.doctor.findings import VERDICTS, Finding, Verdict

__all__ = ["VERDICTS", "Finding", "Verdict", "diagnose"]
