"""The checks of ``mindwatch compare``: each one's statistic, its noise and its limit.

Each check computes one statistic per run (below) and asks whether the run's value is
worse than the baseline's by more than both

* its explicit tolerance (``*_rtol``, ``loss_atol``): a floor, always allowed, and
* ``loss_sigmas`` / ``perf_sigmas`` standard errors of the difference between two runs
  of the same job (:class:`Noise`): with several baselines, their measured spread; with
  one, the statistic's own standard error in the baseline (:mod:`.noise`).

Checks and their statistics:

* **final loss** - the median of the last ``final_fraction`` of ``train/loss`` (at least
  ``final_window`` points), each run's own last points;
* **loss at matched steps** - at ``checkpoints`` evenly spaced positions all the runs
  reached (by step, or by samples / tokens seen with ``align``), the mean of each run
  over the stretch of the axis since the previous position; the worst is reported;
* **eval metrics** - the last value of every ``eval/<metric>`` all runs have: metrics
  named like a loss or perplexity may not rise, others (accuracy, F1, ...) may not fall;
  its standard error is one evaluation's noise around the metric's course (with 8 or
  more evaluations), else only the tolerance holds;
* **throughput** - the median ``perf/samples_per_s`` (else ``perf/tokens_per_s``) after
  the first 10 % of steps, compared in logarithms (a busy machine slows by a factor);
* **step time** - the same for ``perf/step_time_ms``.

Lower loss, higher throughput and shorter steps never fail; a NaN in the run's loss
does (it diverged). A check whose metric one of the runs lacks is reported as skipped.

The loss checks are in :mod:`.loss`, the eval and speed checks in :mod:`.metrics`, what
they share (tolerances, verdicts, how a limit is set) in :mod:`.verdict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mindwatch.tools.compare.loss import final_loss, matched_loss
from mindwatch.tools.compare.metrics import eval_checks, step_time, throughput
from mindwatch.tools.compare.verdict import Check, CompareError, Noise, Tolerances, series_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Check", "CompareError", "Noise", "Tolerances", "compare_runs"]


def compare_runs(
    run: pd.DataFrame, baselines: Sequence[pd.DataFrame], tol: Tolerances
) -> list[Check]:
    """Every check of ``run`` against one baseline run or several of the same job."""
    if not baselines:
        raise CompareError("no baseline run given: pass --baseline RUN (one or more)")
    run_loss = series_of(run, "train/loss")
    if run_loss is None:
        raise CompareError("the run has no train/loss scalars: nothing to compare")
    base_losses = []
    for number, frame in enumerate(baselines, start=1):
        loss = series_of(frame, "train/loss")
        if loss is None:
            which = "the baseline" if len(baselines) == 1 else f"baseline {number}"
            raise CompareError(f"{which} has no train/loss scalars: nothing to compare")
        base_losses.append(loss)
    final = final_loss(run_loss, base_losses, tol)
    checks = [final, matched_loss(run, baselines, run_loss, base_losses, tol)]
    checks.extend(eval_checks(run, baselines, tol))
    checks.append(throughput(run, baselines, tol))
    checks.append(step_time(run, baselines, tol))
    return checks
