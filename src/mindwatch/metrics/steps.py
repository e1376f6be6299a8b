"""A training step as logged, and as written: the one conversion between them.

The front door (:meth:`mindwatch.Monitor.log_step`) stores what it was given, checked
but not rearranged, in a :data:`Logged` tuple (cheap on the training thread).
:class:`LocalSteps` turns it into a :data:`Row`: the ``(tag, value)`` pairs under their
namespaced tags, plus the rates derived from the step's timing, and the count of
non-finite values. The pipeline's thread does this for a single process; under data
parallelism the aggregator's collective thread does it before the reduction, so each rank
derives its own rates from its own clock. What is derived from the values themselves
(perplexity of the loss) is added once, after any reduction, by the pipeline.

One point per tag per step: a value the caller logs under a tag mindwatch derives
(``perf/step_time_ms``, ``perf/samples_per_s``, ``train/perplexity``, ...:
:data:`~mindwatch.metrics.derived.DERIVED_TAGS`) is written instead of the derived one,
and from the first step it is logged on mindwatch stops deriving that tag, so a value
logged only every few steps does not alternate with mindwatch's own in one curve. The
check costs nothing per step: a tag is looked up once, the first time its key is seen.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

from mindwatch.metrics.derived import (
    DERIVED_TAGS,
    StepRates,
    Timing,
    Values,
    with_perplexity,
)
from mindwatch.metrics.tags import TAGS, tag_for
from mindwatch.metrics.values import NonFiniteCounter

__all__ = ["LocalSteps", "Logged", "Row", "RunValues", "Telemetry", "logged_points"]

# (step, wall time, loss, lr, grad_norm (floats or None), the names of the other values
# and those values, samples per step, tokens per step, (seconds, steps) since the
# previous recorded step or None). Only tuples and numbers, queued as they are: the
# garbage collector stops tracking such a tuple at its first young collection, so a
# backlog of them never swells the old generation. (A dict inside, or a tuple around,
# would keep it tracked; beside a framework's large heap, each full collection that
# such a backlog triggers costs the training thread tens of milliseconds.)
Logged = tuple[
    int,
    float,
    Optional[float],
    Optional[float],
    Optional[float],
    tuple[str, ...],
    tuple[float, ...],
    Optional[float],
    Optional[float],
    Optional[Timing],
]
# (step, wall time, [(tag, value)], samples per step, tokens per step, None): a step
# with its derived values, ready to reduce or write.
Row = tuple[int, float, Values, Optional[float], Optional[float], Any]

_LOSS, _LR, _GRAD_NORM = TAGS["loss"], TAGS["lr"], TAGS["grad_norm"]
_PERPLEXITY, _EVAL_LOSS, _EVAL_PERPLEXITY = TAGS["perplexity"], "eval/loss", "eval/perplexity"


class Telemetry(Protocol):
    """A rank's hardware sampler as the steps see it (:mod:`mindwatch.hardware`)."""

    def latest(self) -> Values:
        """The latest sample's ``hw/...`` values (empty before the first sample)."""
        ...

    def due(self, wall: float) -> Values:
        """The latest sample's values if a sampling period passed since the last step
        that got them (``wall``: this step's time), else nothing: one point per period."""
        ...


def logged_points(logged: Logged) -> int:
    """How many values the caller logged in this step (what a drop loses)."""
    _, _, loss, lr, grad_norm, names, _, _, _, _ = logged
    return (loss is not None) + (lr is not None) + (grad_norm is not None) + len(names)


class LocalSteps:
    """A rank's step as logged -> its own values: the logged ones under their tags and
    the rates derived from its timing, except the derived tags the caller logs itself
    (:attr:`provided`); non-finite values are counted. Used by one thread at a time (the
    pipeline's, or the collective thread under reduction); the counter locks, and the
    rates' FLOPs count and :attr:`provided` are one attribute each (another thread may
    read them)."""

    def __init__(
        self,
        rates: StepRates,
        counter: NonFiniteCounter,
        telemetry: Optional[Telemetry] = None,
    ) -> None:
        self.rates = rates
        self.counter = counter
        # The hardware sampler's latest values, for a step logged at a wall time (empty
        # unless a period passed since the last step that got them). Set only where the
        # steps are written as they are (no reduction): under reduction they join the
        # interval's last step instead (mindwatch.aggregate.Aggregator), on every rank.
        self.telemetry = telemetry
        # Derived tags the caller has logged: theirs are written, these are no longer
        # derived. Replaced, never changed in place, so another thread reads it safely.
        self.provided: frozenset[str] = frozenset()
        self._tags: dict[str, str] = {}

    def __call__(self, logged: Logged) -> Row:
        step, wall, loss, lr, grad_norm, names, scalars, samples, tokens, timing = logged
        values: Values = []
        append = values.append
        if loss is not None:
            append((_LOSS, loss))
        if lr is not None:
            append((_LR, lr))
        if grad_norm is not None:
            append((_GRAD_NORM, grad_norm))
        if names:
            tags = self._tags
            for key, value in zip(names, scalars):
                tag = tags.get(key)
                if tag is None:
                    tag = tags[key] = tag_for(key)
                    if tag in DERIVED_TAGS:  # once per key, not per step
                        self.provided = self.provided | {tag}
                append((tag, value))
        rates = self.rates
        derived = rates.derive(timing, samples, rates.tokens(samples, tokens))
        provided = self.provided
        if provided:
            derived = [pair for pair in derived if pair[0] not in provided]
        values += derived
        telemetry = self.telemetry
        if telemetry is not None:
            values += telemetry.due(wall)
        self.counter.count(values)
        return step, wall, values, samples, tokens, None


class RunValues:
    """What is derived from the values themselves, once, after any reduction (for one
    rank or many alike): ``train/perplexity`` of a step's loss and ``eval/perplexity``
    of an evaluation's (with ``perplexity`` on), unless the caller logs that tag. On
    the pipeline's thread, for every step and evaluation it writes."""

    def __init__(self, local: LocalSteps, *, perplexity: bool) -> None:
        self.local = local
        self.perplexity = perplexity

    def step(self, values: Values, *, count: bool = False) -> Values:
        """A step's values and theirs; ``count``: count what is added if non-finite
        (a raw step's own values were counted when derived; a reduced step's are its
        ranks' to count)."""
        if not self.perplexity or _PERPLEXITY in self.local.provided:
            return values
        derived = with_perplexity(values)
        if count and derived is not values:
            self.local.counter.count(derived[-1:])
        return derived

    def eval(self, values: Values) -> Values:
        """Evaluation results and ``eval/perplexity`` of their ``eval/loss``."""
        if not self.perplexity or any(tag == _EVAL_PERPLEXITY for tag, _ in values):
            return values
        return with_perplexity(values, loss=_EVAL_LOSS, into=_EVAL_PERPLEXITY)
