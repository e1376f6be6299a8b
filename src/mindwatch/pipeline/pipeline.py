"""``Pipeline``: where every logged record goes, off the training thread.

The training thread (or, under data parallelism, the collective thread with reduced
steps) appends tuples to one queue; the pipeline's thread takes them in order and:

1. turns a logged step into its local values: the tags, rates from its timing (step
   time, samples/s, tokens/s, TFLOPS, MFU), and counts the non-finite ones
   (:class:`~mindwatch.metrics.steps.LocalSteps`; under reduction the aggregator's
   collective thread calls the same object before the reduction: each rank's rates come
   from its own clock); then, for every step and evaluation written, reduced or not,
   what is derived from the values themselves, once
   (:class:`~mindwatch.metrics.steps.RunValues`: perplexity, as OLMo-core adds it once
   after reducing);
2. writes every record to the sinks of its *route*: ``MAIN`` (the run this process
   writes: TensorBoard, the MindFormers view, the console) or ``RANK`` (this rank's own
   folder under reduction), through a :class:`~mindwatch.sinks.SinkGroup` each;
3. applies the rules to the ``MAIN`` route's steps and evaluations
   (:class:`~mindwatch.pipeline.alerting.Alerting`), whose decisions come back to the
   training loop as :class:`~mindwatch.alerts.Control` values (:meth:`take_controls`);
   each alert written then goes to the ``MAIN`` sinks too, as a
   :class:`~mindwatch.sinks.items.RaisedAlert` (the Prometheus exporter counts them).

Producers use the typed inlet (:meth:`logged`, :meth:`item`, :meth:`eval`,
:meth:`alert`, :meth:`sample_ids`, the ``set_*`` settings, :meth:`add_sink`, :meth:`step`,
:meth:`failed`, :meth:`barrier`); the record tuples it queues are this module's own.

The thread wakes every ``period`` seconds (a tenth of a second at most), when the queue
passes a high-water mark, or when asked (:meth:`sync`, :meth:`close`), and then takes
everything queued, so a tight training loop pays one append per record and the
background work is batched. A record that fails is a warning, once, and never stops the
thread. When ``max_queue`` records wait (a burst, or sinks far slower than training), a
producer of data waits for room, at most ``max_block_secs`` in all; then, until the
thread catches up, new data is dropped and counted at once. Records that are not data
(settings, alerts, purge markers, sinks) are never dropped. That queue and its thread
are a :class:`~mindwatch.common.handoff.Handoff`, as each event writer's are.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Callable, Optional

from mindwatch.alerts import Alert, Control
from mindwatch.common.handoff import Handoff
from mindwatch.common.waits import finite_seconds, wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.forensics import FlightRecorder
from mindwatch.metrics.derived import Values
from mindwatch.metrics.steps import LocalSteps, Logged, RunValues, logged_points
from mindwatch.pipeline.alerting import Alerting
from mindwatch.sinks import Sink, SinkGroup
from mindwatch.sinks.items import EvalValues, Histogram, Item, RaisedAlert, Scalars, StepValues

__all__ = ["BOTH", "MAIN", "RANK", "Pipeline"]

log = logging.getLogger(__name__)

# Routes: the run this process writes, this rank's own folder under reduction, or both.
MAIN, RANK, BOTH = 0, 1, 2
# Queue entries (private to this module) are plain tuples, cheap to build on the
# training thread. A step as logged (mindwatch.metrics.steps.Logged, its first element
# the step, an int) is queued as it is: holding only numbers and tuples, it is
# untracked by the garbage collector at its first young collection (a wrapping tuple
# would stay tracked into the old generation; see Logged). Every other entry starts
# with its kind, a string:
# (_STEP, route, step, values, wall, samples) | (_EVAL, step, values) |
# (_ITEM, route, item) | (_ALERT, alert) | (_IDS, step, ids) | (_SETTING, setter, value) |
# (_FAILED, step, reason) | (_SINK, route, sink) | (_GATHERED, step, slots)
# (The hand-off queues its own barriers and its stop: mindwatch.common.handoff.)
_STEP, _EVAL, _ITEM, _ALERT, _IDS = "step", "eval", "item", "alert", "ids"
_SETTING, _FAILED, _SINK, _GATHERED = "setting", "failed", "sink", "gathered"

PERIOD = 0.1  # longest wait before queued records are processed (seconds)
_HIGH_WATER = 1024  # wake the thread early once this many records wait
# Records processed per hold of the GIL: a tight training loop waits at most about a
# chunk's processing for it (as the event writer does with its encoding).
_CHUNK = 64


def _is_data(entry: tuple[Any, ...]) -> bool:
    """Whether a record carries values (and may wait for room, or be dropped)."""
    kind = entry[0]
    if type(kind) is int or kind in {_STEP, _EVAL}:
        return True
    return kind == _ITEM and isinstance(entry[2], (Histogram, Scalars))


def _points(entry: tuple[Any, ...]) -> Optional[int]:
    """The points a record holds (what dropping it counts); None if it is not data."""
    if not _is_data(entry):
        return None
    kind = entry[0]
    if type(kind) is int:
        return logged_points(entry) or 1
    if kind in (_STEP, _EVAL):
        return len(entry[3] if kind == _STEP else entry[2]) or 1
    return 1


class Pipeline:
    """Take records through derivation to the sinks and the rules, on one thread.

    Args:
        main: the sinks of the run this process writes (empty on a rank whose values
            are only reduced).
        rank: the sinks of this rank's own folder under reduction (may start empty).
        local: derives a raw step's local values (rates from its timing).
        perplexity: add ``train/perplexity`` to every step written, and
            ``eval/perplexity`` to every evaluation with a loss (unless the caller
            logs that tag itself).
        alerting: the rules, on ``main``'s steps (None: no rules here).
        recorder: this rank's flight recorder (:mod:`mindwatch.forensics`): it gets the
            local values of every step this thread derives.
        open_rank_folder: the sinks of this rank's own folder, opened when a reduction
            fails on a rank that had none (its values are not lost), or None.
        max_queue: records that may wait; a producer of more waits for room, then
            they are dropped and counted.
        max_block_secs: the longest a producer waits for room before data is dropped.

    The controls the alerting decides wait in this pipeline's own queue until the
    training thread takes them (:meth:`take_controls`).
    """

    def __init__(
        self,
        *,
        main: SinkGroup,
        rank: SinkGroup,
        local: LocalSteps,
        perplexity: bool = False,
        alerting: Optional[Alerting] = None,
        recorder: Optional[FlightRecorder] = None,
        open_rank_folder: Optional[Callable[[], Optional[SinkGroup]]] = None,
        max_queue: int = 100_000,
        max_block_secs: float = 1.0,
        period: float = PERIOD,
    ) -> None:
        self.main = main
        self.rank = rank
        self.local = local
        self._derived = RunValues(local, perplexity=perplexity)
        self.alerting = alerting
        self.recorder = recorder
        self._open_rank_folder = open_rank_folder
        self._max_queue = max_queue
        # Finite, or a wait on them raises OverflowError (in the caller or the thread).
        max_block_secs = finite_seconds("max_block_secs", max_block_secs)
        period = finite_seconds("period", period, positive=True)
        # Decisions for the training loop: the alerting appends (this thread), the
        # training thread takes them (take_controls); a deque's ends are thread-safe.
        self._controls: deque[Control] = deque()
        if alerting is not None:
            alerting.connect(self._controls.append)
        self.errors = 0  # the thread ended on an unexpected error (counted in run.json)
        self._warn = WarnOnce(log)
        self._handoff: Handoff[tuple[Any, ...]] = Handoff(
            name="mindwatch-pipeline",
            points=_points,
            process=self._handle,
            stop=self._finish,
            dropped=self._dropping,
            died=self._on_death,
            max_queue=max_queue,
            max_block_secs=max_block_secs,
            period=period,
            wake_at=max(1, min(_HIGH_WATER, max_queue // 2)),
            room_at=max(1, max_queue // 2),  # producers waiting go on below this
            chunk=_CHUNK,
        )
        self._handoff.start()

    # ------------------------------------------------------------ any producer thread

    def submit(self, entry: tuple[Any, ...]) -> None:
        """Queue one record; when the queue is full, data waits for room (bounded)."""
        self._handoff.put(entry)

    def queue_for_producers(self) -> tuple[deque[tuple[Any, ...]], int]:
        """The queue and the length below which a producer may append to it directly
        (no wake-up is due, nothing waits or is dropped); at or above it, :meth:`submit`."""
        return self._handoff.queue, self._handoff.fast_limit

    # The typed inlet: each call queues one private record, in order with the steps.

    def logged(self, logged: Logged) -> None:
        """A step as the front door logged it (derived here)."""
        self.submit(logged)

    def item(self, item: Item, route: int = MAIN) -> None:
        """A record for the sinks of ``route`` (``MAIN``, ``RANK`` or ``BOTH``)."""
        self.submit((_ITEM, route, item))

    def eval(self, step: int, values: Values) -> None:
        """Evaluation results at ``step``, under their tags: written, judged by the rules."""
        self.submit((_EVAL, step, values))

    def alert(self, alert: Alert) -> None:
        """An alert raised outside the rules, or handed back by the training loop."""
        self.submit((_ALERT, alert))

    def sample_ids(self, step: int, ids: list[Any]) -> None:
        """The sample ids of ``step``'s batch, for an alert at that step."""
        self.submit((_IDS, step, ids))

    def add_sink(self, sink: Sink, route: int = MAIN) -> None:
        """Send ``route``'s records to ``sink`` too, from the next record on."""
        self.submit((_SINK, route, sink))

    def set_steps_per_epoch(self, steps: Optional[int]) -> None:
        """Steps per epoch, so an alert names its step's batch in the epoch."""
        self.submit((_SETTING, self._set_steps_per_epoch, steps))

    def set_keeps_checkpoints(self, keeping: bool) -> None:
        """Whether the training loop can keep a last stable checkpoint."""
        self.submit((_SETTING, self._set_keeps_checkpoints, bool(keeping)))

    def set_flops_per_step(self, flops: float) -> None:
        """Model FLOPs of one step, for the steps queued from now on."""
        self.submit((_SETTING, self._set_flops_per_step, flops))

    def set_peak_tflops(self, peak: float) -> None:
        """The device's peak TFLOPS, for the steps queued from now on."""
        self.submit((_SETTING, self._set_peak_tflops, peak))

    @property
    def writes_main(self) -> bool:
        """Whether this process writes a run (``MAIN`` has sinks)."""
        return bool(self.main)

    @property
    def controls_waiting(self) -> deque[Control]:
        """The controls not yet taken (true when any wait): read it, never change it;
        :meth:`take_controls` takes them."""
        return self._controls

    def step(self, route: int, step: int, values: Values, wall: float, samples: Any) -> None:
        """A derived (and, for ``MAIN``, reduced) step, e.g. from the aggregator."""
        self.submit((_STEP, route, step, values, wall, samples))

    def gathered(self, step: int, slots: Any) -> None:
        """Every rank's forensics of ``step`` (rank 0, from the aggregator)."""
        self.submit((_GATHERED, step, slots))

    def failed(self, step: int, reason: str) -> None:
        """Reductions stopped at ``step``: this rank's own values need a folder."""
        self.submit((_FAILED, step, reason))

    def sync(self, timeout: Optional[float] = None) -> bool:
        """Wait until everything queued before the call is processed (False on timeout)."""
        return self.barrier().wait(wait_seconds(timeout))

    def barrier(self) -> threading.Event:
        """An event set once everything queued before the call is processed."""
        return self._handoff.barrier()

    def close(self, timeout: Optional[float] = None) -> None:
        """Process what is queued, close the sinks (files complete), end the thread.
        The notifiers are not waited for here: :meth:`close_notifiers`."""
        handoff = self._handoff
        if not handoff.close(timeout):  # later records are dropped (and counted)
            return  # closing already: it waited for the thread as the first caller does
        if handoff.died is None:  # (a dead thread's records are counted: files still close)
            if not handoff.running:
                return  # it finished: the sinks are closed
            log.warning(  # a sink hangs (a hung disk): close what we can
                "mindwatch: the pipeline did not finish within %s s; %d queued records may "
                "not be written",
                timeout,
                handoff.pending(),
            )
        for group in self._groups():
            group.close(timeout)

    def close_notifiers(self, timeout: Optional[float] = None) -> None:
        """Deliver the notifications still queued, within a bounded time (after
        :meth:`close`: every alert is written by then)."""
        if self.alerting is not None:
            self.alerting.close(timeout)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Process what is queued, then flush the sinks (event files in the OS)."""
        ok = self.sync(timeout)
        for group in self._groups():
            ok = group.flush(timeout) and ok
        return ok

    def _groups(self) -> tuple[SinkGroup, ...]:
        """The sink groups, each once (after a failed reduction a rank's own folder is
        both: its values and the shared ones)."""
        return (self.main,) if self.rank is self.main else (self.main, self.rank)

    # ------------------------------------------------------------ the pipeline's thread

    def _handle(self, entry: tuple[Any, ...]) -> None:
        try:
            self._process(entry)
            if self.alerting is not None and self.alerting.holding:
                self._raised(self.alerting.expire(time.monotonic()))
        except Exception as exc:  # never lose the thread over one record
            kind = "logged step" if type(entry[0]) is int else entry[0]
            self._warn_once(f"kind {kind}", f"a record could not be processed: {exc!r}")
        # Anything else ends the thread: the hand-off counts this record and the rest.

    def _on_death(self, exc: BaseException) -> None:
        """The thread ended on an unexpected error; what it left is counted already."""
        self.errors += 1
        log.warning(
            "mindwatch: the pipeline's thread stopped on an unexpected error (%r); values "
            "logged from now on are dropped and counted (points_dropped in run.json, %d "
            "so far). Training continues.",
            exc,
            self.points_dropped,
        )

    def _process(self, entry: tuple[Any, ...]) -> None:
        kind = entry[0]
        if type(kind) is int:  # a step as logged
            step, wall, values, samples, _, _ = self.local(entry)
            values = self._derived.step(values, count=True)
            if self.recorder is not None:
                self.recorder.add_scalars(step, values)
            self._main_step(step, values, wall, samples)
        elif kind == _STEP:
            _, route, step, values, wall, samples = entry
            values = self._derived.step(values)  # the rank stage counted its own already
            if route == MAIN:
                self._main_step(step, values, wall, samples)
            elif self.rank:
                self.rank.write(StepValues(step, values, wall, samples))
        elif kind == _EVAL:
            _, step, values = entry
            values = self._derived.eval(values)
            self.local.counter.count(values)
            self.main.write(EvalValues(step, values))
            self._judge(step, values, step_values=False)
        elif kind == _ITEM:
            _, route, item = entry
            self._write(route, item)
            if self.alerting is not None and route != RANK and isinstance(item, Scalars):
                self.alerting.note_scalars(item.step, item.values)  # judged with their step
        elif kind == _ALERT:
            if self.alerting is not None:
                self.alerting.report(entry[1])
                self.main.write(RaisedAlert(entry[1]))
        elif kind == _IDS:  # (the recorder got them on the caller's thread)
            if self.alerting is not None:
                self.alerting.note_sample_ids(entry[1], entry[2])
        elif kind == _GATHERED:
            if self.alerting is not None:
                self._raised(self.alerting.gathered(entry[1], entry[2]))
        elif kind == _SETTING:
            entry[1](entry[2])
        elif kind == _FAILED:
            self._failed(entry[1], entry[2])
        elif kind == _SINK:
            (self.main if entry[1] == MAIN else self.rank).add(entry[2])

    def _raised(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            self.main.write(RaisedAlert(alert))

    def _main_step(self, step: int, values: Values, wall: float, samples: Any) -> None:
        self.main.write(StepValues(step, values, wall, samples))
        self._judge(step, values)

    def _judge(self, step: int, values: Values, *, step_values: bool = True) -> None:
        """The rules on ``main``'s values (a step's, or an evaluation's); the alerts
        written go to ``main`` too (the exporter counts them)."""
        if self.alerting is not None:
            for alert in self.alerting.observe(step, values, logged_apart=step_values):
                self.main.write(RaisedAlert(alert))

    def _write(self, route: int, item: Item) -> None:
        if route in (MAIN, BOTH):
            self.main.write(item)
        if (route == RANK or (route == BOTH and self.rank is not self.main)) and self.rank:
            self.rank.write(item)

    # Settings, applied on this thread in order with the steps.

    def _set_steps_per_epoch(self, steps: Optional[int]) -> None:
        if self.alerting is not None:
            self.alerting.steps_per_epoch = steps

    def _set_keeps_checkpoints(self, keeping: bool) -> None:
        if self.alerting is not None:
            self.alerting.keeps_checkpoints = keeping

    def _set_flops_per_step(self, flops: float) -> None:
        self.local.rates.flops_per_step = flops

    def _set_peak_tflops(self, peak: float) -> None:
        self.local.rates.peak_tflops = peak

    def _failed(self, step: int, reason: str) -> None:
        if self.alerting is not None:  # no reduction will bring the other ranks' forensics
            self.alerting.gather_off()
            self._raised(self.alerting.expire())
        opener = self._open_rank_folder
        if opener is None:
            return
        opened = opener()
        if opened is not None:
            self._open_rank_folder = None
            for sink in self.rank.sinks:  # a rank's exporter gets both from now on too
                opened.add(sink)
            self.rank = self.main = opened  # its values, and the shared ones from now on

    def _finish(self, timeout: Optional[float]) -> None:
        if self.alerting is not None:  # alerts waiting for other ranks: written now
            self._raised(self.alerting.expire())
        for group in self._groups():
            group.close(timeout)

    def _dropping(self, count: int) -> None:
        """Data was dropped on a producer's thread (counted by the hand-off): say so once."""
        if self._handoff.closed:
            self._warn_once("closed", "values logged after close() are dropped")
            return
        self._warn_once(
            "dropped",
            f"logging runs ahead of the background thread (a slow disk or sink): "
            f"{self._max_queue} steps wait (max_queue), so new ones are dropped and counted "
            "(points_dropped in run.json) until it catches up; raise max_queue for bursts",
        )

    def _warn_once(self, key: str, message: str) -> None:
        self._warn(key, "mindwatch: %s", message)

    # ------------------------------------------------------------ results

    @property
    def points_dropped(self) -> int:
        """Points dropped here (a full queue, a closed pipeline or a dead thread)."""
        return self._handoff.dropped

    @property
    def alerts(self) -> list[Alert]:
        return self.alerting.alerts if self.alerting is not None else []

    def take_controls(self) -> Sequence[Control]:
        """The controls decided so far (once each), oldest first."""
        controls = self._controls  # only this thread takes: len() can only grow meanwhile
        return [controls.popleft() for _ in range(len(controls))]
