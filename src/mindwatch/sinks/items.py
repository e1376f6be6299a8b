"""What flows to the sinks: one small value type per kind of record.

A sink declares the kinds it writes (:class:`~mindwatch.sinks.base.TypedSink`), and its
group hands it those only; the pipeline builds them on its own thread from what the
training thread enqueued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

from mindwatch.alerts import Alert

__all__ = [
    "EvalValues",
    "Histogram",
    "Item",
    "RaisedAlert",
    "RunStatus",
    "Scalars",
    "SessionStart",
    "StepValues",
    "SummaryValues",
    "Text",
    "TotalSteps",
    "Values",
]

Values = Sequence[tuple[str, float]]


@dataclass(frozen=True)
class StepValues:
    """A training step's values, derived (and, under reduction, reduced) already.

    ``samples``: samples per step on one device (for views that need the batch size).
    """

    step: int
    values: Values
    wall: float
    samples: Optional[float] = None


@dataclass(frozen=True)
class EvalValues:
    """Evaluation results at ``step`` (``eval/<metric>`` tags)."""

    step: int
    values: Values


@dataclass(frozen=True)
class Scalars:
    """Scalars under exact tags that are not a training step's (per-layer norms)."""

    step: int
    values: Values


@dataclass(frozen=True)
class Histogram:
    tag: str
    data: Any  # a numpy array the caller copied
    step: int


@dataclass(frozen=True)
class Text:
    tag: str
    text: str
    step: int


@dataclass(frozen=True)
class SummaryValues:
    """Serialized ``Summary.Value`` entries, each framed as a ``Summary.value`` field
    (:func:`mindwatch.events.summaries.value_bytes`): the hparams plugin's session
    records, or what :meth:`mindwatch.Monitor.log_values` was given. ``wall``: the
    event's wall time (None: when it is written)."""

    step: int
    values: Sequence[bytes]
    wall: Optional[float] = None


@dataclass(frozen=True)
class SessionStart:
    """TensorBoard's purge marker: points at ``step`` and beyond written before are void."""

    step: int


@dataclass(frozen=True)
class TotalSteps:
    """How many steps the run takes (the progress bar and ETA)."""

    total: Optional[int]


@dataclass(frozen=True)
class RaisedAlert:
    """An alert as written (``alerts.jsonl``, the log, the notifiers): for sinks that
    count alerts (the Prometheus exporter)."""

    alert: Alert


@dataclass(frozen=True)
class RunStatus:
    """How the run stands: ``running``, or at its end ``finished``, ``failed`` or
    ``terminated`` (``run.json``'s status)."""

    status: str


Item = Union[
    StepValues,
    EvalValues,
    Scalars,
    Histogram,
    Text,
    SummaryValues,
    SessionStart,
    TotalSteps,
    RaisedAlert,
    RunStatus,
]
