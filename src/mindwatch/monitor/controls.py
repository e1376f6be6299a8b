"""``RunControls``: the half of :class:`~mindwatch.Monitor`'s API that answers the
training loop and ends the run.

What the rules decided comes back as a value (:meth:`RunControls.end_step`: the
controls due and whether to stop), alerts and counts can be read, and the run is
flushed, closed (``run.json`` says how it ended) or aborted. The other half, in
:mod:`mindwatch.monitor.front`, records values. Both delegate: to the run's
:class:`~mindwatch.monitor.session.RunSession` and to its
:class:`~mindwatch.monitor.route.StepRoute`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, TypeVar

from mindwatch.aggregate import Aggregator
from mindwatch.alerts import Alert, Control, StepControls
from mindwatch.events.writer import EventFileWriter, WriterStats
from mindwatch.forensics import FlightRecorder
from mindwatch.metrics.values import NonFiniteCounter, step_number
from mindwatch.monitor.route import StepRoute
from mindwatch.monitor.session import RunSession
from mindwatch.pipeline import Pipeline
from mindwatch.run import lifecycle
from mindwatch.sinks import Sink

__all__ = ["RunControls"]

_Self = TypeVar("_Self", bound="RunControls")


class RunControls:
    """Controls, alerts, counts and the end of a run (see the module doc).

    The attributes below are set by :class:`~mindwatch.Monitor`'s constructor.
    """

    rank: int
    logdir: Path
    last_step: Optional[int]
    steps_logged: int
    _session: RunSession
    _pipeline: Pipeline
    _route: StepRoute
    _counter: NonFiniteCounter
    _closed: bool
    _steps_out_of_order: int
    _steps_per_epoch: Optional[int]

    # ------------------------------------------------------------------ controls

    def end_step(self, *, wait: bool = False) -> StepControls:
        """What the training loop should do now, as one value: the controls decided
        since the last call (each once) and whether to stop (``stop``, with its
        reason). Empty on most steps.

        Call it after each step's :meth:`log_step` (the MindSpore callback does) and
        apply what it holds; a ``keep_last_stable`` control carries its alert, which is
        written when the loop passes it back to :meth:`report`. ``wait``: first let the
        rules judge every step logged (or reduced) so far, e.g. before a checkpoint is
        saved and an older one rotated away.
        """
        return self._route.take(wait=wait, last_step=self.last_step)

    def take_controls(self, *, wait: bool = False) -> list[Control]:
        """What the training loop should do now, besides stopping (see
        :attr:`should_stop`): each :class:`~mindwatch.alerts.Control` once (the
        controls of :meth:`end_step`, for loops that poll).

        A ``keep_last_stable`` control carries its alert, which is written when the loop
        passes it back to :meth:`report` (having kept the checkpoint, it can say which).
        ``wait``: first let the rules judge every step logged (or reduced) so far.
        """
        return list(self._route.take(wait=wait, last_step=self.last_step).controls)

    @property
    def should_stop(self) -> bool:
        """Whether training should stop now (an alert of a rule in ``alerts.stop_on``).

        Under reduction across ranks this turns true on every rank in the same step (the
        request travels with the next reduction), so all ranks stop together.
        """
        return self._route.should_stop

    @property
    def stop_reason(self) -> Optional[str]:
        return self._route.stop_reason

    def add_sink(self, sink: Sink) -> None:
        """Send this run's records to ``sink`` too, from the next record on (see
        :class:`~mindwatch.sinks.Sink`; it runs on the pipeline's thread, and a sink that
        raises is a warning, once, never a stop)."""
        self._pipeline.add_sink(sink)

    def keep_checkpoints(self, keeping: bool = True) -> None:
        """Tell the rules that the training loop can keep a "last stable" checkpoint
        (``keep_last_stable`` controls, ``alerts.last_stable_on``)."""
        self._pipeline.set_keeps_checkpoints(keeping)

    @property
    def flight_recorder(self) -> Optional[FlightRecorder]:
        """This rank's flight recorder (``alerts.forensics``; None when off): the
        MindSpore adapter appends each step's per-parameter squared gradient norms and
        the ids of non-finite samples (docs/forensics.md)."""
        return self._pipeline.recorder

    def log_sample_ids(self, step: int, ids: Sequence[Any]) -> None:
        """The sample ids of ``step``'s batch: an alert at that step names them."""
        number, kept = step_number(step), list(ids)
        recorder = self._pipeline.recorder
        if recorder is not None:  # one deque append: there when another rank asks
            recorder.add_sample_ids(number, kept)
        self._pipeline.sample_ids(number, kept)

    @property
    def steps_per_epoch(self) -> Optional[int]:
        """Steps per epoch, so an alert can name its step's batch in the epoch."""
        return self._steps_per_epoch

    @steps_per_epoch.setter
    def steps_per_epoch(self, steps: Optional[int]) -> None:
        self._steps_per_epoch = steps
        self._pipeline.set_steps_per_epoch(steps)

    # ------------------------------------------------------------------ alerts, run.json

    def report(self, alert: Alert) -> None:
        """Write an alert raised outside the rules (an action taken: a changed lr), or
        one a ``keep_last_stable`` control handed to the training loop."""
        self._pipeline.alert(alert)

    def record(self, **fields: Any) -> None:
        """Add ``fields`` to ``run.json`` now (on the rank that writes it)."""
        self._session.record(**fields)

    @property
    def alerts(self) -> list[Alert]:
        """The alerts on the steps logged so far (under reduction: reduced so far)."""
        self._catch_up()
        return list(self._pipeline.alerts)

    @property
    def nonfinite(self) -> dict[str, int]:
        """NaN / Inf values logged so far, per tag (under reduction: reduced so far)."""
        self._catch_up()
        return self._counter.counts()

    def _catch_up(self) -> None:
        """Let the pipeline process what was logged so far (a short, bounded wait)."""
        if not self._closed:
            self._route.await_verdicts(self.last_step)

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def writer(self) -> EventFileWriter:
        """The writer of the run this process writes: the global one on rank 0."""
        writers = self._session.writers()
        if not writers:
            raise RuntimeError(
                f"rank {self.rank} writes no event files (its values are reduced into rank "
                "0's run; set per_rank: true for a folder of its own)"
            )
        return writers[0]

    @property
    def rank_logdir(self) -> Optional[Path]:
        """``<run>/rank_<r>/`` when this rank writes its own folder, else None."""
        return self._session.rank_logdir

    @property
    def writes_shared(self) -> bool:
        """Whether this rank writes the values that are the same on every rank (model
        state, histograms, eval): rank 0, or a rank nobody reduces with. Others can
        skip computing them."""
        return self._pipeline.writes_main

    @property
    def aggregator(self) -> Optional[Aggregator]:
        """The cross-rank reducer, when this monitor reduces (several ranks, a collective)."""
        return self._route.aggregator

    @property
    def stats(self) -> WriterStats:
        """Counters of this process's writers, summed (and points the pipeline dropped)."""
        return self._session.outputs.stats()

    def settle(self, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds in all, until this process's background
        threads have processed what was logged so far (files are not flushed): a quiet
        moment for a measurement. False on timeout.

        The compute micro-benchmark needs it: right after a reduction rank 0 alone
        derives the global values, runs the rules and writes them, and a benchmark
        timed beside that work measured rank 0 slower than the others with nothing
        planted (docs/multicard.md)."""
        deadline = time.monotonic() + timeout
        aggregator = self._route.aggregator
        if aggregator is not None and not aggregator.sync(timeout):
            return False
        return self._pipeline.sync(max(0.0, deadline - time.monotonic()))

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Block until everything logged so far is handed to the OS.

        Under reduction that means what was reduced so far; steps still buffered for the
        current interval are written when it completes (or at :meth:`close`).
        """
        ok = self._route.flush(timeout)
        return self._pipeline.flush(timeout) and ok

    def close(self, timeout: Optional[float] = None) -> None:
        """Write everything, close the files and mark the run finished. Idempotent.

        ``run.json`` then says ``finished``, or ``terminated`` when SIGTERM closed it.
        Under reduction the last buffered steps are reduced first, which every rank
        does in its own ``close()``; closing at interpreter exit or on a signal writes
        them unreduced instead (the other ranks may not be closing).
        """
        self._close(timeout, communicate=not lifecycle.closing_all)

    def abort(self, error: object, timeout: Optional[float] = None) -> None:
        """Close after training failed with ``error``: ``run.json`` says ``failed``.

        Everything logged is written; steps still buffered for a reduction are written
        unreduced (the other ranks may never reach theirs).
        """
        self._close(timeout, communicate=False, error=error)

    def _close(self, timeout: Optional[float], *, communicate: bool, error: object = None) -> None:
        if self._closed:
            # Closing already (e.g. SIGTERM during the program's own close()): wait for
            # the files like the first caller does, then leave run.json to it.
            self._pipeline.close(timeout)
            return
        self._closed = True
        lifecycle.unregister(self)
        self._session.close(
            self._route,
            timeout,
            communicate=communicate,
            error=error,
            nonfinite=self._counter.counts,
            last_step=self.last_step,
            steps_logged=self.steps_logged,
            steps_out_of_order=self._steps_out_of_order,
        )

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # Unwinding from an exception: the other ranks may not be closing too, so the
        # last buffered steps are written unreduced rather than waiting for them.
        if exc is not None:
            self.abort(exc)
        else:
            self.close()
