"""Steps that go back or repeat within one tag: what TensorBoard draws as a curve
folding back over itself.

Only the same tag counts: several events at one step are normal (a training step and
an evaluation at the same step, histograms beside scalars, MindFormers' names beside
mindwatch's). A point counts when its step is at or below the highest step its tag
reached before it in the same group (one file, as the readers group them), among the
points TensorBoard keeps: callers apply TensorBoard's restart marker (``SessionLog.START``,
which voids earlier points from its step on) first, so a resumed run whose marker
hides the crashed attempt's steps does not count.

The x axis of MindFormers' ``<tag>_vs_samples`` twins is the number of samples seen, not
a step (and tensorboardX writes ``<tag> vs samples``): those tags are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mindwatch.common.i18n import _, ngettext

__all__ = ["StepOrder", "is_step_axis", "steps_out_of_order"]

_NOT_STEPS = ("_vs_samples", " vs samples")


def is_step_axis(tag: str) -> bool:
    """Whether ``tag``'s x axis is a step (not MindFormers' samples-seen twins)."""
    return not tag.endswith(_NOT_STEPS)


@dataclass(frozen=True)
class StepOrder:
    """One group's points at steps it had already passed: the first one's ``step``, the
    step of the point before it (``previous``), and how many there are (``count``)."""

    group: int
    step: int
    previous: int
    count: int

    @property
    def repeats(self) -> bool:
        return self.step == self.previous

    def describe(self, tag: str) -> str:
        """``train/loss goes back from step 50 to step 20 (21 points at steps it had
        already passed)``, or ``train/loss repeats step 10 (1 point ...)``."""
        what = (
            _("{tag} repeats step {step}")
            if self.repeats
            else _("{tag} goes back from step {previous} to step {step}")
        ).format(tag=tag, step=self.step, previous=self.previous)
        points = ngettext(
            "{what} ({count} point at steps it had already passed)",
            "{what} ({count} points at steps it had already passed)",
            self.count,
        )
        return points.format(what=what, count=self.count)


def steps_out_of_order(
    groups: np.ndarray[Any, Any], steps: np.ndarray[Any, Any]
) -> Sequence[StepOrder]:
    """Per group (e.g. a file's tag, as small non-negative ints) whose steps go back or
    repeat, in reading order of ``steps``: one :class:`StepOrder`, ordered by group.

    Costs one stable sort of ``groups`` and a few vector operations when nothing is out
    of order (the common case); the groups that are get a running maximum each.
    """
    n = len(steps)
    if n < 2:
        return []
    groups = np.asarray(groups)
    steps = np.asarray(steps, dtype=np.int64)
    # Radix sort when the ids fit 16 bits (nearly always: they are tags).
    keys = groups.astype(np.int16) if groups.max(initial=0) < (1 << 15) else groups
    order = np.argsort(keys, kind="stable")
    g, s = groups[order], steps[order]
    same = g[1:] == g[:-1]
    if not (same & (s[1:] <= s[:-1])).any():
        return []
    found = []
    bounds = np.flatnonzero(~same) + 1
    for start, stop in zip(np.append(0, bounds).tolist(), np.append(bounds, n).tolist()):
        part = s[start:stop]
        if len(part) < 2 or not (part[1:] <= part[:-1]).any():
            continue
        reached = np.maximum.accumulate(part)[:-1]
        behind = part[1:] <= reached
        first = int(np.argmax(behind))
        found.append(
            StepOrder(
                group=int(g[start]),
                step=int(part[first + 1]),
                previous=int(part[first]),
                count=int(behind.sum()),
            )
        )
    return found
