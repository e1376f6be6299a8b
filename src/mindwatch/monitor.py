"""``Monitor``: the framework-free front door, for custom training loops.

    with mindwatch.Monitor("runs/exp1") as mon:
        for step, batch in enumerate(data, start=1):
            loss, grad_norm = train_step(batch)
            mon.log_step(step, loss=loss, lr=lr, grad_norm=grad_norm, samples=len(batch))

``log_step`` runs on the training thread, so it only converts values to floats,
measures the step time and hands one tuple to the background writer (about 1-2 us for
a whole step). The MindSpore callback (:mod:`mindwatch.mindspore`) drives the same
calls from ``Model.train``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from mindwatch.config import MonitorConfig
from mindwatch.events import EventFileWriter, lifecycle
from mindwatch.events.summaries import hparams_session_end_values, hparams_session_values
from mindwatch.events.writer import PathLike, WriterStats, has_event_files
from mindwatch.metrics.derived import perplexity
from mindwatch.metrics.hparams import HParamValue, flatten_hparams
from mindwatch.metrics.tags import MINDFORMERS_TAGS, TAGS, eval_tag, tag_for
from mindwatch.metrics.timing import Every, StepClock
from mindwatch.progress import ProgressReporter
from mindwatch.rundir import make_run_dir
from mindwatch.runinfo import RunInfo

__all__ = ["Monitor"]

log = logging.getLogger(__name__)

_LOSS, _LR, _GRAD_NORM = TAGS["loss"], TAGS["lr"], TAGS["grad_norm"]
_PERPLEXITY = TAGS["perplexity"]
_STEP_TIME, _SAMPLES, _TOKENS = TAGS["step_time_ms"], TAGS["samples_per_s"], TAGS["tokens_per_s"]


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
        world_size, rank: recorded in ``run.json``.
        run_info: extra fields for ``run.json`` (e.g. the framework's settings).
        resume_step: this attempt resumes training at this step (the first step it will
            log) in a folder an earlier attempt wrote: see :meth:`mark_resume`.
    """

    def __init__(
        self,
        logdir: Optional[PathLike] = None,
        config: Union[MonitorConfig, Mapping[str, Any], str, Path, None] = None,
        *,
        total_steps: Optional[int] = None,
        world_size: int = 1,
        rank: int = 0,
        run_info: Optional[Mapping[str, Any]] = None,
        resume_step: Optional[int] = None,
    ) -> None:
        self.config = MonitorConfig.from_any(config)
        target = logdir if logdir is not None else self.config.logdir
        if target is None:
            raise ValueError(
                "mindwatch.Monitor needs a log folder: pass logdir='runs/my_run' "
                "or set 'logdir' in the config"
            )
        cfg = self.config
        if cfg.run_name:
            named = {key: cfg.hparams[key] for key in cfg.name_hparams}
            target = make_run_dir(target, cfg.run_name, named)
        fresh = not has_event_files(target)
        self._writer = EventFileWriter(
            target,
            flush_secs=cfg.flush_secs,
            max_file_size=cfg.max_file_size,
            max_queue=cfg.max_queue,
            max_block_secs=cfg.max_block_secs,
            # A run's first session starts with SessionLog.START, as TensorFlow's did:
            # TensorBoard's server treats the first START in a run as the start and
            # only later ones as restarts, so a resume's marker needs this one.
            purge_step=0 if fresh else None,
        )
        self.logdir = self._writer.logdir
        self.world_size = world_size
        self.total_steps = total_steps if total_steps is not None else cfg.total_steps
        self._clock = StepClock()
        self._progress = ProgressReporter(
            every=cfg.print_every, mode=cfg.progress, total=self.total_steps
        )
        self.nonfinite: dict[str, int] = {}
        self._tags: dict[str, str] = {}
        self._every = cfg.collect_freq
        self._collect = Every(cfg.collect_freq)
        self._perplexity = cfg.perplexity
        self._tokens_per_sample = cfg.tokens_per_sample
        self._mindformers_tags = cfg.tag_style == "mindformers"
        self.last_step: Optional[int] = None
        self.steps_logged = 0
        self._closed = False
        self._run = RunInfo(
            self.logdir,
            config=cfg.model_dump(mode="json") | {"logdir": str(self.logdir)},
            world_size=world_size,
            rank=rank,
            extra=run_info,
        )
        self._run.write()
        if resume_step is not None:
            self.mark_resume(resume_step)
        self._hparams: dict[str, HParamValue] = {}
        self._hparams_written = False
        self._start_time = time.time()
        if cfg.hparams:
            self.log_hparams(cfg.hparams)
        self._writer.add_text("mindwatch/config", _config_markdown(self._run.data["config"]), 0)
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
            **scalars: more values; ``name`` becomes ``train/name``, a name containing
                ``/`` is used as the tag unchanged.

        Non-finite values are written as they are (TensorBoard plots NaN/Inf) and
        counted in :attr:`nonfinite`. A value that is not a number raises TypeError
        naming its key.
        """
        if type(step) is not int or not -_INT64 <= step < _INT64:
            step = _step(step)
        if self._every > 1 and not self._collect(step):
            self._clock.skip(step)  # collect_freq: the next recorded step's timing covers it
            return
        wall = time.time()
        values: list[tuple[str, float]] = []
        append = values.append
        if loss is not None:
            loss = loss if type(loss) is float else _number("loss", loss)
            append((_LOSS, loss))
            if self._perplexity:
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
        timing = self._clock.tick(step)
        if timing is not None:
            seconds, steps = timing
            append((_STEP_TIME, seconds * 1000.0 / steps))
            if samples is not None:
                append((_SAMPLES, _number("samples", samples) * steps / seconds))
            if tokens is None and samples is not None and self._tokens_per_sample:
                tokens = _number("samples", samples) * self._tokens_per_sample
            if tokens is not None:
                append((_TOKENS, _number("tokens", tokens) * steps / seconds))
        for tag, value in values:
            if value - value != 0.0:  # NaN or +-Inf, without a function call per value
                self.nonfinite[tag] = self.nonfinite.get(tag, 0) + 1
        if not self._hparams_written:
            self._write_hparams()
        self._writer.add_scalars(step, values, wall)
        if self._mindformers_tags:
            self._write_mindformers_view(step, values, samples, wall)
        self.last_step = step
        self.steps_logged += 1
        if self._progress.due(step):
            self._progress.update(step, dict(values), wall)

    def _write_mindformers_view(
        self, step: int, values: list[tuple[str, float]], samples: Any, wall: float
    ) -> None:
        """``tag_style: mindformers``: the same values under MindFormers' names, once
        against the step and once against samples seen (its ``<tag> vs samples``).

        As in MindFormers, ``batch-size`` and the samples axis are global (this rank's
        samples per step times the world size); ``throughput`` stays per device.
        """
        renamed = [(MINDFORMERS_TAGS[t], v) for t, v in values if t in MINDFORMERS_TAGS]
        if samples is None:
            self._writer.add_scalars(step, renamed, wall)
            return
        batch = _number("samples", samples) * self.world_size
        renamed.append(("batch-size", batch))
        self._writer.add_scalars(step, renamed, wall)
        twins = [(f"{tag} vs samples", v) for tag, v in renamed]
        self._writer.add_scalars(int(step * batch), twins, wall)

    def log_eval(self, step: int, **metrics: Any) -> None:
        """Log evaluation results at ``step`` as ``eval/<name>`` (e.g. ``loss=0.3, acc=0.9``)."""
        step = _step(step)
        values = [(eval_tag(key), _number(key, value)) for key, value in metrics.items()]
        if self._perplexity and "loss" in metrics:
            values.append(("eval/perplexity", perplexity(_number("loss", metrics["loss"]))))
        for tag, value in values:
            if not math.isfinite(value):
                self.nonfinite[tag] = self.nonfinite.get(tag, 0) + 1
        self._writer.add_scalars(step, values)
        if values and self._progress.enabled:
            shown = ", ".join(f"{tag} {value:.4g}" for tag, value in values)
            print(f"[mindwatch] eval at step {step} | {shown}", flush=True)

    def log_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
        """Log scalars under exactly the given tags (no namespace added)."""
        step = _step(step)
        self._writer.add_scalars(step, [(tag, _number(tag, v)) for tag, v in scalars.items()])

    def log_histogram(self, tag: str, values: Any, step: int) -> None:
        """Log a histogram (bucketed on the writer's thread; the array is copied now)."""
        self._writer.add_histogram(tag, values, _step(step))

    def mark_resume(self, step: int) -> None:
        """This attempt continues the run at ``step``; earlier points at ``>= step`` are void.

        Writes TensorBoard's purge marker (``SessionLog.START`` at ``step``): readers
        then hide what a crashed attempt logged at ``step`` and beyond, so the curve
        neither folds back nor shows two values for a step. ``run.json`` records the
        step in this attempt's entry.
        """
        step = _step(step)
        self._writer.add_session_start(step)
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
        if self._hparams:
            values = hparams_session_values(self._hparams, start_time_secs=self._start_time)
            self._writer.add_values(0, values)
            self._run.write()

    @property
    def hparams(self) -> dict[str, HParamValue]:
        return dict(self._hparams)

    def log_text(self, tag: str, text: str, step: int = 0) -> None:
        """Log markdown text (TensorBoard's TEXT tab)."""
        self._writer.add_text(tag, text, _step(step))

    def set_total_steps(self, total_steps: Optional[int]) -> None:
        """Tell the progress display how many steps the run takes (for the bar and ETA)."""
        self.total_steps = total_steps
        self._progress.close()
        self._progress = ProgressReporter(
            every=self.config.print_every, mode=self.config.progress, total=total_steps
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

    @property
    def writer(self) -> EventFileWriter:
        return self._writer

    @property
    def stats(self) -> WriterStats:
        return self._writer.stats

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Block until everything logged so far is handed to the OS."""
        return self._writer.flush(timeout)

    def close(self, timeout: Optional[float] = None) -> None:
        """Write everything, close the files and mark the run finished. Idempotent.

        ``run.json`` then says ``finished``, or ``terminated`` when SIGTERM closed it.
        """
        if self._closed:
            # Closing already (e.g. SIGTERM during the program's own close()): wait for
            # the files like the first caller does, then leave run.json to it.
            self._writer.close(timeout)
            return
        self._closed = True
        lifecycle.unregister(self)
        self._progress.close()
        if not self._hparams_written:
            self._write_hparams()
        if self._hparams:
            ok = not lifecycle.signal_received
            self._writer.add_values(
                self.last_step or 0, hparams_session_end_values(ok, time.time())
            )
        self._writer.close(timeout)
        stats = self._writer.stats
        self._run.finish(
            status="terminated" if lifecycle.signal_received else "finished",
            last_step=self.last_step,
            steps_logged=self.steps_logged,
            nonfinite=dict(self.nonfinite),
            points_dropped=stats.points_dropped,
            write_errors=stats.write_errors,
            event_files=[os.path.basename(f) for f in stats.files],
        )
        if self.nonfinite:
            log.warning(
                "mindwatch: non-finite values were logged: %s",
                ", ".join(f"{tag} x{n}" for tag, n in sorted(self.nonfinite.items())),
            )

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Monitor(logdir={str(self.logdir)!r}, last_step={self.last_step})"
