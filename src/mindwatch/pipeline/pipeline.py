"""``Pipeline``: where every logged record goes, off the training thread.

The training thread (or, under data parallelism, the collective thread with reduced
steps) appends tuples to one queue; the pipeline's thread takes them in order and:

1. turns a logged step into its local values: the tags, rates from its timing (step
   time, samples/s, tokens/s, TFLOPS, MFU), perplexity, and counts the non-finite ones
   (:class:`~mindwatch.metrics.steps.LocalSteps`; under reduction the aggregator calls
   the same object before packing, so each rank derives its own);
2. writes every record to the sinks of its *route*: ``MAIN`` (the run this process
   writes: TensorBoard, the MindFormers view, the console) or ``RANK`` (this rank's own
   folder under reduction), through a :class:`~mindwatch.sinks.SinkGroup` each;
3. applies the rules to the ``MAIN`` route's steps and evaluations
   (:class:`~mindwatch.pipeline.alerting.Alerting`), whose decisions come back to the
   training loop as :class:`~mindwatch.alerts.Control` values (:meth:`take_controls`);
   each alert written then goes to the ``MAIN`` sinks too, as a
   :class:`~mindwatch.sinks.items.RaisedAlert` (the Prometheus exporter counts them).

Values derived from other values are derived here and only here, on this thread:
a raw step's rates by :class:`~mindwatch.metrics.steps.LocalSteps` (under reduction
each rank's collective thread applies the same object before packing: a rank's rates
come from its own clock), and ``train/perplexity`` / ``eval/perplexity`` of every step
and evaluation written (:meth:`_finished`), after the reduction, for one rank or many
alike, as OLMo-core adds it once after reducing.

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
(settings, alerts, purge markers, sinks) are never dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Callable, Optional

from mindwatch.alerts import Alert, Control
from mindwatch.common.waits import finite_seconds, wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.metrics.derived import Values, perplexity, with_perplexity
from mindwatch.metrics.steps import LocalSteps, Logged, logged_points
from mindwatch.metrics.tags import TAGS
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
# (STEP, route, step, values, wall, samples) | (EVAL, step, values) |
# (ITEM, route, item) | (ALERT, alert) | (IDS, step, ids) | (SETTING, setter, value) |
# (FAILED, step, reason) | (SINK, route, sink) | (BARRIER, event) | (STOP, timeout)
STEP, EVAL, ITEM, ALERT, IDS = "step", "eval", "item", "alert", "ids"
SETTING, FAILED, SINK, BARRIER, STOP = "setting", "failed", "sink", "barrier", "stop"

_PERPLEXITY, _EVAL_PERPLEXITY = TAGS["perplexity"], "eval/perplexity"
PERIOD = 0.1  # longest wait before queued records are processed (seconds)
_HIGH_WATER = 1024  # wake the thread early once this many records wait
# Records processed per hold of the GIL: a tight training loop waits at most about a
# chunk's processing for it (as the event writer does with its encoding).
_CHUNK = 64


def _is_data(entry: tuple[Any, ...]) -> bool:
    """Whether a record carries values (and may wait for room, or be dropped)."""
    kind = entry[0]
    if type(kind) is int or kind in {STEP, EVAL}:
        return True
    return kind == ITEM and isinstance(entry[2], (Histogram, Scalars))


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
        open_rank_folder: Optional[Callable[[], Optional[SinkGroup]]] = None,
        max_queue: int = 100_000,
        max_block_secs: float = 1.0,
        period: float = PERIOD,
    ) -> None:
        self.main = main
        self.rank = rank
        self.local = local
        self.perplexity = perplexity
        self.alerting = alerting
        self._open_rank_folder = open_rank_folder
        self._max_queue = max_queue
        # Finite, or a wait on them raises OverflowError (in the caller or the thread).
        self._max_block_secs = finite_seconds("max_block_secs", max_block_secs)
        period = finite_seconds("period", period, positive=True)
        self._wake_at = max(1, min(_HIGH_WATER, max_queue // 2))
        self._room_at = max(1, max_queue // 2)  # producers waiting go on below this
        self._room = threading.Event()
        self._blocked = False  # a producer waits for room
        self._stalled = False  # a wait for room timed out: drop until caught up
        self._period = period
        # Decisions for the training loop: the alerting appends (this thread), the
        # training thread takes them (take_controls); a deque's ends are thread-safe.
        self._controls: deque[Control] = deque()
        if alerting is not None:
            alerting.connect(self._controls.append)
        self.points_dropped = 0
        self.errors = 0  # the thread ended on an unexpected error (counted in run.json)
        self._died = False
        self._queue: deque[tuple[Any, ...]] = deque()
        self._wake = threading.Event()
        self._warn = WarnOnce(log)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mindwatch-pipeline", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ any producer thread

    def submit(self, entry: tuple[Any, ...]) -> None:
        """Queue one record; when the queue is full, data waits for room (bounded)."""
        queue = self._queue
        if self._closed or self._died:
            self._drop(entry)
            return
        if len(queue) >= self._max_queue and _is_data(entry) and not self._wait_for_room():
            self._drop(entry)
            return
        queue.append(entry)
        if len(queue) >= self._wake_at:
            self._wake.set()

    def queue_for_producers(self) -> tuple[deque[tuple[Any, ...]], int]:
        """The queue and the length below which a producer may append to it directly
        (no wake-up is due, nothing waits or is dropped); at or above it, :meth:`submit`."""
        return self._queue, self._wake_at

    # The typed inlet: each call queues one private record, in order with the steps.

    def logged(self, logged: Logged) -> None:
        """A step as the front door logged it (derived here)."""
        self.submit(logged)

    def item(self, item: Item, route: int = MAIN) -> None:
        """A record for the sinks of ``route`` (``MAIN``, ``RANK`` or ``BOTH``)."""
        self.submit((ITEM, route, item))

    def eval(self, step: int, values: Values) -> None:
        """Evaluation results at ``step``, under their tags: written, judged by the rules."""
        self.submit((EVAL, step, values))

    def alert(self, alert: Alert) -> None:
        """An alert raised outside the rules, or handed back by the training loop."""
        self.submit((ALERT, alert))

    def sample_ids(self, step: int, ids: list[Any]) -> None:
        """The sample ids of ``step``'s batch, for an alert at that step."""
        self.submit((IDS, step, ids))

    def add_sink(self, sink: Sink, route: int = MAIN) -> None:
        """Send ``route``'s records to ``sink`` too, from the next record on."""
        self.submit((SINK, route, sink))

    def set_steps_per_epoch(self, steps: Optional[int]) -> None:
        """Steps per epoch, so an alert names its step's batch in the epoch."""
        self.submit((SETTING, self._set_steps_per_epoch, steps))

    def set_keeps_checkpoints(self, keeping: bool) -> None:
        """Whether the training loop can keep a last stable checkpoint."""
        self.submit((SETTING, self._set_keeps_checkpoints, bool(keeping)))

    def set_flops_per_step(self, flops: float) -> None:
        """Model FLOPs of one step, for the steps queued from now on."""
        self.submit((SETTING, self._set_flops_per_step, flops))

    def set_peak_tflops(self, peak: float) -> None:
        """The device's peak TFLOPS, for the steps queued from now on."""
        self.submit((SETTING, self._set_peak_tflops, peak))

    @property
    def writes_main(self) -> bool:
        """Whether this process writes a run (``MAIN`` has sinks)."""
        return bool(self.main)

    @property
    def controls_waiting(self) -> deque[Control]:
        """The controls not yet taken (true when any wait): read it, never change it;
        :meth:`take_controls` takes them."""
        return self._controls

    def _wait_for_room(self) -> bool:
        """Wait (at most max_block_secs) until the queue has room; False if it has none."""
        if self._stalled or not self._thread.is_alive():
            return False
        if self._thread is threading.current_thread():
            return True  # a sink logging from the pipeline's thread: never wait for itself
        deadline = time.monotonic() + self._max_block_secs
        while len(self._queue) >= self._max_queue and not self._closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._stalled = True  # drop without waiting until the thread catches up
                return False
            self._room.clear()
            self._blocked = True
            self._wake.set()
            self._room.wait(wait_seconds(remaining))
        return not self._closed

    def step(self, route: int, step: int, values: Values, wall: float, samples: Any) -> None:
        """A derived (and, for ``MAIN``, reduced) step, e.g. from the aggregator."""
        self.submit((STEP, route, step, values, wall, samples))

    def failed(self, step: int, reason: str) -> None:
        """Reductions stopped at ``step``: this rank's own values need a folder."""
        self.submit((FAILED, step, reason))

    def sync(self, timeout: Optional[float] = None) -> bool:
        """Wait until everything queued before the call is processed (False on timeout)."""
        return self.barrier().wait(wait_seconds(timeout))

    def barrier(self) -> threading.Event:
        """An event set once everything queued before the call is processed."""
        done = threading.Event()
        thread = self._thread
        if self._closed or not thread.is_alive() or thread is threading.current_thread():
            # Closing processes everything queued before it, or nothing will; and the
            # pipeline's own thread (a sink asking) cannot wait for itself.
            done.set()
            return done
        self._queue.append((BARRIER, done))
        self._wake.set()
        if not self._thread.is_alive() or self._died:
            done.set()
        return done

    def close(self, timeout: Optional[float] = None) -> None:
        """Process what is queued, close the sinks (files complete), end the thread.
        The notifiers are not waited for here: :meth:`close_notifiers`."""
        if self._closed:
            self._thread.join(wait_seconds(timeout))
            return
        self._closed = True  # later records are dropped (and counted)
        self._queue.append((STOP, timeout))
        self._wake.set()
        self._room.set()
        if self._thread is not threading.current_thread():
            self._thread.join(wait_seconds(timeout))
        if self._died:  # its records are counted (and it said so): the files still close
            self._discard()
        elif self._thread.is_alive():  # a sink hangs (a hung disk): close what we can
            log.warning(
                "mindwatch: the pipeline did not finish within %s s; %d queued records may "
                "not be written",
                timeout,
                len(self._queue),
            )
        else:
            return
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

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # a dead thread must not be silent
            self._died = True
            self.errors += 1
            self._discard()
            log.warning(
                "mindwatch: the pipeline's thread stopped on an unexpected error (%r); values "
                "logged from now on are dropped and counted (points_dropped in run.json, %d "
                "so far). Training continues.",
                exc,
                self.points_dropped,
            )

    def _discard(self) -> None:
        """Count what is queued as dropped (barriers released): nothing will process it."""
        while self._queue:
            self._drop(self._queue.popleft())
        self._room.set()  # nor wait for room

    def _serve(self) -> None:
        queue, wake = self._queue, self._wake
        while True:
            wake.wait(wait_seconds(self._period))
            wake.clear()
            done = 0
            while queue:
                entry = queue.popleft()
                if entry[0] == STOP:
                    self._finish(entry[1])
                    while queue:  # raced with close(): counted, and no barrier waits
                        self._drop(queue.popleft())
                    return
                try:
                    self._process(entry)
                except Exception as exc:  # never lose the thread over one record
                    kind = "logged step" if type(entry[0]) is int else entry[0]
                    self._warn_once(f"kind {kind}", f"a record could not be processed: {exc!r}")
                except BaseException:  # the thread ends (see _run): this record is lost too
                    self._died = True
                    self._drop(entry)
                    raise
                done += 1
                if done % _CHUNK == 0:
                    if self._blocked and len(queue) < self._room_at:
                        self._blocked = False
                        self._room.set()
                    time.sleep(0)  # let the training thread have the GIL between chunks
            self._stalled = False  # caught up: producers may wait for room again
            if self._blocked:
                self._blocked = False
                self._room.set()

    def _process(self, entry: tuple[Any, ...]) -> None:
        kind = entry[0]
        if type(kind) is int:  # a step as logged
            step, wall, values, samples, _, _ = self.local(entry)
            self._main_step(step, self._finished(values, count=True), wall, samples)
        elif kind == STEP:
            _, route, step, values, wall, samples = entry
            values = self._finished(values)  # rank stage counted its own already
            if route == MAIN:
                self._main_step(step, values, wall, samples)
            elif self.rank:
                self.rank.write(StepValues(step, values, wall, samples))
        elif kind == EVAL:
            _, step, values = entry
            values = self._finished_eval(values)
            self.local.counter.count(values)
            self.main.write(EvalValues(step, values))
            self._judge(step, values)
        elif kind == ITEM:
            _, route, item = entry
            self._write(route, item)
        elif kind == ALERT:
            if self.alerting is not None:
                self.alerting.report(entry[1])
                self.main.write(RaisedAlert(entry[1]))
        elif kind == IDS:
            if self.alerting is not None:
                self.alerting.note_sample_ids(entry[1], entry[2])
        elif kind == SETTING:
            entry[1](entry[2])
        elif kind == FAILED:
            self._failed(entry[1], entry[2])
        elif kind == SINK:
            (self.main if entry[1] == MAIN else self.rank).add(entry[2])
        elif kind == BARRIER:
            entry[1].set()

    def _finished(self, values: Values, *, count: bool = False) -> Values:
        """A step's values with the run-level derived ones (perplexity of its loss,
        reduced or not), unless the caller logs that tag; ``count``: count the added
        non-finite ones too (a raw step's others were counted when derived)."""
        if not self.perplexity or _PERPLEXITY in self.local.provided:
            return values
        finished = with_perplexity(values)
        if count and finished is not values:
            self.local.counter.count(finished[-1:])
        return finished

    def _finished_eval(self, values: Values) -> Values:
        """Evaluation results with ``eval/perplexity`` of their ``eval/loss``."""
        if not self.perplexity or any(tag == _EVAL_PERPLEXITY for tag, _ in values):
            return values
        for tag, value in values:
            if tag == "eval/loss":
                return [*values, (_EVAL_PERPLEXITY, perplexity(value))]
        return values

    def _main_step(self, step: int, values: Values, wall: float, samples: Any) -> None:
        self.main.write(StepValues(step, values, wall, samples))
        self._judge(step, values)

    def _judge(self, step: int, values: Values) -> None:
        """The rules on ``main``'s values; the alerts written go to ``main`` too (the
        exporter counts them)."""
        if self.alerting is not None:
            for alert in self.alerting.observe(step, values):
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
        for group in self._groups():
            group.close(timeout)

    def _drop(self, entry: tuple[Any, ...]) -> None:
        kind = entry[0]
        if kind == BARRIER:
            entry[1].set()
            return
        if not _is_data(entry):
            return  # a setting or an alert for a closed pipeline: nothing left to do
        points = 1
        if type(kind) is int:
            points = logged_points(entry) or 1
        elif kind in (STEP, EVAL):
            points = len(entry[3] if kind == STEP else entry[2]) or 1
        self.points_dropped += points
        if self._died:
            return  # said once, when the thread ended
        if self._closed:
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
    def alerts(self) -> list[Alert]:
        return self.alerting.alerts if self.alerting is not None else []

    def take_controls(self) -> Sequence[Control]:
        """The controls decided so far (once each), oldest first."""
        controls = self._controls
        taken = []
        while controls:
            taken.append(controls.popleft())
        return taken
