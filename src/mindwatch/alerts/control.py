"""``Control``: what an alert (or an action such as the dynamic learning rate) asks the
training loop to do, as a value.

Rules run off the training thread; they never call into the training loop. What they
decide travels back as :class:`Control` values, and the framework adapter applies them
on the training thread at a step boundary: it stops training, keeps the last stable
checkpoint, or scales the learning rate. See ``docs/dev/architecture.md`` for when each
takes effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from mindwatch.alerts.model import Alert

__all__ = ["NOTHING_DUE", "Control", "ControlKind", "StepControls"]

ControlKind = Literal["stop", "keep_last_stable", "scale_lr"]


@dataclass(frozen=True)
class Control:
    """One decision for the training loop.

    * ``stop``: end training after this step (``alert`` says why);
    * ``keep_last_stable``: keep the newest checkpoint saved before ``step`` as "last
      stable", then report ``alert`` (which waits for it, so the alert names the file);
    * ``scale_lr``: multiply the learning rate by ``factor`` from the next update on.
    """

    kind: ControlKind
    step: int
    alert: Optional[Alert] = None
    factor: Optional[float] = None


@dataclass(frozen=True)
class StepControls:
    """What the training loop should do at a step boundary, handed to it as a value
    (:meth:`mindwatch.Monitor.end_step`): the controls decided since it last asked, each
    once, and whether training stops now (``stop``, with ``stop_reason``). Empty on most
    steps (:data:`NOTHING_DUE`, one shared value)."""

    controls: tuple[Control, ...] = ()
    stop: bool = False
    stop_reason: Optional[str] = None

    def __bool__(self) -> bool:
        return bool(self.controls) or self.stop


NOTHING_DUE = StepControls()
