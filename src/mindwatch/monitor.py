"""``Monitor``: the framework-free front door, for custom training loops.

    with mindwatch.Monitor("runs/exp1") as mon:
        for step, batch in enumerate(data, start=1):
            loss, grad_norm = train_step(batch)
            mon.log_step(step, loss=loss, lr=lr, grad_norm=grad_norm, samples=len(batch))

``log_step`` runs on the training thread, so it only converts values to floats,
measures the step time and hands one tuple to the background writer (about 1-2 us for
a whole step). The MindSpore callback (:mod:`mindwatch.mindspore`) drives the same
calls from ``Model.train``.

Under data parallelism (several ranks), give every rank a Monitor with the framework's
collective (``collective=mindwatch.mindspore.MindSporeCollective()``): rank 0 then
writes one global run with every metric reduced across ranks as it declares
(:mod:`mindwatch.aggregate`), the other ranks write nothing there, and with
``per_rank: true`` each rank also writes ``<run>/rank_<r>/``. Without a collective,
rank 0 writes its own values and rank ``r`` writes its own to ``<run>/rank_<r>/``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from mindwatch.aggregate import AggregationError, Aggregator, Collective, ReductionTable
from mindwatch.alerts import Alert, AlertLog
from mindwatch.config import MonitorConfig, ReduceKind
from mindwatch.events import EventFileWriter
from mindwatch.events.summaries import hparams_session_end_values, hparams_session_values
from mindwatch.events.writer import LogDirError, PathLike, WriterStats
from mindwatch.metrics.derived import perplexity
from mindwatch.metrics.flops import mfu, tflops
from mindwatch.metrics.hparams import HParamValue, flatten_hparams
from mindwatch.metrics.mindformers_view import mindformers_view
from mindwatch.metrics.tags import TAGS, eval_tag, tag_for
from mindwatch.metrics.timing import Every, StepClock
from mindwatch.progress import ProgressReporter
from mindwatch.rules import RuleEngine
from mindwatch.run import lifecycle
from mindwatch.run.info import RunInfo
from mindwatch.run.layout import ALERTS_FILE, has_event_files, make_run_dir
from mindwatch.run.ranks import env_rank_and_world, rank_folder

if TYPE_CHECKING:
    from mindwatch.alerts.notify import Dispatcher

__all__ = ["Monitor"]

log = logging.getLogger(__name__)

_LOSS, _LR, _GRAD_NORM = TAGS["loss"], TAGS["lr"], TAGS["grad_norm"]
_PERPLEXITY = TAGS["perplexity"]
_STEP_TIME, _SAMPLES, _TOKENS = TAGS["step_time_ms"], TAGS["samples_per_s"], TAGS["tokens_per_s"]
_TFLOPS, _MFU = TAGS["tflops_per_device"], TAGS["mfu"]


def _number(key: str, value: Any) -> float:
    """``float(value)``, or a TypeError that names the key.

    Accepts Python and numpy numbers and one-element arrays / framework tensors (via
    ``item()``); rejects strings, which ``float()`` would silently parse.

    A value that is not a number raises instead of being skipped with a warning: it is
    a programming error, visible on the very first step, and a curve that silently
    never appears is worse.
    """
    if type(value) is float:
        return value
    if isinstance(value, (str, bytes)):
        raise TypeError(
            f"mindwatch: '{key}' must be a number, got the string {value!r:.60}; "
            "pass the number itself"
        )
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    if getattr(value, "size", None) == 1 and hasattr(value, "item"):
        try:
            return float(value.item())  # numpy 2 refuses float() on shape (1,) arrays
        except (TypeError, ValueError):
            pass
    shape = getattr(value, "shape", None)
    what = f"{type(value).__name__} of shape {tuple(shape)}" if shape else type(value).__name__
    raise TypeError(
        f"mindwatch: '{key}' must be a number (int, float, or a one-element "
        f"numpy array / tensor), got {what}: {value!r:.60}"
    ) from None


_INT64 = 1 << 63


def _step(step: Any) -> int:
    try:
        value = int(step.__index__())
    except AttributeError:
        if isinstance(step, float) and step.is_integer():
            value = int(step)
        else:
            raise TypeError(
                f"mindwatch: step must be an int, got {type(step).__name__}: {step!r}"
            ) from None
    if not -_INT64 <= value < _INT64:
        raise TypeError(f"mindwatch: step must fit in 64 bits (TensorBoard's int64), got {value}")
    return value


def _config_markdown(config: Mapping[str, Any]) -> str:
    """The effective config as a TEXT entry (TensorBoard renders markdown)."""
    body = json.dumps(dict(config), indent=2, sort_keys=True, default=str)
    return "Effective mindwatch configuration:\n\n```json\n" + body + "\n```"


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
        collective: Optional[Collective] = None,
        reductions: Optional[Mapping[str, ReduceKind]] = None,
        loss_ranks: Optional[Sequence[int]] = None,
    ) -> None:
        self.config = MonitorConfig.from_any(config)
        target = logdir if logdir is not None else self.config.logdir
        if target is None:
            raise ValueError(
                "mindwatch.Monitor needs a log folder: pass logdir='runs/my_run' "
                "or set 'logdir' in the config"
            )
        cfg = self.config
        env_rank, env_world = env_rank_and_world()
        if collective is not None:
            env_rank, env_world = int(collective.rank), int(collective.world_size)
        self.rank = env_rank if rank is None else int(rank)
        self.world_size = env_world if world_size is None else int(world_size)
        self._aggregator: Optional[Aggregator] = None
        self._own_run_folder = False  # rank r > 0 writes a run folder of its own
        if collective is not None and self.world_size > 1 and cfg.aggregate_every != 0:
            self._aggregator = self._new_aggregator(collective, reductions, loss_ranks)
        if cfg.run_name:
            target = self._run_dir(target)
        self.logdir = Path(os.path.abspath(os.path.expanduser(os.fspath(target))))
        # Who writes what: rank 0 the global run; a rank whose values are reduced writes
        # its own folder only with per_rank; a rank with nobody to reduce with writes
        # its own folder always (its values would be lost otherwise).
        reduced = self._aggregator is not None
        self._writer: Optional[EventFileWriter] = None  # the global run (rank 0)
        self._rank_writer: Optional[EventFileWriter] = None  # <run>/rank_<r>/
        if self.rank == 0:
            self._writer = self._open_writer(self.logdir)
        if (reduced and cfg.per_rank) or (self.rank != 0 and not reduced):
            folder = self.logdir if self._own_run_folder else self.logdir / rank_folder(self.rank)
            self._rank_writer = self._open_writer(folder)
        # Where the values nobody reduces go (histograms, text, eval, log_scalars).
        self._own = self._writer if self.rank == 0 else (None if reduced else self._rank_writer)
        self.total_steps = total_steps if total_steps is not None else cfg.total_steps
        self._clock = StepClock()
        self._progress = self._new_progress(self.total_steps)
        self.nonfinite: dict[str, int] = {}
        self._tags: dict[str, str] = {}
        self._every = cfg.collect_freq
        self._collect = Every(cfg.collect_freq)
        self._perplexity = cfg.perplexity
        self._tokens_per_sample = cfg.tokens_per_sample
        # Model FLOPs per sample (config) or per step (the framework's count), and the
        # device's peak: perf/tflops_per_device and perf/mfu.
        self._flops_per_sample = cfg.flops_per_sample
        self._flops_per_step: Optional[float] = None
        self._peak_tflops = cfg.peak_tflops
        self._mindformers_tags = cfg.tag_style == "mindformers"
        self.last_step: Optional[int] = None
        self.steps_logged = 0
        self._closed = False
        # run.json belongs to the run, written by the rank that writes the global run
        # (or, without reduction, by each rank for its own folder).
        run_folder: Optional[Path] = self.logdir
        if self.rank != 0:
            run_folder = self._own.logdir if self._own is not None else None
        self._run: Optional[RunInfo] = None
        if run_folder is not None:
            self._run = RunInfo(
                run_folder,
                config=cfg.model_dump(mode="json") | {"logdir": str(self.logdir)},
                world_size=self.world_size,
                rank=self.rank,
                extra=run_info,
            )
            given: dict[str, Any] = {}
            if cfg.flops_per_sample is not None:
                given.update(per_sample=cfg.flops_per_sample, source="config")
            if cfg.peak_tflops is not None:
                given.update(peak_tflops=cfg.peak_tflops, peak_source="config")
            if given:
                self._run.update(flops=given)
            self._run.write()
        if resume_step is not None:
            self.mark_resume(resume_step)
        self._hparams: dict[str, HParamValue] = {}
        self._hparams_written = False
        self._start_time = time.time()
        if cfg.hparams:
            self.log_hparams(cfg.hparams)
        if self._own is not None and self._run is not None:
            text = _config_markdown(self._run.data["config"])
            self._own.add_text("mindwatch/config", text, 0)
        # Anomaly rules, on the rank that writes the shared view (under reduction they
        # see the reduced values, and name the outlier rank from the spread).
        self.alerts: list[Alert] = []
        self.stop_reason: Optional[str] = None
        # Called with each alert before it is written (the adapter's actions, e.g.
        # keeping the last stable checkpoint, add what they did to it).
        self.on_alert: Optional[Callable[[Alert], None]] = None
        self.steps_per_epoch: Optional[int] = None  # for an alert's batch index
        self._engine: Optional[RuleEngine] = None
        self._alert_log: Optional[AlertLog] = None
        self._alert_lock = threading.Lock()
        self._dispatcher: Optional[Dispatcher] = None
        if cfg.alerts.enabled and self._own is not None:
            self._engine = RuleEngine(cfg.alerts, run=self.logdir.name, rank=self.rank)
            self._alert_log = AlertLog(self._own.logdir / ALERTS_FILE)
            if cfg.alerts.notify:  # smtplib, urllib...: imported only when needed
                from mindwatch.alerts.notify import build_dispatcher

                self._dispatcher = build_dispatcher(cfg.alerts)
        lifecycle.register(self)

    def _open_writer(self, folder: Path) -> EventFileWriter:
        cfg = self.config
        return EventFileWriter(
            folder,
            flush_secs=cfg.flush_secs,
            max_file_size=cfg.max_file_size,
            max_queue=cfg.max_queue,
            max_block_secs=cfg.max_block_secs,
            # A run's first session starts with SessionLog.START, as TensorFlow's did:
            # TensorBoard's server treats the first START in a run as the start and
            # only later ones as restarts, so a resume's marker needs this one.
            purge_step=0 if not has_event_files(folder) else None,
        )

    def _new_aggregator(
        self,
        collective: Collective,
        reductions: Optional[Mapping[str, ReduceKind]],
        loss_ranks: Optional[Sequence[int]],
    ) -> Aggregator:
        cfg = self.config
        if cfg.loss_source_rank is not None:
            loss_ranks = (cfg.loss_source_rank,)
        world = self.world_size
        outside = [r for r in loss_ranks or () if not -world <= r < world]
        if outside:
            raise ValueError(
                f"mindwatch: loss_source_rank / loss_ranks {outside} is not a rank of this "
                f"job of {world} ranks; use 0..{world - 1}, or -1 for the last rank"
            )
        table = ReductionTable({**cfg.reductions, **(reductions or {})}, loss_ranks=loss_ranks)
        return Aggregator(
            collective,
            table,
            every=cfg.aggregate_every,
            timeout=cfg.aggregate_timeout,
            emit_global=self._emit_global if self.rank == 0 else None,
            emit_local=self._emit_local if cfg.per_rank else None,
            on_failure=self._aggregation_failed,
        )

    def _run_dir(self, root: PathLike) -> Path:
        """The new run folder ``<root>/<date>_<run_name>_<hparams>``, the same on every rank.

        Rank 0 creates it; with a collective, the other ranks learn its name from rank
        0 (their clocks, and the ``-2`` suffix for a taken name, could differ). Without
        one, rank ``r`` cannot know it and writes its own ``<date>_<run_name>_rank<r>``
        folder instead (``rank_logdir``).
        """
        cfg = self.config
        name = cfg.run_name or "run"
        named = {key: cfg.hparams[key] for key in cfg.name_hparams}
        aggregator = self._aggregator
        if self.world_size == 1 or (self.rank == 0 and aggregator is None):
            return make_run_dir(root, name, named)
        if aggregator is not None:
            made = str(make_run_dir(root, name, named)) if self.rank == 0 else ""
            try:
                return Path(aggregator.agree_on_text(made))
            except AggregationError as exc:
                log.warning(
                    "mindwatch: rank %d: the ranks could not agree on the run folder (%s); "
                    "nothing will be reduced across ranks, each rank writes its own values",
                    self.rank,
                    exc,
                )
                self._aggregator = None
                if self.rank == 0:
                    return Path(made)
        self._own_run_folder = True
        return make_run_dir(root, f"{name}_rank{self.rank}", named)

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
                ``/`` is used as the tag unchanged.

        Under reduction across ranks the step's values are buffered and written, reduced,
        when the interval completes (``aggregate_every``); every rank must log the same
        steps.

        Non-finite values are written as they are (TensorBoard plots NaN/Inf) and
        counted in :attr:`nonfinite`. A value that is not a number raises TypeError
        naming its key.
        """
        if type(step) is not int or not -_INT64 <= step < _INT64:
            step = _step(step)
        if self._every > 1 and not self._collect(step):
            self._clock.skip(step)  # collect_freq: the next recorded step's timing covers it
            return
        if reduce:
            self.declare(reduce)
        aggregator = self._aggregator
        try:
            wall = time.time()
            values, n_samples, n_tokens = self._step_values(
                step,
                loss=loss,
                lr=lr,
                grad_norm=grad_norm,
                samples=samples,
                tokens=tokens,
                scalars=scalars,
                derive=aggregator is None,
            )
            for tag, value in values:
                if value - value != 0.0:  # NaN or +-Inf, without a function call per value
                    self.nonfinite[tag] = self.nonfinite.get(tag, 0) + 1
            if not self._hparams_written:
                self._write_hparams()
            if aggregator is not None:
                # Reduced across ranks when the interval completes; perplexity then.
                aggregator.add(step, wall, values, n_samples, n_tokens)
            else:
                self._publish(self._own, step, values, wall, n_samples)
            self.last_step = step
            self.steps_logged += 1
        finally:
            if aggregator is not None:  # whatever happened, the ranks' collectives stay paired
                aggregator.step_end(step)

    def _step_values(
        self,
        step: int,
        *,
        loss: Any,
        lr: Any,
        grad_norm: Any,
        samples: Any,
        tokens: Any,
        scalars: Mapping[str, Any],
        derive: bool,
    ) -> tuple[list[tuple[str, float]], Optional[float], Optional[float]]:
        """``([(tag, value)], samples, tokens)`` of one step, timing included; ``derive``
        adds perplexity (under reduction it is derived from the reduced loss instead)."""
        values: list[tuple[str, float]] = []
        append = values.append
        if loss is not None:
            loss = loss if type(loss) is float else _number("loss", loss)
            append((_LOSS, loss))
            if derive and self._perplexity:
                append((_PERPLEXITY, perplexity(loss)))
        if lr is not None:
            append((_LR, lr if type(lr) is float else _number("lr", lr)))
        if grad_norm is not None:
            append(
                (
                    _GRAD_NORM,
                    grad_norm if type(grad_norm) is float else _number("grad_norm", grad_norm),
                )
            )
        if scalars:
            tags = self._tags
            for key, value in scalars.items():
                tag = tags.get(key)
                if tag is None:
                    tag = tags[key] = tag_for(key)
                append((tag, value if type(value) is float else _number(key, value)))
        n_samples = None if samples is None else _number("samples", samples)
        n_tokens = None if tokens is None else _number("tokens", tokens)
        if n_tokens is None and n_samples is not None and self._tokens_per_sample:
            n_tokens = n_samples * self._tokens_per_sample
        timing = self._clock.tick(step)
        if timing is not None:
            seconds, steps = timing
            append((_STEP_TIME, seconds * 1000.0 / steps))
            if n_samples is not None:
                append((_SAMPLES, n_samples * steps / seconds))
            if n_tokens is not None:
                append((_TOKENS, n_tokens * steps / seconds))
            flops = self._step_flops(n_samples)
            if flops is not None:
                achieved = tflops(flops, seconds / steps)
                append((_TFLOPS, achieved))
                if self._peak_tflops is not None:
                    append((_MFU, mfu(achieved, self._peak_tflops)))
        return values, n_samples, n_tokens

    def _step_flops(self, samples: Optional[float]) -> Optional[float]:
        """Model FLOPs of one step on this device: the config's per-sample count times
        the samples, else the framework's per-step count, else None."""
        if self._flops_per_sample is not None:
            return None if samples is None else self._flops_per_sample * samples
        return self._flops_per_step

    def set_model_flops(self, flops_per_step: float, *, source: str) -> None:
        """The model FLOPs of one training step on this device (forward and backward),
        e.g. counted by the framework's compiler; ``flops_per_sample`` in the config wins.
        From the next step on, ``perf/tflops_per_device`` (and ``perf/mfu`` with a
        peak) are written; ``run.json`` records the count and its source."""
        if self._flops_per_sample is not None:
            return
        self._flops_per_step = float(flops_per_step)
        info = {**self._flops_info(), "per_step": self._flops_per_step, "source": source}
        self.record(flops=info)

    def set_peak_tflops(self, peak_tflops: float, *, source: str) -> None:
        """The device's peak TFLOPS for ``perf/mfu``; ``peak_tflops`` in the config wins."""
        if self.config.peak_tflops is not None:
            return
        self._peak_tflops = float(peak_tflops)
        info = {**self._flops_info(), "peak_tflops": self._peak_tflops, "peak_source": source}
        self.record(flops=info)

    def _flops_info(self) -> dict[str, Any]:
        info = self._run.data.get("flops") if self._run is not None else None
        return dict(info) if isinstance(info, Mapping) else {}

    def _with_derived(self, values: list[tuple[str, float]]) -> list[tuple[str, float]]:
        if self._perplexity:
            for tag, value in values:
                if tag == _LOSS:
                    return [*values, (_PERPLEXITY, perplexity(value))]
        return values

    def _emit_global(
        self, step: int, values: list[tuple[str, float]], wall: float, samples: Optional[float]
    ) -> None:
        """A step of the global run, reduced across ranks (on the collective thread)."""
        if self._writer is not None:
            self._publish(self._writer, step, self._with_derived(values), wall, samples)

    def _publish(
        self,
        writer: Optional[EventFileWriter],
        step: int,
        values: list[tuple[str, float]],
        wall: float,
        samples: Optional[float],
    ) -> None:
        """One step of the run this process writes: the event file, rules, progress."""
        if writer is not None:
            writer.add_scalars(step, values, wall)
            if self._mindformers_tags:
                flops = self._step_flops(samples)
                for x, view in mindformers_view(
                    step,
                    values,
                    samples=samples,
                    world_size=self.world_size,
                    flops_per_step=flops,
                ):
                    writer.add_scalars(x, view, wall)
        if self._engine is not None:
            self._check(step, values)
        if self._progress.due(step):
            self._progress.update(step, dict(values), wall)

    def _check(self, step: int, values: Sequence[tuple[str, float]]) -> None:
        """Run the rules on one step's values; write what they raise."""
        engine, alert_log = self._engine, self._alert_log
        if engine is None or alert_log is None:
            return
        batch = (step - 1) % self.steps_per_epoch if self.steps_per_epoch else None
        with self._alert_lock:
            try:
                raised = engine.observe(step, dict(values), batch=batch)
            except Exception as exc:  # a rule bug must not take training down
                log.warning("mindwatch: the anomaly rules failed at step %d: %r", step, exc)
                self._engine = None
                return
            for alert in raised:
                if alert.rule in self.config.alerts.stop_on and alert.severity != "info":
                    alert.action = "stop training"
                    self._request_stop(alert)
                if self.on_alert is not None:
                    try:
                        self.on_alert(alert)
                    except Exception as exc:  # an action failing must not stop training
                        log.warning("mindwatch: an alert action failed: %r", exc)
                if len(self.alerts) < 10_000:
                    self.alerts.append(alert)
                alert_log.write(alert)
                if self._dispatcher is not None:
                    self._dispatcher.submit(alert)

    def report(self, alert: Alert) -> None:
        """Write an alert raised outside the rules (an action taken: a changed lr)."""
        if self._alert_log is None:
            return
        with self._alert_lock:
            if len(self.alerts) < 10_000:
                self.alerts.append(alert)
            self._alert_log.write(alert)
            if self._dispatcher is not None:
                self._dispatcher.submit(alert)

    def record(self, **fields: Any) -> None:
        """Add ``fields`` to ``run.json`` now (on the rank that writes it)."""
        if self._run is not None:
            self._run.update(**fields)
            self._run.write()

    def _request_stop(self, alert: Alert) -> None:
        if self.stop_reason is None:
            self.stop_reason = alert.line()
            log.warning("mindwatch: stopping training (alerts.stop_on): %s", alert.line())
        if self._aggregator is not None:
            self._aggregator.request_stop()

    @property
    def should_stop(self) -> bool:
        """Whether training should stop now (an alert of a rule in ``alerts.stop_on``).

        Under reduction across ranks this turns true on every rank in the same step (the
        request travels with the next reduction), so all ranks stop together.
        """
        if self._aggregator is not None and self._aggregator.reducing:
            return self._aggregator.stop_agreed
        return self.stop_reason is not None

    def _emit_local(
        self, step: int, values: list[tuple[str, float]], wall: float, samples: Optional[float]
    ) -> None:
        """A step of this rank's own folder: its local values of the reduced metrics."""
        writer = self._rank_writer
        if writer is not None:
            writer.add_scalars(step, self._with_derived(values), wall)

    def _aggregation_failed(self, step: int, reason: str) -> None:
        """Reductions stopped: record it, and make sure this rank's values land somewhere."""
        if self._run is not None:
            self._run.update(**self._aggregation_summary())
            self._run.write()
        if self.rank != 0 and self._rank_writer is None and self._aggregator is not None:
            try:
                self._rank_writer = self._open_writer(self.logdir / rank_folder(self.rank))
            except LogDirError as exc:
                log.warning("mindwatch: rank %d cannot write its own values: %s", self.rank, exc)
                return
            self._own = self._rank_writer
            self._aggregator.set_local_output(self._emit_local)

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
        step = _step(step)
        values = [(eval_tag(key), _number(key, value)) for key, value in metrics.items()]
        if self._perplexity and "loss" in metrics:
            values.append(("eval/perplexity", perplexity(_number("loss", metrics["loss"]))))
        for tag, value in values:
            if not math.isfinite(value):
                self.nonfinite[tag] = self.nonfinite.get(tag, 0) + 1
        if self._own is not None:
            self._own.add_scalars(step, values)
        if self._engine is not None:
            self._check(step, values)
        if values and self._progress.enabled:
            shown = ", ".join(f"{tag} {value:.4g}" for tag, value in values)
            print(f"[mindwatch] eval at step {step} | {shown}", flush=True)

    def log_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
        """Log scalars under exactly the given tags (no namespace added), unreduced.

        For values that are the same on every rank (model state: parameter norms);
        under reduction only rank 0's are written. Use :meth:`log_step` for values that
        differ between ranks.
        """
        step = _step(step)
        values = [(tag, _number(tag, v)) for tag, v in scalars.items()]
        if self._own is not None:
            self._own.add_scalars(step, values)

    def log_histogram(self, tag: str, values: Any, step: int) -> None:
        """Log a histogram (bucketed on the writer's thread; the array is copied now).

        Like :meth:`log_scalars`, unreduced: under reduction only rank 0's is written.
        """
        if self._own is not None:
            self._own.add_histogram(tag, values, _step(step))

    def mark_resume(self, step: int) -> None:
        """This attempt continues the run at ``step``; earlier points at ``>= step`` are void.

        Writes TensorBoard's purge marker (``SessionLog.START`` at ``step``): readers
        then hide what a crashed attempt logged at ``step`` and beyond, so the curve
        neither folds back nor shows two values for a step. ``run.json`` records the
        step in this attempt's entry.
        """
        step = _step(step)
        if self._aggregator is not None:
            # Buffered steps from step on are void; what was reduced before must reach
            # the files before the marker, or readers would not hide it.
            self._aggregator.drop_from(step)
        for writer in self._writers():
            writer.add_session_start(step)
        if self._run is not None:
            self._run.update(resumed_at=step)
            self._run.write()

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
        if self._hparams and self._own is not None and self._run is not None:
            values = hparams_session_values(self._hparams, start_time_secs=self._start_time)
            self._own.add_values(0, values)
            self._run.write()

    @property
    def hparams(self) -> dict[str, HParamValue]:
        return dict(self._hparams)

    def log_text(self, tag: str, text: str, step: int = 0) -> None:
        """Log markdown text (TensorBoard's TEXT tab); under reduction, rank 0's only."""
        if self._own is not None:
            self._own.add_text(tag, text, _step(step))

    def set_total_steps(self, total_steps: Optional[int]) -> None:
        """Tell the progress display how many steps the run takes (for the bar and ETA)."""
        self.total_steps = total_steps
        self._progress.close()
        self._progress = self._new_progress(total_steps)

    def _new_progress(self, total: Optional[int]) -> ProgressReporter:
        """The progress display: rank 0 prints it, with the reduced values."""
        cfg = self.config
        return ProgressReporter(
            every=cfg.print_every if self.rank == 0 else 0, mode=cfg.progress, total=total
        )

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

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    def _writers(self) -> list[EventFileWriter]:
        return [w for w in (self._writer, self._rank_writer) if w is not None]

    @property
    def writer(self) -> EventFileWriter:
        """The writer of the run this process writes: the global one on rank 0."""
        writers = self._writers()
        if not writers:
            raise RuntimeError(
                f"rank {self.rank} writes no event files (its values are reduced into rank "
                "0's run; set per_rank: true for a folder of its own)"
            )
        return writers[0]

    @property
    def rank_logdir(self) -> Optional[Path]:
        """``<run>/rank_<r>/`` when this rank writes its own folder, else None."""
        return self._rank_writer.logdir if self._rank_writer is not None else None

    @property
    def writes_shared(self) -> bool:
        """Whether this rank writes the values that are the same on every rank (model
        state, histograms, eval): rank 0, or a rank nobody reduces with. Others can
        skip computing them."""
        return self._own is not None

    @property
    def aggregator(self) -> Optional[Aggregator]:
        """The cross-rank reducer, when this monitor reduces (several ranks, a collective)."""
        return self._aggregator

    @property
    def stats(self) -> WriterStats:
        """Counters of this process's writers, summed."""
        writers = [w.stats for w in self._writers()]
        return WriterStats(
            records_written=sum(w.records_written for w in writers),
            points_dropped=sum(w.points_dropped for w in writers),
            write_errors=sum(w.write_errors for w in writers),
            files=tuple(f for w in writers for f in w.files),
        )

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Block until everything logged so far is handed to the OS.

        Under reduction that means what was reduced so far; steps still buffered for the
        current interval are written when it completes (or at :meth:`close`).
        """
        ok = True
        if self._aggregator is not None:
            ok = self._aggregator.sync(timeout)
        for writer in self._writers():
            ok = writer.flush(timeout) and ok
        return ok

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
            for writer in self._writers():
                writer.close(timeout)
            return
        self._closed = True
        lifecycle.unregister(self)
        if self._aggregator is not None:
            self._aggregator.close(communicate=communicate, timeout=timeout)
        self._progress.close()
        if not self._hparams_written:
            self._write_hparams()
        if self._hparams and self._own is not None:
            ok = not lifecycle.signal_received and error is None
            self._own.add_values(self.last_step or 0, hparams_session_end_values(ok, time.time()))
        for writer in self._writers():
            writer.close(timeout)
        if self._dispatcher is not None:
            # What is queued, but no longer than one alert's delivery with its retries
            # (capped at 10 s): a hanging endpoint must not hold the end of training.
            d = self.config.alerts.delivery
            budget = min(10.0, d.timeout * (d.retries + 1) + d.backoff * 2**d.retries)
            self._dispatcher.close(timeout=budget if timeout is None else min(timeout, budget))
        stats = self.stats
        if self._run is not None:
            base = self._run.path.parent
            status = "terminated" if lifecycle.signal_received else "finished"
            failure = {}
            if error is not None:
                status = "failed"
                # One line: framework errors carry pages of call stacks.
                text = " ".join(str(error).split())
                failure["error"] = f"{type(error).__name__}: {text}"[:300]
            self._run.finish(
                status=status,
                **failure,
                last_step=self.last_step,
                steps_logged=self.steps_logged,
                nonfinite=dict(self.nonfinite),
                points_dropped=stats.points_dropped,
                write_errors=stats.write_errors,
                event_files=[os.path.relpath(f, base) for f in stats.files],
                alerts=self._alert_log.count if self._alert_log is not None else 0,
                **self._notification_summary(),
                **self._aggregation_summary(),
            )
        if self.nonfinite:
            log.warning(
                "mindwatch: non-finite values were logged: %s",
                ", ".join(f"{tag} x{n}" for tag, n in sorted(self.nonfinite.items())),
            )

    def _notification_summary(self) -> dict[str, Any]:
        d = self._dispatcher
        if d is None:
            return {}
        counts = {"sent": d.sent, "failed": d.failed, "dropped": d.dropped}
        return {"notifications": {**counts, "undelivered": d.undelivered}}

    def _aggregation_summary(self) -> dict[str, Any]:
        aggregator = self._aggregator
        if aggregator is None:
            return {}
        summary: dict[str, Any] = {
            "reductions": aggregator.reductions,
            "interval": aggregator.every,
            # Later steps in the global run are rank 0's own values.
            "last_reduced_step": aggregator.last_reduced_step,
        }
        if aggregator.failure is not None:
            summary["failed"] = aggregator.failure
            summary["failed_at_step"] = aggregator.failed_at
        return {"aggregation": summary}

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
