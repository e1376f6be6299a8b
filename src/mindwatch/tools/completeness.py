"""Whether an ended run's event files hold the steps its ``run.json`` says it logged.

``run.json`` records, at ``close()``, the last step logged (``last_step``), how many
steps were logged (``steps_logged``) and how many of those went back or repeated
(``steps_out_of_order``, which can share a step with an earlier one). A file cut or
zeroed later, a file deleted, or points dropped while training leave fewer steps in the
files: ``doctor`` says so with the cause, and ``report``, ``compare`` and ``watch`` warn
once. A step is held when some scalar point TensorBoard shows (restart markers
applied) is at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from mindwatch.common.i18n import N_, _
from mindwatch.events.steporder import is_step_axis
from mindwatch.run.record import RunRecord

__all__ = ["ENDED", "StepsGap", "held_steps", "likely_causes", "steps_gap"]

ENDED = ("finished", "terminated", "failed")
# how a run ended, as "run.json says the run {status}" says it
_STATUSES = {"finished": N_("finished"), "terminated": N_("terminated"), "failed": N_("failed")}


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class StepsGap:
    """What ``run.json`` says against what the files hold (None: not known)."""

    status: str
    last_step: Optional[int]
    steps_logged: Optional[int]
    held_last: Optional[int]
    held_steps: Optional[int]

    @property
    def missing(self) -> Optional[int]:
        """Steps missing, when both counts are known."""
        if self.steps_logged is None or self.held_steps is None:
            return None
        return max(self.steps_logged - self.held_steps, 0)

    def describe(self) -> str:
        """``run.json says the run finished at step 50 after logging 50 steps, but its
        event files hold 12 steps, up to step 12``."""
        status = _(_STATUSES[self.status]) if self.status in _STATUSES else self.status
        said = _("run.json says the run {status}").format(status=status)
        if self.last_step is not None:
            said = _("{said} at step {step}").format(said=said, step=self.last_step)
        if self.steps_logged is not None:
            said = _("{said} after logging {count} steps").format(
                said=said, count=self.steps_logged
            )
        if self.held_last is None:
            return _("{said}, but its event files hold no step").format(said=said)
        if self.held_steps is None:
            return _("{said}, but its event files hold steps up to step {last}").format(
                said=said, last=self.held_last
            )
        return _("{said}, but its event files hold {count} steps, up to step {last}").format(
            said=said, count=self.held_steps, last=self.held_last
        )


def held_steps(tags: Any, steps: Any) -> tuple[Optional[int], int]:
    """The last step and the number of distinct steps of scalar points (``tags``,
    ``steps``: e.g. a run's rows of ``read_scalars``), samples axes left out."""
    names, codes = np.unique(np.asarray(tags, dtype=object), return_inverse=True)
    axis = np.array([is_step_axis(str(name)) for name in names] or [True], dtype=bool)
    held = np.unique(np.asarray(steps, dtype=np.int64)[axis[codes]]) if len(names) else []
    return (int(held[-1]) if len(held) else None), len(held)


def steps_gap(
    info: RunRecord, held_last: Optional[int], held_steps: Optional[int]
) -> Optional[StepsGap]:
    """The gap between ``run.json`` (``info``) of an ended run and the steps its files
    hold (``held_steps`` distinct ones, the last ``held_last``; ``held_steps`` None:
    only the last is known), or None when the files hold all of them."""
    status = info.get("status")
    if status not in ENDED:
        return None
    last = _count(info.get("last_step"))
    logged = _count(info.get("steps_logged"))
    if not logged:
        return None  # nothing logged: nothing to miss (doctor says so on its own)
    repeated = _count(info.get("steps_out_of_order")) or 0
    short_last = last is not None and (held_last is None or held_last < last)
    short_count = held_steps is not None and held_steps < logged - repeated
    if not (short_last or short_count):
        return None
    return StepsGap(str(status), last, logged, held_last, held_steps)


def likely_causes(info: RunRecord) -> list[tuple[str, str]]:
    """What ``run.json`` itself says could explain missing steps: ``(cause, fix)``."""
    causes = []
    dropped = _count(info.get("points_dropped"))
    if dropped:
        causes.append(
            (
                _(
                    "{count} points were dropped while training: logging ran ahead of the disk"
                ).format(count=dropped),
                _(
                    "raise max_queue (for bursts) or max_block_secs, or log less often "
                    "(collect_freq)"
                ),
            )
        )
    errors = _count(info.get("write_errors"))
    if errors:
        causes.append(
            (
                _("{count} writes failed while training").format(count=errors),
                _("free disk space or raise the quota; the training log names the failing write"),
            )
        )
    if _count(info.get("event_files_vanished")):
        causes.append(
            (
                _(
                    "the run folder or its event file was deleted or moved while training: "
                    "the points written before that went with it"
                ),
                _(
                    "the points before are wherever the folder was moved (or gone, if it "
                    "was deleted); this folder holds the rest"
                ),
            )
        )
    return causes
