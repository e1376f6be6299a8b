"""Where a logged step goes: straight into the pipeline, or through the cross-rank
reduction first. One interface (:class:`StepRoute`), two implementations.

* :class:`LocalRoute`: one process, or a rank nobody reduces with. A step is one append
  to the pipeline's queue; with ``alerts.stop_on`` it then waits for the rules' verdict
  on that step (one hand-over to the pipeline's thread), so a stop takes effect at the
  step that raised it.
* :class:`ReducedRoute`: several ranks with a collective. A step is one append to the
  aggregator's buffer; every interval the buffered steps are reduced in a few
  all-reduces, and a stop the rules decided rides in that reduction, so every rank stops
  at the same step. After a failed reduction it behaves like a local route (each rank
  writes its own values; a stop applies at once).

Both hand the training loop what is due as a value (:meth:`StepRoute.take`): the
controls decided since it last asked and whether to stop. The front door
(:class:`~mindwatch.monitor.front.Monitor`) never asks which route it has.
:class:`RoutePlan` picks one before the run folder is claimed, because the ranks of a
reduced job agree on the folder, and learn every rank's place (node, device), through
the same collective.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from mindwatch.aggregate import AggregationError, Aggregator, Collective
from mindwatch.alerts import NOTHING_DUE, Control, StepControls
from mindwatch.common.waits import wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig, ReduceKind
from mindwatch.forensics.exchange import rank_slot
from mindwatch.metrics.derived import StepRates, Values
from mindwatch.metrics.steps import LocalSteps, Logged
from mindwatch.pipeline import Pipeline
from mindwatch.run.ranks import RankPlace

__all__ = ["LocalRoute", "ReducedRoute", "RoutePlan", "StepRoute"]

log = logging.getLogger(__name__)

# Longest wait (on top of max_block_secs, the writer's own) for the rules' verdict on a
# step, with alerts.stop_on: normally tens of microseconds.
VERDICT_WAIT = 10.0
# At close, under reduction: the longest wait for rank 0's rules on the steps reduced so
# far, so that a forensics request rides the last reduction.
_CLOSE_VERDICT_WAIT = 5.0

Record = Callable[..., None]  # adds fields to run.json (the session's)


class StepRoute:
    """What every route does: hand steps on, wait for verdicts when asked, and keep
    the controls the rules decided until the training loop takes them.

    Args:
        pipeline: where records end (this process's).
        config: the monitor's config (``alerts.stop_on``, ``max_block_secs``).
        rates: this rank's rate settings (FLOPs, peak), for :meth:`set_rate`.
    """

    aggregator: Optional[Aggregator] = None

    def __init__(self, pipeline: Pipeline, config: MonitorConfig, rates: StepRates) -> None:
        self.pipeline = pipeline
        self._rates = rates
        alerts = config.alerts
        # alerts.stop_on: a step waits for the rules' verdict on it (see the subclasses).
        self.judge_each_step = bool(alerts.enabled and alerts.stop_on)
        self._verdict_wait = VERDICT_WAIT + config.max_block_secs
        self._late: Optional[threading.Event] = None
        self._queue, self._fast = pipeline.queue_for_producers()
        self._waiting = pipeline.controls_waiting  # truthy when the rules decided something
        self._controls: list[Control] = []
        self._stop_reason: Optional[str] = None
        self._warn = WarnOnce(log)

    # ------------------------------------------------------------ per step

    def log(self, logged: Logged) -> None:
        """Hand one step on (the training thread's cost of a step)."""
        raise NotImplementedError

    def skip(self, step: int) -> None:
        """``step`` was not logged (its values were refused): keep what must stay in
        step with the other ranks."""

    def eval(self, step: int, values: Values) -> None:
        """Evaluation results (rank 0's are written as they are, never reduced)."""
        self.pipeline.eval(step, values)
        if self.judge_each_step and self._judges_now():
            self.await_verdicts(step)  # alerts.stop_on: the stop is due right after
        if self._waiting:
            self._take_pipeline_controls()

    def _judges_now(self) -> bool:
        """Whether this process's rules decide a stop on their own (no reduction)."""
        return True

    # ------------------------------------------------------------ what is due

    def take(self, *, wait: bool = False, last_step: Optional[int] = None) -> StepControls:
        """The controls decided since the last call and whether to stop now, as one
        value; ``wait``: first let the rules judge every step handed on so far."""
        if wait:
            self._catch_up(last_step)
        if self._waiting:
            self._take_pipeline_controls()
        stop = self.should_stop
        reason = self._stop_reason if stop else None
        if not self._controls:
            return StepControls(stop=True, stop_reason=reason) if stop else NOTHING_DUE
        controls, self._controls = tuple(self._controls), []
        return StepControls(controls, stop, reason)

    @property
    def should_stop(self) -> bool:
        if self._waiting:
            self._take_pipeline_controls()
        return self._stopped()

    def _stopped(self) -> bool:
        """Whether training stops now, from what this route has learnt."""
        return self._stop_reason is not None

    @property
    def stop_reason(self) -> Optional[str]:
        return self._stop_reason

    def _catch_up(self, last_step: Optional[int]) -> None:
        self.await_verdicts(last_step)

    def await_verdicts(self, step: Optional[int]) -> None:
        """Wait until the rules have judged every step queued so far, but never stall
        training: after :data:`VERDICT_WAIT` (a hung sink, a stalled disk) warn once and
        go on; no later step waits until the pipeline has caught up with that one."""
        late = self._late
        if late is not None:
            if not late.is_set():
                return
            self._late = None
        done = self.pipeline.barrier()
        if not done.wait(wait_seconds(self._verdict_wait)):
            self._late = done
            self._warn(
                "late verdicts",
                "mindwatch: the anomaly rules had not judged step %s after %.0f s (a slow "
                "sink or disk); training goes on, and a stop (alerts.stop_on) may take "
                "effect some steps after the step that raises it",
                step,
                self._verdict_wait,
            )

    def _take_pipeline_controls(self) -> None:
        """Controls the rules decided (training thread): a stop takes effect now (or,
        under reduction, rides to every rank); the rest wait for the loop."""
        for control in self.pipeline.take_controls():
            if control.kind != "stop":
                self._controls.append(control)
            elif self._stop_reason is None:
                self._stop_reason = control.alert.line() if control.alert else "stop"
                self._stop_asked()

    def _stop_asked(self) -> None:
        """A stop was decided here (subclasses carry it to the other ranks)."""

    # ------------------------------------------------------------ settings, lifecycle

    def declare(self, reductions: Mapping[str, ReduceKind]) -> None:
        """How metrics combine across ranks (nothing to do in one process)."""

    def drop_from(self, step: int) -> None:
        """A resume voids what is buffered from ``step`` on (nothing is, here)."""

    def set_rate(self, name: str, value: float) -> None:
        """The steps logged from now on use this FLOPs count or peak: in order with
        them, through the pipeline that derives them."""
        if name == "flops_per_step":
            self.pipeline.set_flops_per_step(value)
        else:
            self.pipeline.set_peak_tflops(value)

    def flush(self, timeout: Optional[float]) -> bool:
        """What was handed on so far reaches the pipeline (nothing waits here)."""
        return True

    def close(self, *, communicate: bool, timeout: Optional[float]) -> None:
        """Hand on whatever is still buffered; a step logged from now on goes through
        the pipeline's checks (dropped and counted), never straight into its queue."""
        self._fast = 0

    def summary(self) -> dict[str, Any]:
        """What ``run.json`` says about this route (``aggregation`` under reduction)."""
        return {}


class LocalRoute(StepRoute):
    """One process (or a rank on its own): a step is one append to the pipeline."""

    def log(self, logged: Logged) -> None:
        queue = self._queue
        if len(queue) < self._fast:  # the common case: one append
            queue.append(logged)
        else:
            self.pipeline.logged(logged)  # wakes it, or drops
        if self.judge_each_step:
            self.await_verdicts(logged[0])  # alerts.stop_on: on this very step
        if self._waiting:
            self._take_pipeline_controls()


class ReducedRoute(StepRoute):
    """Several ranks: steps are buffered and reduced every interval (:mod:`mindwatch.
    aggregate`); a stop decided by rank 0's rules rides in the next reduction, so every
    rank stops at the same step. ``record`` adds fields to ``run.json`` (a failure)."""

    def __init__(
        self,
        pipeline: Pipeline,
        config: MonitorConfig,
        rates: StepRates,
        aggregator: Aggregator,
        record: Record,
    ) -> None:
        super().__init__(pipeline, config, rates)
        self.aggregator = aggregator
        self._record = record
        # Only the rank whose rules run (it writes the shared run) waits for verdicts.
        self._judges = self.judge_each_step and pipeline.writes_main
        self._failure_recorded = False
        aggregator.connect(pipeline)
        self._connect_forensics(pipeline, config, aggregator)

    @staticmethod
    def _connect_forensics(
        pipeline: Pipeline, config: MonitorConfig, aggregator: Aggregator
    ) -> None:
        """Every rank's flight recorder gets its own local values from the aggregator,
        and answers rank 0's forensics requests with its slot; rank 0's rules ask."""
        recorder = pipeline.recorder
        if recorder is None:
            return
        settings = config.alerts.forensics
        rank = aggregator.rank
        aggregator.observe = recorder.add_scalars
        aggregator.forensics = lambda step: rank_slot(
            recorder, step, lookback=settings.lookback, z=settings.z, rank=rank
        )
        if pipeline.alerting is not None:
            pipeline.alerting.gather_with(aggregator.request_forensics)

    def log(self, logged: Logged) -> None:
        aggregator = self.aggregator
        assert aggregator is not None
        aggregator.add(logged)
        self.skip(logged[0])

    def skip(self, step: int) -> None:
        """The reduction's part of a step, logged or not: the ranks' collectives stay
        paired. Reduce when the interval completes, and learn what it says (a stop
        agreed by every rank, a failure)."""
        aggregator = self.aggregator
        assert aggregator is not None
        judge = self._judges
        if judge and aggregator.reducing and aggregator.due(step):
            # Every stop the rules decided on the steps reduced so far rides in this
            # reduction: the same steps on every run, whatever the threads' timing.
            aggregator.sync()
            self.await_verdicts(step)
            self._take_pipeline_controls()
        aggregator.step_end(step)
        if judge and not aggregator.reducing:
            self.await_verdicts(step)  # nothing left to carry a stop: judge it now
        if aggregator.stop_agreed and self._stop_reason is None:
            self._stop_reason = "alerts.stop_on (agreed by every rank)"
        if aggregator.failure is not None and not self._failure_recorded:
            self._failure_recorded = True
            self._record(**self.summary())
        if self._waiting:
            self._take_pipeline_controls()

    def _judges_now(self) -> bool:
        assert self.aggregator is not None
        return not self.aggregator.reducing

    def _stop_asked(self) -> None:
        aggregator = self.aggregator
        assert aggregator is not None
        if aggregator.reducing:
            # Every rank stops at the reduction that carries the request; should that
            # reduction fail, this rank still stops on its own (stop_reason).
            aggregator.request_stop()

    def _stopped(self) -> bool:
        # While reducing, only the agreement counts: every rank stops at the same step.
        aggregator = self.aggregator
        assert aggregator is not None
        if aggregator.reducing:
            return aggregator.stop_agreed
        return self._stop_reason is not None

    def _catch_up(self, last_step: Optional[int]) -> None:
        assert self.aggregator is not None
        self.aggregator.sync()
        self.await_verdicts(last_step)

    def declare(self, reductions: Mapping[str, ReduceKind]) -> None:
        assert self.aggregator is not None
        for key, kind in reductions.items():
            self.aggregator.table.declare(key, kind)

    def drop_from(self, step: int) -> None:
        # Buffered steps from step on are void; what was reduced before must reach the
        # queue before the purge marker, or readers would not hide it.
        assert self.aggregator is not None
        self.aggregator.drop_from(step)

    def set_rate(self, name: str, value: float) -> None:
        # Rates are derived per rank before the reduction (the collective thread), not by the
        # pipeline: the steps prepared from now on use it (the current interval's).
        setattr(self._rates, name, value)

    def flush(self, timeout: Optional[float]) -> bool:
        assert self.aggregator is not None
        return self.aggregator.sync(timeout)

    def close(self, *, communicate: bool, timeout: Optional[float]) -> None:
        super().close(communicate=communicate, timeout=timeout)
        aggregator = self.aggregator
        assert aggregator is not None
        pipeline = self.pipeline
        if communicate and aggregator.reducing and pipeline.alerting is not None:
            # The rules' verdicts on the steps reduced so far, before the last
            # reduction: an alert among them asks for the other ranks' forensics, and
            # the last reduction is the last chance to carry the request (a short run
            # outpaces the pipeline's thread). Local work, bounded.
            wait = _CLOSE_VERDICT_WAIT if timeout is None else min(timeout, _CLOSE_VERDICT_WAIT)
            if aggregator.sync(wait):
                pipeline.sync(wait)
        aggregator.close(communicate=communicate, timeout=timeout)

    def summary(self) -> dict[str, Any]:
        assert self.aggregator is not None
        return {"aggregation": self.aggregator.summary()}


class RoutePlan:
    """The route a monitor will take, decided before its run folder exists: with a
    collective and several ranks, an aggregator, whose first collective agrees on rank
    0's run folder (:meth:`agree`) and tells every rank where the others run
    (:attr:`places`); if the ranks cannot agree, every rank goes local.

    Args:
        config: the monitor's config (``aggregate_every: 0`` turns reduction off).
        collective: the framework's collectives, or None.
        rank, world_size: this process's place in the job.
        place: where this process runs (node, device).
        reductions, loss_ranks: declarations for the aggregator.
        local: a rank's derivation, which the aggregator applies before the reduction.
    """

    def __init__(
        self,
        config: MonitorConfig,
        collective: Optional[Collective],
        *,
        rank: int,
        world_size: int,
        place: RankPlace,
        reductions: Optional[Mapping[str, ReduceKind]],
        loss_ranks: Optional[Sequence[int]],
        local: LocalSteps,
    ) -> None:
        self.config = config
        self.rank = rank
        # Every rank's place once agreed; until then (or if the ranks cannot agree, or
        # nothing is reduced) only this process's own.
        self.places: list[RankPlace] = [place]
        self._place = place
        self.aggregator: Optional[Aggregator] = None
        if collective is not None and world_size > 1 and config.aggregate_every != 0:
            self.aggregator = Aggregator.for_config(
                collective, config, declared=reductions, loss_ranks=loss_ranks, prepare=local
            )

    @property
    def reduced(self) -> bool:
        return self.aggregator is not None

    @property
    def agree(self) -> Optional[Callable[[str], Optional[str]]]:
        """How the ranks agree on a new run folder's name (None: nothing to agree)."""
        return self._agree if self.aggregator is not None else None

    def _agree(self, made: str) -> Optional[str]:
        """Rank 0's new run folder, on every rank (and every rank's place); None (and no
        reductions, no other rank's place) if the ranks cannot agree."""
        assert self.aggregator is not None
        try:
            agreed, self.places = self.aggregator.agree_on_start(made, self._place)
        except AggregationError as exc:
            log.warning(
                "mindwatch: rank %d: the ranks could not agree on the run folder (%s); "
                "nothing will be reduced across ranks, each rank writes its own values, "
                "and alerts name no other rank's node or device",
                self.rank,
                exc,
            )
            self.aggregator = None
            return None
        return agreed

    def open(self, pipeline: Pipeline, rates: StepRates, record: Record) -> StepRoute:
        """The route, now that the pipeline exists."""
        if self.aggregator is None:
            return LocalRoute(pipeline, self.config, rates)
        return ReducedRoute(pipeline, self.config, rates, self.aggregator, record)
