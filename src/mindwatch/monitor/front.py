"""``Monitor``: the framework-free front door, for custom training loops.

    with mindwatch.Monitor("runs/exp1") as mon:
        for step, batch in enumerate(data, start=1):
            loss, grad_norm = train_step(batch)
            mon.log_step(step, loss=loss, lr=lr, grad_norm=grad_norm, samples=len(batch))

``log_step`` runs on the training thread, so it only checks the values, reads the
clock and appends one tuple to a queue (2-3 us for ten values, warm). Everything else
happens on the pipeline's thread (:mod:`mindwatch.pipeline`): derived values, the
TensorBoard files, the console, the rules and their alerts. What the rules decide comes
back as a value: :meth:`end_step` (or :attr:`should_stop` and :meth:`take_controls`).
The MindSpore callback (:mod:`mindwatch.mindspore`) drives the same calls from
``Model.train``.

The front door only checks and delegates: the run (folder, ``run.json``, hparams, how
it ended) is a :class:`~mindwatch.monitor.session.RunSession`, and each step travels on
a :class:`~mindwatch.monitor.route.StepRoute`, local or reduced across ranks.

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
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from mindwatch.aggregate import Collective
from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig, ReduceKind
from mindwatch.events.summaries import import_histogram_support, import_text_support
from mindwatch.events.writer import PathLike
from mindwatch.hardware.telemetry import HardwareTelemetry
from mindwatch.metrics.hparams import HParamValue, flatten_hparams
from mindwatch.metrics.tags import eval_tag
from mindwatch.metrics.timing import Every, StepClock
from mindwatch.metrics.values import INT64, number, step_number
from mindwatch.monitor.controls import RunControls
from mindwatch.monitor.session import open_run, place_in_job
from mindwatch.pipeline import BOTH
from mindwatch.run import lifecycle
from mindwatch.run.ranks import this_place
from mindwatch.sinks.items import (
    Histogram,
    Scalars,
    SessionStart,
    SummaryValues,
    Text,
    TotalSteps,
)

__all__ = ["Monitor"]

log = logging.getLogger(__name__)

_FLOAT = frozenset({float})
_EXACT = 1 << 53  # ints below this are exact floats: no warning, no overflow possible
# Below every step (steps are int64): the first step logged is never "out of order".
_BEFORE_ANY_STEP = -(1 << 64)


def _total_steps(value: Any) -> int:
    """``total_steps`` as the positive int64 the config would accept, or a ValueError
    naming it (a progress bar over ``10**400`` steps fails later, far from the cause)."""
    steps = step_number(value, "total_steps")
    if steps < 1:
        raise ValueError(f"mindwatch: total_steps must be >= 1, got {steps}")
    return steps


def _out_of_order(step: int, highest: int) -> str:
    """The warning for a step logged at or below the highest one so far."""
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
    return (
        f"{what}; the points are written as given. If training restarted from a "
        f"checkpoint, pass resume_step={step} to Monitor (or call mark_resume({step})): the "
        "earlier points from that step on are then hidden. Otherwise log each step "
        "once, with increasing steps (log_eval for evaluation results at a step). "
        "Further ones are counted, not shown (steps_out_of_order in run.json)"
    )


class Monitor(RunControls):
    """Log a training run as TensorBoard events plus ``run.json``.

    The methods that record values are here; those that answer the training loop
    (controls, alerts) and end the run are :class:`~mindwatch.monitor.controls.RunControls`'.

    Args:
        logdir: run folder (or set ``logdir`` in the config). Created if missing and
            made absolute now; an unwritable folder raises
            :class:`~mindwatch.events.LogDirError` here, before training starts.
        config: a :class:`MonitorConfig`, a dict of its fields, or a YAML file path
            (mindwatch's own keys, or a MindFormers training YAML).
        total_steps: overrides ``config.total_steps`` (progress bar and ETA).
        world_size: this process's place in a data-parallel job; by default the
            collective's, else ``RANK_ID`` / ``RANK_SIZE`` (``msrun`` sets them), else a
            single process.
        rank: see ``world_size``.
        run_info: extra fields for ``run.json`` (e.g. the framework's settings).
        resume_step: this attempt resumes training at this step (the first step it will
            log) in a folder an earlier attempt wrote: see :meth:`mark_resume`.
        resume: whether this process continues the run already in ``logdir``. By default
            only with ``resume_step``: a folder holding a run another process wrote is
            otherwise left as it is, and this run writes to ``<logdir>-2`` next to it
            (logged; both ``run.json`` files record it), so two runs never mix in one
            folder (:mod:`mindwatch.run.claim`). ``True`` continues it without a purge
            marker (the steps go on after the earlier ones).
        collective: the framework's collectives (see :class:`mindwatch.aggregate.Collective`)
            for reducing metrics across ranks; every rank must then create its Monitor
            and log the same steps.
        reductions: ``{name or tag: kind}`` declarations that win over the config's.
        loss_ranks: the ranks ``train/loss`` comes from (pipeline parallelism: the last
            stage's); the config's ``loss_source_rank`` wins.
        device: the device this rank trains on, for ``run.json`` (``ranks``)
            and alerts ("rank 1 (node-2, NPU 5)"): its kind as the framework names it
            (``Ascend``, ``GPU``, ``CPU``; the MindSpore callback passes
            ``device_target``) and its logical id (by default ``DEVICE_ID``, which
            msrun exports). The node is this host's name.
        device_id: see ``device``.
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
        device: Optional[str] = None,
        device_id: Optional[int] = None,
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
        self.rank, self.world_size = place_in_job(collective, rank, world_size)
        self.total_steps = total_steps if total_steps is not None else cfg.total_steps
        session, self._route = open_run(
            cfg,
            target,
            collective=collective,
            rank=self.rank,
            world_size=self.world_size,
            place=this_place(self.rank, device, device_id),
            reductions=reductions,
            loss_ranks=loss_ranks,
            resume=resume if resume is not None else resume_step is not None,
            total_steps=self.total_steps,
            run_info=run_info,
        )
        self._session = session
        self.logdir = session.logdir
        self._pipeline = session.pipeline
        self._rates, self._counter = session.rates, session.counter
        self._clock = StepClock()
        # collect_freq, decided here once per step (collects()); the adapter asks too.
        self._every = cfg.collect_freq
        self._collect = Every(cfg.collect_freq)
        self._collected: Optional[int] = None  # the last step collects() said yes to
        self.last_step: Optional[int] = None
        self.steps_logged = 0
        # The highest step logged so far, and the steps logged at or below it (a curve
        # folding back in TensorBoard): warned about once, counted in run.json.
        self._highest_step = _BEFORE_ANY_STEP
        self._steps_out_of_order = 0
        self._closed = False
        self._started = False  # a step was logged (read on the hot path, not the session)
        self._steps_per_epoch: Optional[int] = None
        self._warn = WarnOnce(log)
        if resume_step is not None:
            self.mark_resume(resume_step)
        if cfg.hparams:
            self.log_hparams(cfg.hparams)
        session.write_config_text()
        lifecycle.register(self)

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
            loss: written as ``train/loss``.
            lr: written as ``train/lr``.
            grad_norm: written as ``train/grad_norm``.
            samples: samples / tokens processed *per step* (e.g. the batch size);
                with the wall time since the previous call they give
                ``perf/samples_per_s`` and ``perf/tokens_per_s``. ``perf/step_time_ms``
                is always written (except on a call where no time passed).
            tokens: see ``samples``.
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
        if self._every > 1 and not self.collects(step):
            return  # collect_freq: the next recorded step's timing covers this one
        if reduce:
            self.declare(reduce)
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
            # Counts are ints as a rule: converted here, not in number() (a call costs
            # more than the conversion on a paced step); only a huge one goes there.
            if samples is not None and type(samples) is not float:
                if type(samples) is int and -_EXACT < samples < _EXACT:
                    samples = float(samples)
                else:
                    samples = number("samples", samples)
            if tokens is not None and type(tokens) is not float:
                if type(tokens) is int and -_EXACT < tokens < _EXACT:
                    tokens = float(tokens)
                else:
                    tokens = number("tokens", tokens)
        except BaseException:
            self._route.skip(step)  # the ranks' collectives stay paired whatever happened
            raise
        if not self._started:  # the first step: the hyperparameters go with it
            self._started = True
            self._session.write_hparams()
        self._route.log(
            (
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
        )
        self.last_step = step
        self.steps_logged += 1
        if step > self._highest_step:  # the hot path's only cost: one comparison
            self._highest_step = step
        else:
            self._step_out_of_order(step)

    def collects(self, step: int) -> bool:
        """Whether ``step`` is recorded under ``collect_freq`` (always, by default).

        The one place that decides it: the framework adapter asks before it reads a
        step's outputs (no device sync on a step that is not recorded), and
        :meth:`log_step` of a step this said yes to records it. A step that is not
        recorded still counts in the next recorded step's timing.
        """
        if self._every <= 1 or step == self._collected:
            return True
        if self._collect(step):
            self._collected = step
            return True
        self._clock.skip(step)
        return False

    def _step_out_of_order(self, step: int) -> None:
        """``step`` is at or below a step logged before: written as given (nothing is
        dropped), warned about once, counted (``steps_out_of_order`` in run.json)."""
        self._steps_out_of_order += 1
        self._warn("step order", "mindwatch: %s", _out_of_order(step, self._highest_step))

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
        self._route.declare(reductions)

    # ------------------------------------------------------------------ other records

    def log_eval(self, step: int, **metrics: Any) -> None:
        """Log evaluation results at ``step`` as ``eval/<name>`` (e.g. ``loss=0.3, acc=0.9``).

        Under data parallelism every rank usually evaluates the same data, so rank 0's
        results are written as they are (not reduced). With ``perplexity`` on, a
        ``loss`` also gives ``eval/perplexity``.
        """
        step = step_number(step)
        values = [(eval_tag(key), number(key, value)) for key, value in metrics.items()]
        self._route.eval(step, values)

    def log_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
        """Log scalars under exactly the given tags (no namespace added), unreduced.

        For values that are the same on every rank (model state: parameter norms);
        under reduction only rank 0's are written. Use :meth:`log_step` for values that
        differ between ranks.
        """
        values = [(tag, number(tag, v)) for tag, v in scalars.items()]
        self._pipeline.item(Scalars(step_number(step), values))

    def log_histogram(self, tag: str, values: Any, step: int) -> None:
        """Log a histogram (bucketed in the background; the array is copied now).

        Like :meth:`log_scalars`, unreduced: under reduction only rank 0's is written.
        """
        if self.writes_shared:
            import_histogram_support()
            data = np.array(values, copy=True)
            self._pipeline.item(Histogram(tag, data, step_number(step)))

    def log_text(self, tag: str, text: str, step: int = 0) -> None:
        """Log markdown text (TensorBoard's TEXT tab); under reduction, rank 0's only."""
        import_text_support()
        self._pipeline.item(Text(tag, text, step_number(step)))

    def log_values(
        self, step: int, values: Sequence[bytes], wall_time: Optional[float] = None
    ) -> None:
        """Log serialized ``Summary.Value`` entries as they are, in one event at ``step``.

        Each entry is framed as a ``Summary.value`` field, as the builders of
        :mod:`mindwatch.events.summaries` return them (``value_bytes(Summary.Value(...))``):
        any plugin's data (images, tensors, PR curves...). The writer's thread writes
        them, in order with the other records; ``wall_time`` (seconds since the epoch)
        is the event's time, by default when it is written. Like :meth:`log_scalars`,
        unreduced: under reduction only rank 0's are written.
        """
        step = step_number(step)
        entries = tuple(values)
        for entry in entries:
            if not isinstance(entry, (bytes, bytearray, memoryview)):
                raise TypeError(
                    "mindwatch: log_values takes serialized Summary.Value entries "
                    f"(bytes, as value_bytes returns them), got {type(entry).__name__}"
                )
        if wall_time is not None:
            wall_time = number("wall_time", wall_time)
        if entries and self.writes_shared:
            data = tuple([bytes(entry) for entry in entries])  # a copy: the caller's may change
            self._pipeline.item(SummaryValues(step, data, wall_time))

    def mark_resume(self, step: int) -> None:
        """This attempt continues the run at ``step``; earlier points at ``>= step`` are void.

        Writes TensorBoard's purge marker (``SessionLog.START`` at ``step``): readers
        then hide what a crashed attempt logged at ``step`` and beyond, so the curve
        neither folds back nor shows two values for a step. ``run.json`` records the
        step in this attempt's entry.
        """
        step = step_number(step)
        self._route.drop_from(step)  # buffered steps from step on are void too
        self._pipeline.item(SessionStart(step), BOTH)
        self._highest_step = step - 1  # the marker hides what came before from step on
        self.record(resumed_at=step)

    def log_hparams(self, hparams: Optional[Mapping[str, Any]] = None, **more: Any) -> None:
        """Record the run's hyperparameters for TensorBoard's HPARAMS dashboard.

        Nested mappings are flattened (``optimizer.lr``). Values collected before the
        first step are written together when it is logged (TensorBoard keeps one set
        per run); later ones still go to ``run.json``, with a warning.
        """
        self._session.add_hparams(flatten_hparams({**(hparams or {}), **more}))

    @property
    def hparams(self) -> dict[str, HParamValue]:
        return dict(self._session.hparams)

    def set_total_steps(self, total_steps: Optional[int]) -> None:
        """Tell the progress display how many steps the run takes (for the bar and ETA)."""
        if total_steps is not None:
            total_steps = _total_steps(total_steps)
        self.total_steps = total_steps
        self._pipeline.item(TotalSteps(total_steps))

    def set_model_flops(self, flops_per_step: float, *, source: str) -> None:
        """The model FLOPs of one training step on this device (forward and backward),
        e.g. counted by the framework's compiler; ``flops_per_sample`` in the config wins.
        From the next step on, ``perf/tflops_per_device`` (and ``perf/mfu`` with a
        peak) are written; ``run.json`` records the count and its source."""
        if self._rates.flops_per_sample is not None:
            return
        flops = number("flops_per_step", flops_per_step)
        self._route.set_rate("flops_per_step", flops)
        self._session.record_flops(per_step=flops, source=source)

    def set_peak_tflops(self, peak_tflops: float, *, source: str) -> None:
        """The device's peak TFLOPS for ``perf/mfu``; ``peak_tflops`` in the config wins."""
        if self.config.peak_tflops is not None:
            return
        peak = number("peak_tflops", peak_tflops)
        self._route.set_rate("peak_tflops", peak)
        self._session.record_flops(peak_tflops=peak, peak_source=source)

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

    @property
    def telemetry(self) -> Optional[HardwareTelemetry]:
        """This rank's hardware sampler (``hardware`` in the config), or None when off;
        a framework adapter adds its own probes to it."""
        return self._session.telemetry

    def __repr__(self) -> str:
        return f"Monitor(logdir={str(self.logdir)!r}, last_step={self.last_step})"
