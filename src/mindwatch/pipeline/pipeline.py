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
   training loop as :class:`~mindwatch.alerts.Control` values in :attr:`controls`; each
   alert written then goes to the ``MAIN`` sinks too, as a
   :class:`~mindwatch.sinks.items.RaisedAlert` (the Prometheus exporter counts them).

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
from collections import deque
from collections.abc import Sequence
from typing import Any, Callable, Optional

from mindwatch.alerts import Alert, Control
from mindwatch.common.handoff import Handoff
from mindwatch.common.waits import finite_seconds, wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.metrics.derived import Values, with_perplexity
from mindwatch.metrics.steps import LocalSteps, logged_points
from mindwatch.metrics.tags import TAGS
from mindwatch.pipeline.alerting import Alerting
from mindwatch.sinks import SinkGroup
from mindwatch.sinks.items import EvalValues, Histogram, Item, RaisedAlert, Scalars, StepValues

__all__ = ["MAIN", "RANK", "Pipeline"]

log = logging.getLogger(__name__)

MAIN, RANK, BOTH = 0, 1, 2  # routes
# Queue entries are plain tuples, cheap to build on the training thread. A step as logged
# (mindwatch.metrics.steps.Logged, its first element the step, an int) is queued as it
# is: holding only numbers and tuples, it is untracked by the garbage collector at its
# first young collection (a wrapping tuple would stay tracked into the old generation;
# see Logged). Every other entry starts with its kind, a string:
# (STEP, route, step, values, wall, samples) | (EVAL, step, values) |
# (ITEM, route, item) | (ALERT, alert) | (IDS, step, ids) | (SETTING, name, value) |
# (FAILED, step, reason) | (SINK, route, sink) | (BARRIER, event) | (STOP, timeout)
STEP, EVAL, ITEM, ALERT, IDS = "step", "eval", "item", "alert", "ids"
SETTING, FAILED, SINK, BARRIER, STOP = "setting", "failed", "sink", "barrier", "stop"

_PERPLEXITY = TAGS["perplexity"]
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


def _points(entry: tuple[Any, ...]) -> Optional[int]:
    """The points a record holds (what dropping it counts); None if it is not data."""
    if not _is_data(entry):
        return None
    kind = entry[0]
    if type(kind) is int:
        return logged_points(entry) or 1
    if kind in (STEP, EVAL):
        return len(entry[3] if kind == STEP else entry[2]) or 1
    return 1


class Pipeline:
    """Take records through derivation to the sinks and the rules, on one thread.

    Args:
        main: the sinks of the run this process writes (empty on a rank whose values
            are only reduced).
        rank: the sinks of this rank's own folder under reduction (may start empty).
        local: derives a raw step's local values.
        perplexity: add ``train/perplexity`` to reduced steps (raw ones get it from
            ``local``).
        alerting: the rules, on ``main``'s steps (None: no rules here).
        open_rank_folder: the sinks of this rank's own folder, opened when a reduction
            fails on a rank that had none (its values are not lost), or None.
        max_queue: records that may wait; a producer of more waits for room, then
            they are dropped and counted.
        max_block_secs: the longest a producer waits for room before data is dropped.
        controls: the queue the alerting puts its controls in.
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
        controls: Optional[deque[Control]] = None,
    ) -> None:
        self.main = main
        self.rank = rank
        self.local = local
        self.perplexity = perplexity
        self.alerting = alerting
        self._open_rank_folder = open_rank_folder
        self._max_queue = max_queue
        # Finite, or a wait on them raises OverflowError (in the caller or the thread).
        max_block_secs = finite_seconds("max_block_secs", max_block_secs)
        period = finite_seconds("period", period, positive=True)
        # Decisions for the training loop (the alerting appends, the loop takes them).
        self.controls: deque[Control] = controls if controls is not None else deque()
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
        return self._handoff.barrier()

    def close(self, timeout: Optional[float] = None) -> None:
        """Process what is queued, close the sinks (files complete), end the thread."""
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
                len(handoff.queue),
            )
        for group in self._groups():
            group.close(timeout)

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
            self._main_step(step, values, wall, samples)
        elif kind == STEP:
            _, route, step, values, wall, samples = entry
            if self.perplexity and _PERPLEXITY not in self.local.provided:
                values = with_perplexity(values)  # the caller's own, when logged, instead
            if route == MAIN:
                self._main_step(step, values, wall, samples)
            elif self.rank:
                self.rank.write(StepValues(step, values, wall, samples))
        elif kind == EVAL:
            _, step, values = entry
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
            self._setting(entry[1], entry[2])
        elif kind == FAILED:
            self._failed(entry[1], entry[2])
        elif kind == SINK:
            (self.main if entry[1] == MAIN else self.rank).add(entry[2])
        elif kind == BARRIER:
            entry[1].set()

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

    def _setting(self, name: str, value: Any) -> None:
        if name in ("flops_per_step", "peak_tflops"):
            setattr(self.local.rates, name, value)
            return
        alerting = self.alerting
        if alerting is None:
            return
        if name == "steps_per_epoch":
            alerting.steps_per_epoch = value
        elif name == "keeps_checkpoints":
            alerting.keeps_checkpoints = bool(value)

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
        controls = self.controls
        taken = []
        while controls:
            taken.append(controls.popleft())
        return taken
