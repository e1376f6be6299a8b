"""``Monitor``: the framework-free front door, for custom training loops.

    with mindwatch.Monitor("runs/exp1") as mon:
        for step, batch in enumerate(data, start=1):
            loss, grad_norm = train_step(batch)
            mon.log_step(step, loss=loss, lr=lr, grad_norm=grad_norm, samples=len(batch))

``log_step`` runs on the training thread, so it only checks the values, reads the
clock and appends one tuple to a queue (2-3 us for ten values, warm). Everything else
happens on the pipeline's thread (:mod:`mindwatch.pipeline`): derived values, the
TensorBoard files, the console, the rules and their alerts. What the rules decide comes
back as values: :attr:`should_stop` and :meth:`take_controls`. The MindSpore callback
(:mod:`mindwatch.mindspore`) drives the same calls from ``Model.train``.

Under data parallelism (several ranks), give every rank a Monitor with the framework's
collective (``collective=mindwatch.mindspore.MindSporeCollective()``): rank 0 then
writes one global run with every metric reduced across ranks as it declares
(:mod:`mindwatch.aggregate`), the other ranks write nothing there, and with
``per_rank: true`` each rank also writes ``<run>/rank_<r>/``. Without a collective,
rank 0 writes its own values and rank ``r`` writes its own to ``<run>/rank_<r>/``.

With ``alerts.stop_on`` (and no reduction), ``log_step`` waits until the rules have
judged its step (one hand-over to the pipeline's thread, about 50 us on a 2-core CPU),
so a stop takes effect at the step that raised it, as the seeds ask. Under reduction
the request rides in the next reduction instead and every rank stops at that step.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from mindwatch.aggregate import AggregationError, Aggregator, Collective
from mindwatch.alerts import Alert, Control
from mindwatch.common.waits import wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig, ReduceKind
from mindwatch.events.summaries import (
    hparams_session_end_values,
    hparams_session_values,
    import_histogram_support,
    import_text_support,
)
from mindwatch.events.writer import (
    EventFileWriter,
    LogDirError,
    PathLike,
    WriterStats,
    absolute_logdir,
)
from mindwatch.metrics.derived import StepRates, perplexity
from mindwatch.metrics.hparams import HParamValue, flatten_hparams
from mindwatch.metrics.steps import LocalSteps
from mindwatch.metrics.tags import eval_tag
from mindwatch.metrics.timing import Every, StepClock
from mindwatch.metrics.values import INT64, NonFiniteCounter, number, step_number
from mindwatch.pipeline import pipeline as pl
from mindwatch.pipeline.outputs import config_markdown, open_outputs
from mindwatch.run import lifecycle
from mindwatch.run.claim import claim_run_dir, link_runs
from mindwatch.run.layout import new_run_dir
from mindwatch.run.ranks import env_rank_and_world
from mindwatch.sinks import Sink
from mindwatch.sinks.items import (
    Histogram,
    RunStatus,
    Scalars,
    SessionStart,
    SummaryValues,
    Text,
    TotalSteps,
)

__all__ = ["Monitor"]

log = logging.getLogger(__name__)

# Longest wait (on top of max_block_secs, the writer's own) for the rules' verdict on a
# step, with alerts.stop_on: normally tens of microseconds.
_VERDICT_WAIT = 10.0

_FLOAT = frozenset({float})
# Below every step (steps are int64): the first step logged is never "out of order".
_BEFORE_ANY_STEP = -(1 << 64)


def _total_steps(value: Any) -> int:
    """``total_steps`` as the positive int64 the config would accept, or a ValueError
    naming it (a progress bar over ``10**400`` steps fails later, far from the cause)."""
    steps = step_number(value, "total_steps")
    if steps < 1:
        raise ValueError(f"mindwatch: total_steps must be >= 1, got {steps}")
    return steps


class Monitor:
    """Log a training run as TensorBoard events plus ``run.json``.

    Args:
        logdir: run folder (or set ``logdir`` in the config). Created if missing and
            made absolute now; an unwritable folder raises
            :class:`~mindwatch.events.LogDirError` here, before training starts.
        config: a :class:`MonitorConfig`, a dict of its fields, or a YAML file path
            (mindwatch's own keys, or a MindFormers training YAML).
        total_steps: overrides ``config.total_steps`` (progress bar and ETA).
        world_size, rank: this process's place in a data-parallel job; by default the
            collective's, else ``RANK_ID`` / ``RANK_SIZE`` (``msrun`` sets them), else a
            single process.
        run_info: extra fields for ``run.json`` (e.g. the framework's settings).
        resume_step: this attempt resumes training at this step (the first step it will
            log) in a folder an earlier attempt wrote: see :meth:`mark_resume`.
        resume: whether this process continues the run already in ``logdir``. By default
            only with ``resume_step``: a folder holding a run another process wrote is
            otherwise left as it is, and this run writes to ``<logdir>-2`` next to it
            (logged; both ``run.json`` files record it), so two runs never mix in one
            folder (:mod:`mindwatch.run.claim`). ``True`` continues it without a purge
            marker (the steps go on after the earlier ones).
        collective: the framework's all-gather (see :class:`mindwatch.aggregate.Collective`)
            for reducing metrics across ranks; every rank must then create its Monitor
            and log the same steps.
        reductions: ``{name or tag: kind}`` declarations that win over the config's.
        loss_ranks: the ranks ``train/loss`` comes from (pipeline parallelism: the last
            stage's); the config's ``loss_source_rank`` wins.
    """

    def __init__(
        self,
        logdir: Optional[PathLike] = None,
        config: Union[MonitorConfig, Mapping[str, Any], str, Path, None] = None,
        *,
        total_steps: Optional[int] = None,
        world_size: Optional[int] = None,
        rank: Optional[int] = None,
        run_info: Optional[Mapping[str, Any]] = None,
        resume_step: Optional[int] = None,
        resume: Optional[bool] = None,
        collective: Optional[Collective] = None,
        reductions: Optional[Mapping[str, ReduceKind]] = None,
        loss_ranks: Optional[Sequence[int]] = None,
    ) -> None:
        self.config = cfg = MonitorConfig.from_any(config)
        if total_steps is not None:  # checked before anything is made on disk
            total_steps = _total_steps(total_steps)
        target = logdir if logdir is not None else cfg.logdir
        if target is None:
            raise ValueError(
                "mindwatch.Monitor needs a log folder: pass logdir='runs/my_run' "
                "or set 'logdir' in the config"
            )
        env_rank, env_world = env_rank_and_world()
        if collective is not None:
            env_rank, env_world = int(collective.rank), int(collective.world_size)
        self.rank = env_rank if rank is None else int(rank)
        self.world_size = env_world if world_size is None else int(world_size)
        # A rank's own values, derived (rates, perplexity) and counted where they are
        # processed: on the pipeline's thread, or by the aggregator before reducing.
        self._rates = StepRates(
            tokens_per_sample=cfg.tokens_per_sample,
            flops_per_sample=cfg.flops_per_sample,
            peak_tflops=cfg.peak_tflops,
        )
        self._counter = NonFiniteCounter()
        self._local = LocalSteps(self._rates, self._counter, perplexity=cfg.perplexity)
        self._aggregator: Optional[Aggregator] = None
        self._own_run_folder = False  # rank r > 0 writes a run folder of its own
        if collective is not None and self.world_size > 1 and cfg.aggregate_every != 0:
            self._aggregator = Aggregator.for_config(
                collective, cfg, declared=reductions, loss_ranks=loss_ranks, prepare=self._local
            )
        agree = self._agree_on_run_dir if self._aggregator is not None else None
        previous: Optional[Path] = None
        folder = absolute_logdir(target)
        if cfg.run_name:
            named = {key: cfg.hparams[key] for key in cfg.name_hparams}
            self.logdir, self._own_run_folder = new_run_dir(
                folder, cfg.run_name, named, rank=self.rank, world_size=self.world_size, agree=agree
            )
        else:
            try:
                claim = claim_run_dir(
                    folder,
                    resume=resume if resume is not None else resume_step is not None,
                    rank=self.rank,
                    world_size=self.world_size,
                    agree=agree,
                )
            except OSError as exc:
                raise LogDirError(
                    f"log folder '{folder}' holds an earlier run and no new folder could be "
                    f"made next to it ({exc}). Pass another logdir, or resume_step=N to "
                    "continue that run."
                ) from exc
            self.logdir, self._own_run_folder, previous = (
                claim.folder,
                claim.own_run_folder,
                claim.previous,
            )
            if previous is not None:
                run_info = {**(run_info or {}), "previous_run": str(previous)}
        # Under reduction perplexity is exp of the reduced loss, added by the pipeline to
        # each reduced step (and to this rank's own, from its loss): not a rank's own
        # value to reduce.
        self._local.perplexity = cfg.perplexity and self._aggregator is None
        self.total_steps = total_steps if total_steps is not None else cfg.total_steps
        outputs = open_outputs(
            cfg,
            self.logdir,
            rank=self.rank,
            world_size=self.world_size,
            reduced=self._aggregator is not None,
            own_run_folder=self._own_run_folder,
            total_steps=self.total_steps,
            run_info=run_info,
            local=self._local,
        )
        self._pipeline = outputs.pipeline
        self._queue, self._queue_fast = self._pipeline.queue_for_producers()
        self._pipeline_controls = self._pipeline.controls
        self._run = outputs.run
        self._outputs = outputs
        if previous is not None and self._run is not None and self.rank == 0:
            link_runs(previous, self.logdir)
        if self._aggregator is not None:
            self._aggregator.connect(self._pipeline)
        self._clock = StepClock()
        self._every = cfg.collect_freq
        self._collect = Every(cfg.collect_freq)
        self.last_step: Optional[int] = None
        self.steps_logged = 0
        # The highest step logged so far, and the steps logged at or below it (a curve
        # folding back in TensorBoard): warned about once, counted in run.json.
        self._highest_step = _BEFORE_ANY_STEP
        self._steps_out_of_order = 0
        self._closed = False
        self._hparams: dict[str, HParamValue] = {}
        self._hparams_written = False
        self._start_time = time.time()
        # Controls: a stop (should_stop) and the ones the training loop applies.
        self._stop_reason: Optional[str] = None
        self._controls: list[Control] = []
        self._failure_recorded = False
        self._steps_per_epoch: Optional[int] = None
        alerts = cfg.alerts
        self._judge_each_step = bool(alerts.enabled and alerts.stop_on)
        self._verdict_wait = _VERDICT_WAIT + cfg.max_block_secs
        self._late_verdicts: Optional[threading.Event] = None
        self._warn = WarnOnce(log)
        if resume_step is not None:
            self.mark_resume(resume_step)
        if cfg.hparams:
            self.log_hparams(cfg.hparams)
        if self._run is not None and self.writes_shared:
            import_text_support()  # here, not on a background thread at exit
            text = config_markdown(self._run.data["config"])
            self._pipeline.submit((pl.ITEM, pl.MAIN, Text("mindwatch/config", text, 0)))
        lifecycle.register(self)

    def _agree_on_run_dir(self, made: str) -> Optional[str]:
        """Rank 0's new run folder, on every rank; None (and no reductions) if the
        ranks cannot agree."""
        assert self._aggregator is not None
        try:
            return self._aggregator.agree_on_text(made)
        except AggregationError as exc:
            log.warning(
                "mindwatch: rank %d: the ranks could not agree on the run folder (%s); "
                "nothing will be reduced across ranks, each rank writes its own values",
                self.rank,
                exc,
            )
            self._aggregator = None
            return None

    # ------------------------------------------------------------------ logging

    def log_step(
        self,
        step: int,
        *,
        loss: Any = None,
        lr: Any = None,
        grad_norm: Any = None,
        samples: Any = None,
        tokens: Any = None,
        reduce: Optional[Mapping[str, ReduceKind]] = None,
        **scalars: Any,
    ) -> None:
        """Log one training step.

        Args:
            step: the global step (an int; it may advance by more than one between calls,
                as in sink mode; the interval's time is then shared by those steps).
            loss, lr, grad_norm: written as ``train/loss``, ``train/lr``, ``train/grad_norm``.
            samples, tokens: samples / tokens processed *per step* (e.g. the batch size);
                with the wall time since the previous call they give
                ``perf/samples_per_s`` and ``perf/tokens_per_s``. ``perf/step_time_ms``
                is always written (except on a call where no time passed).
            reduce: how some of these values combine across ranks, e.g.
                ``{"accuracy": "mean", "memory_mb": "per_rank"}`` (see :meth:`declare`).
            **scalars: more values; ``name`` becomes ``train/name``, a name containing
                ``/`` is used as the tag unchanged. A value under a tag mindwatch derives
                (``perf/step_time_ms``, ``perf/samples_per_s``, ``train/perplexity``, ...)
                is written instead of the derived one, which from then on is no longer
                derived: one point per tag per step.

        Under reduction across ranks the step's values are buffered and written, reduced,
        when the interval completes (``aggregate_every``); every rank must log the same
        steps.

        Non-finite values are written as they are (TensorBoard plots NaN/Inf) and
        counted in :attr:`nonfinite`. A value that is not a number raises TypeError
        naming its key.
        """
        if type(step) is not int or not -INT64 <= step < INT64:
            step = step_number(step)
        if self._every > 1 and not self._collect(step):
            self._clock.skip(step)  # collect_freq: the next recorded step's timing covers it
            return
        if reduce:
            self.declare(reduce)
        aggregator = self._aggregator
        try:
            # Checked here, so a bad value raises in the caller's frame; arranged under
            # their tags on the pipeline's thread (mindwatch.metrics.steps).
            if loss is not None and type(loss) is not float:
                loss = number("loss", loss)
            if lr is not None and type(lr) is not float:
                lr = number("lr", lr)
            if grad_norm is not None and type(grad_norm) is not float:
                grad_norm = number("grad_norm", grad_norm)
            if scalars:
                values = tuple(scalars.values())
                if not _FLOAT.issuperset(map(type, values)):
                    values = tuple([number(key, value) for key, value in scalars.items()])
                names = tuple(scalars)
            else:
                names = values = ()
            if samples is not None and type(samples) is not float:
                samples = number("samples", samples)
            if tokens is not None and type(tokens) is not float:
                tokens = number("tokens", tokens)
            logged = (
                step,
                time.time(),
                loss,
                lr,
                grad_norm,
                names,
                values,
                samples,
                tokens,
                self._clock.tick(step),
            )
            if not self._hparams_written:
                self._write_hparams()
            if aggregator is not None:
                aggregator.add(logged)
            else:
                queue = self._queue
                if len(queue) < self._queue_fast:  # the common case: one append
                    queue.append(logged)
                else:
                    self._pipeline.submit(logged)  # wakes it, or drops
                if self._judge_each_step:
                    self._await_verdicts(step)  # alerts.stop_on: on this very step
            self.last_step = step
            self.steps_logged += 1
            if step > self._highest_step:  # the hot path's only cost: one comparison
                self._highest_step = step
            else:
                self._step_out_of_order(step)
        finally:
            if aggregator is not None:  # whatever happened, the ranks' collectives stay paired
                self._reduce(aggregator, step)
            if self._pipeline_controls:
                self._take_pipeline_controls()

    def _step_out_of_order(self, step: int) -> None:
        """``step`` is at or below a step logged before: written as given (nothing is
        dropped), warned about once, counted (``steps_out_of_order`` in run.json)."""
        self._steps_out_of_order += 1
        highest = self._highest_step
        if step == highest:
            what = (
                f"log_step({step}) again: step {step} was logged already, so TensorBoard "
                "shows two points at that step in each of its curves"
            )
        else:
            what = (
                f"log_step({step}) after step {highest}: the steps go back, so "
                f"TensorBoard draws each curve folding back over steps {step}-{highest}"
            )
        self._warn(
            "step order",
            "mindwatch: %s; the points are written as given. If training restarted from a "
            "checkpoint, pass resume_step=%d to Monitor (or call mark_resume(%d)): the "
            "earlier points from that step on are then hidden. Otherwise log each step "
            "once, with increasing steps (log_eval for evaluation results at a step). "
            "Further ones are counted, not shown (steps_out_of_order in run.json)",
            what,
            step,
            step,
        )

    def _reduce(self, aggregator: Aggregator, step: int) -> None:
        """The reduction's part of a step: reduce when the interval completes, and learn
        what it says (a stop agreed by all ranks, a failure)."""
        judge = self._judge_each_step and self.writes_shared
        if judge and aggregator.reducing and aggregator.due(step):
            # Every stop the rules decided on the steps reduced so far rides in this
            # reduction: the same steps on every run, whatever the threads' timing.
            aggregator.sync()
            self._await_verdicts(step)
            self._take_pipeline_controls()
        aggregator.step_end(step)
        if judge and not aggregator.reducing:
            self._await_verdicts(step)  # nothing left to carry a stop: judge it now
        if aggregator.stop_agreed and self._stop_reason is None:
            self._stop_reason = "alerts.stop_on (agreed by every rank)"
        if aggregator.failure is not None and not self._failure_recorded:
            self._failure_recorded = True
            self.record(**self._aggregation_summary())

    def _await_verdicts(self, step: Optional[int]) -> None:
        """Wait until the rules have judged every step queued so far, but never stall
        training: after :data:`_VERDICT_WAIT` (a hung sink, a stalled disk) warn once and
        go on; no later step waits until the pipeline has caught up with that one."""
        late = self._late_verdicts
        if late is not None:
            if not late.is_set():
                return
            self._late_verdicts = None
        done = self._pipeline.barrier()
        if not done.wait(wait_seconds(self._verdict_wait)):
            self._late_verdicts = done
            self._warn(
                "late verdicts",
                "mindwatch: the anomaly rules had not judged step %s after %.0f s (a slow "
                "sink or disk); training goes on, and a stop (alerts.stop_on) may take "
                "effect some steps after the step that raises it",
                step,
                self._verdict_wait,
            )

    def _take_pipeline_controls(self) -> None:
        """Controls the rules decided (training thread): a stop goes to every rank
        through the reduction, or takes effect now; the rest wait for the loop."""
        aggregator = self._aggregator
        for control in self._pipeline.take_controls():
            if control.kind != "stop":
                self._controls.append(control)
                continue
            if self._stop_reason is None:
                self._stop_reason = control.alert.line() if control.alert else "stop"
            if aggregator is not None and aggregator.reducing:
                # Every rank stops at the reduction that carries the request; should
                # that reduction fail, this rank still stops on its own (stop_reason).
                aggregator.request_stop()

    def take_controls(self, *, wait: bool = False) -> list[Control]:
        """What the training loop should do now, besides stopping (see
        :attr:`should_stop`): each :class:`~mindwatch.alerts.Control` once.

        A ``keep_last_stable`` control carries its alert, which is written when the loop
        passes it back to :meth:`report` (having kept the checkpoint, it can say which).
        ``wait``: first let the rules judge every step logged (or reduced) so far.
        """
        if wait:
            if self._aggregator is not None:
                self._aggregator.sync()
            self._await_verdicts(self.last_step)
        if self._pipeline.controls:
            self._take_pipeline_controls()
        taken, self._controls = self._controls, []
        return taken

    def add_sink(self, sink: Sink) -> None:
        """Send this run's records to ``sink`` too, from the next record on (see
        :class:`~mindwatch.sinks.Sink`; it runs on the pipeline's thread, and a sink that
        raises is a warning, once, never a stop)."""
        self._pipeline.submit((pl.SINK, pl.MAIN, sink))

    def keep_checkpoints(self, keeping: bool = True) -> None:
        """Tell the rules that the training loop can keep a "last stable" checkpoint
        (``keep_last_stable`` controls, ``alerts.last_stable_on``)."""
        self._pipeline.submit((pl.SETTING, "keeps_checkpoints", keeping))

    def log_sample_ids(self, step: int, ids: Sequence[Any]) -> None:
        """The sample ids of ``step``'s batch: an alert at that step names them."""
        self._pipeline.submit((pl.IDS, step_number(step), list(ids)))

    @property
    def steps_per_epoch(self) -> Optional[int]:
        """Steps per epoch, so an alert can name its step's batch in the epoch."""
        return self._steps_per_epoch

    @steps_per_epoch.setter
    def steps_per_epoch(self, steps: Optional[int]) -> None:
        self._steps_per_epoch = steps
        self._pipeline.submit((pl.SETTING, "steps_per_epoch", steps))

    def continue_at(self, step: Optional[int]) -> None:
        """This monitor continues a run whose last step was ``step`` (results logged
        without a step of their own, such as a later evaluation, belong there)."""
        self.last_step = step
        self._highest_step = _BEFORE_ANY_STEP if step is None else step

    def declare(self, reductions: Mapping[str, ReduceKind]) -> None:
        """Declare how your own metrics combine across ranks: ``{"accuracy": "mean"}``.

        Kinds: ``mean`` (weighted by tokens or samples when given), ``sum``, ``max``,
        ``min``, ``once`` (already global) and ``per_rank``; see
        :mod:`mindwatch.aggregate.reductions`. Declare before the metric's first step:
        every rank must declare the same. Ignored in a single process.
        """
        if self._aggregator is not None:
            for key, kind in reductions.items():
                self._aggregator.table.declare(key, kind)

    def log_eval(self, step: int, **metrics: Any) -> None:
        """Log evaluation results at ``step`` as ``eval/<name>`` (e.g. ``loss=0.3, acc=0.9``).

        Under data parallelism every rank usually evaluates the same data, so rank 0's
        results are written as they are (not reduced).
        """
        step = step_number(step)
        values = [(eval_tag(key), number(key, value)) for key, value in metrics.items()]
        if self.config.perplexity and "loss" in metrics:
            values.append(("eval/perplexity", perplexity(number("loss", metrics["loss"]))))
        self._pipeline.submit((pl.EVAL, step, values))
        aggregator = self._aggregator
        if self._judge_each_step and (aggregator is None or not aggregator.reducing):
            self._await_verdicts(step)  # alerts.stop_on: should_stop answers right after
        if self._pipeline_controls:
            self._take_pipeline_controls()

    def log_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
        """Log scalars under exactly the given tags (no namespace added), unreduced.

        For values that are the same on every rank (model state: parameter norms);
        under reduction only rank 0's are written. Use :meth:`log_step` for values that
        differ between ranks.
        """
        values = [(tag, number(tag, v)) for tag, v in scalars.items()]
        self._pipeline.submit((pl.ITEM, pl.MAIN, Scalars(step_number(step), values)))

    def log_histogram(self, tag: str, values: Any, step: int) -> None:
        """Log a histogram (bucketed in the background; the array is copied now).

        Like :meth:`log_scalars`, unreduced: under reduction only rank 0's is written.
        """
        if self.writes_shared:
            import_histogram_support()
            data = np.array(values, copy=True)
            self._pipeline.submit((pl.ITEM, pl.MAIN, Histogram(tag, data, step_number(step))))

    def log_text(self, tag: str, text: str, step: int = 0) -> None:
        """Log markdown text (TensorBoard's TEXT tab); under reduction, rank 0's only."""
        import_text_support()
        self._pipeline.submit((pl.ITEM, pl.MAIN, Text(tag, text, step_number(step))))

    def mark_resume(self, step: int) -> None:
        """This attempt continues the run at ``step``; earlier points at ``>= step`` are void.

        Writes TensorBoard's purge marker (``SessionLog.START`` at ``step``): readers
        then hide what a crashed attempt logged at ``step`` and beyond, so the curve
        neither folds back nor shows two values for a step. ``run.json`` records the
        step in this attempt's entry.
        """
        step = step_number(step)
        if self._aggregator is not None:
            # Buffered steps from step on are void; what was reduced before must reach
            # the queue before the marker, or readers would not hide it.
            self._aggregator.drop_from(step)
        self._pipeline.submit((pl.ITEM, pl.BOTH, SessionStart(step)))
        self._highest_step = step - 1  # the marker hides what came before from step on
        self.record(resumed_at=step)

    def log_hparams(self, hparams: Optional[Mapping[str, Any]] = None, **more: Any) -> None:
        """Record the run's hyperparameters for TensorBoard's HPARAMS dashboard.

        Nested mappings are flattened (``optimizer.lr``). Values collected before the
        first step are written together when it is logged (TensorBoard keeps one set
        per run); later ones still go to ``run.json``, with a warning.
        """
        flat = flatten_hparams({**(hparams or {}), **more})
        self._hparams.update(flat)
        if self._run is None:
            return
        self._run.update(hparams=dict(self._hparams))
        if self._hparams_written:
            log.warning(
                "mindwatch: hparams %s arrived after the first step; they are in run.json, "
                "but TensorBoard's HPARAMS dashboard keeps the set written first",
                sorted(flat),
            )
            self._run.write()

    def _write_hparams(self) -> None:
        self._hparams_written = True
        if self._hparams and self.writes_shared and self._run is not None:
            values = hparams_session_values(self._hparams, start_time_secs=self._start_time)
            self._pipeline.submit((pl.ITEM, pl.MAIN, SummaryValues(0, values)))
            self._run.write()

    @property
    def hparams(self) -> dict[str, HParamValue]:
        return dict(self._hparams)

    def set_total_steps(self, total_steps: Optional[int]) -> None:
        """Tell the progress display how many steps the run takes (for the bar and ETA)."""
        if total_steps is not None:
            total_steps = _total_steps(total_steps)
        self.total_steps = total_steps
        self._pipeline.submit((pl.ITEM, pl.MAIN, TotalSteps(total_steps)))

    def set_model_flops(self, flops_per_step: float, *, source: str) -> None:
        """The model FLOPs of one training step on this device (forward and backward),
        e.g. counted by the framework's compiler; ``flops_per_sample`` in the config wins.
        From the next step on, ``perf/tflops_per_device`` (and ``perf/mfu`` with a
        peak) are written; ``run.json`` records the count and its source."""
        if self._rates.flops_per_sample is not None:
            return
        flops = number("flops_per_step", flops_per_step)
        self._set_rate("flops_per_step", flops)
        info = {**self._flops_info(), "per_step": flops, "source": source}
        self.record(flops=info)

    def set_peak_tflops(self, peak_tflops: float, *, source: str) -> None:
        """The device's peak TFLOPS for ``perf/mfu``; ``peak_tflops`` in the config wins."""
        if self.config.peak_tflops is not None:
            return
        peak = number("peak_tflops", peak_tflops)
        self._set_rate("peak_tflops", peak)
        info = {**self._flops_info(), "peak_tflops": peak, "peak_source": source}
        self.record(flops=info)

    def _set_rate(self, name: str, value: float) -> None:
        """Steps logged from now on use ``value``: in order with them through the
        pipeline, or, under reduction, for the steps of the current interval on."""
        if self._aggregator is None:
            self._pipeline.submit((pl.SETTING, name, value))
        else:
            setattr(self._rates, name, value)

    def _flops_info(self) -> dict[str, Any]:
        info = self._run.data.get("flops") if self._run is not None else None
        return dict(info) if isinstance(info, Mapping) else {}

    def restart_clock(self) -> None:
        """Do not count the time since the last step as training (e.g. after evaluation).

        The next step's interval is measured from now; its step count still runs from
        the last step logged, so a sink of several steps keeps its honest per-step time.
        """
        self._clock.restart()

    def rebase_clock(self, step: int) -> None:
        """Count the next interval's steps from ``step`` (the step before the next one).

        For callers that learn the first step number only at the first step, such as a
        resumed ``Model.train(initial_epoch=E)``.
        """
        self._clock.rebase(step)

    # ------------------------------------------------------------------ alerts, run.json

    def report(self, alert: Alert) -> None:
        """Write an alert raised outside the rules (an action taken: a changed lr), or
        one a ``keep_last_stable`` control handed to the training loop."""
        self._pipeline.submit((pl.ALERT, alert))

    def record(self, **fields: Any) -> None:
        """Add ``fields`` to ``run.json`` now (on the rank that writes it)."""
        if self._run is not None:
            self._run.update(**fields)
            self._run.write()

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
            self._await_verdicts(self.last_step)

    @property
    def should_stop(self) -> bool:
        """Whether training should stop now (an alert of a rule in ``alerts.stop_on``).

        Under reduction across ranks this turns true on every rank in the same step (the
        request travels with the next reduction), so all ranks stop together.
        """
        if self._pipeline.controls:
            self._take_pipeline_controls()
        aggregator = self._aggregator
        if aggregator is not None and aggregator.reducing:
            return aggregator.stop_agreed
        return self._stop_reason is not None

    @property
    def stop_reason(self) -> Optional[str]:
        return self._stop_reason

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def writer(self) -> EventFileWriter:
        """The writer of the run this process writes: the global one on rank 0."""
        writers = self._outputs.writers()
        if not writers:
            raise RuntimeError(
                f"rank {self.rank} writes no event files (its values are reduced into rank "
                "0's run; set per_rank: true for a folder of its own)"
            )
        return writers[0]

    @property
    def rank_logdir(self) -> Optional[Path]:
        """``<run>/rank_<r>/`` when this rank writes its own folder, else None."""
        writers = self._outputs.writers()[1 if self._outputs.global_tb is not None else 0 :]
        return writers[0].logdir if writers else None

    @property
    def writes_shared(self) -> bool:
        """Whether this rank writes the values that are the same on every rank (model
        state, histograms, eval): rank 0, or a rank nobody reduces with. Others can
        skip computing them."""
        return bool(self._pipeline.main)

    @property
    def aggregator(self) -> Optional[Aggregator]:
        """The cross-rank reducer, when this monitor reduces (several ranks, a collective)."""
        return self._aggregator

    @property
    def stats(self) -> WriterStats:
        """Counters of this process's writers, summed (and points the pipeline dropped)."""
        return self._outputs.stats()

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Block until everything logged so far is handed to the OS.

        Under reduction that means what was reduced so far; steps still buffered for the
        current interval are written when it completes (or at :meth:`close`).
        """
        ok = True
        if self._aggregator is not None:
            ok = self._aggregator.sync(timeout)
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
        # ``timeout`` bounds the whole close (exit and SIGTERM pass one: a hung disk must
        # not keep a finished job alive), shared by its stages.
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> Optional[float]:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        if self._closed:
            # Closing already (e.g. SIGTERM during the program's own close()): wait for
            # the files like the first caller does, then leave run.json to it.
            self._pipeline.close(timeout)
            return
        self._closed = True
        self._queue_fast = 0  # a step logged from now on goes through submit: counted
        lifecycle.unregister(self)
        if self._aggregator is not None:
            self._aggregator.close(communicate=communicate, timeout=left())
        if not self._hparams_written:
            self._write_hparams()
        if self._hparams and self.writes_shared:
            ok = not lifecycle.signal_received and error is None
            end = hparams_session_end_values(ok, time.time())
            self._pipeline.submit((pl.ITEM, pl.MAIN, SummaryValues(self.last_step or 0, end)))
        # Alerts still waiting for the training loop to keep a checkpoint are written
        # as they are: nobody will keep one now.
        self._pipeline.sync(left())
        for control in self.take_controls():
            if control.alert is not None:
                self.report(control.alert)
        status = self._end_status(error)
        self._pipeline.submit((pl.ITEM, pl.BOTH, RunStatus(status)))  # the exporter's
        self._pipeline.close(left())
        alerting = self._pipeline.alerting
        if alerting is not None:
            alerting.close(left())
        self._finish_run(status, error)

    @staticmethod
    def _end_status(error: object) -> str:
        """``failed`` (an error), ``terminated`` (SIGTERM closed it) or ``finished``."""
        if error is not None:
            return "failed"
        return "terminated" if lifecycle.signal_received else "finished"

    def _finish_run(self, status: str, error: object) -> None:
        """``run.json``: how the run ended, and what it holds."""
        nonfinite = self.nonfinite
        self._outputs.finish_run(
            status,
            error=error,
            last_step=self.last_step,
            steps_logged=self.steps_logged,
            steps_out_of_order=self._steps_out_of_order,
            nonfinite=nonfinite,
            **self._aggregation_summary(),
        )
        if nonfinite:
            log.warning(
                "mindwatch: non-finite values were logged: %s",
                ", ".join(f"{tag} x{n}" for tag, n in sorted(nonfinite.items())),
            )

    def _aggregation_summary(self) -> dict[str, Any]:
        aggregator = self._aggregator
        return {} if aggregator is None else {"aggregation": aggregator.summary()}

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        # Unwinding from an exception: the other ranks may not be closing too, so the
        # last buffered steps are written unreduced rather than waiting for them.
        if exc is not None:
            self.abort(exc)
        else:
            self.close()

    def __repr__(self) -> str:
        return f"Monitor(logdir={str(self.logdir)!r}, last_step={self.last_step})"
