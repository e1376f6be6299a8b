"""``TrainingMonitor``: TensorBoard curves from ``Model.train`` with no change to the model.

    from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell

    model = Model(TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss_fn), opt))
    model.train(epochs, dataset, callbacks=[TrainingMonitor(logdir="runs/exp1")])

The callback only turns ``run_context`` into :class:`mindwatch.Monitor` calls; the
Monitor does the rest off the training thread. What it reads each step:

* **loss** from ``net_outputs``: a Tensor, or the first item of a tuple.
  ``(loss, grad_norm, squared_norms)`` from :class:`TrainOneStepWithGradNormCell`
  (``(loss, grad_norm)`` with ``layer_norms=False``),
  ``(loss, overflow, loss_scale)`` from ``nn.TrainOneStepWithLossScaleCell`` and
  MindFormers' ``(loss, overflow, loss_scale, lr, global_norm[, local_norm, size])``
  are recognised by the train cell's class hierarchy (:mod:`mindwatch.mindspore.outputs`).
* **learning rate** of the update that just ran: from the outputs when the train cell
  returns it (MindFormers), else from the optimizer (fixed, schedule, per-step list, or
  per group: ``train/lr`` is the first parameter's lr, and when groups differ every
  group gets ``train/lr/<name>``, e.g. ``train/lr/learning_rate_group_1`` for the
  user's group 1); see :mod:`mindwatch.mindspore.lr`.
* **time**: ``perf/step_time_ms`` from one step's end to the next (everything the job
  spends per step), and its two parts, measured by this callback's own step-begin and
  step-end hooks: ``perf/compute_ms`` (begin to end: the train cell, and the callbacks
  that run before this one; what MindFormers calls ``iteration-time``) and
  ``perf/data_wait_ms`` (the previous step's end to this step's begin: waiting for the
  next batch, and the callbacks after this one).
* **model FLOPs** per step in GRAPH mode, counted by MindSpore's compiler on the
  compiled train graph (matrix multiplications, forward and backward: the count
  MindFormers uses), for ``perf/tflops_per_device`` and ``perf/mfu``; see
  :mod:`mindwatch.mindspore.flops`.
* **step** ``cb_params.cur_step_num``, which already continues from
  ``cb_params.initial_step`` when MindSpore resumes with one. ``Model.train(...,
  initial_epoch=E)`` however restarts ``cur_step_num`` at 0 (MindSpore 2.10); mindwatch
  then adds ``E * batch_num`` so the step axis continues instead of folding back.
* **resume**: when the first step is not 1 (``initial_epoch``, ``initial_step``), the
  run folder gets TensorBoard's purge marker at that step, so points a crashed attempt
  wrote beyond the checkpoint are hidden and each step has one value
  (:meth:`mindwatch.Monitor.mark_resume`); ``run.json`` lists both attempts.
* **epoch**, and **samples per step** from the dataset's batch size, for
  ``perf/samples_per_s``.

In dataset sink mode on Ascend the callback fires once per sink and ``cur_step_num``
jumps by the sink size; the Monitor then shares the sink's wall time among its steps
and logs the loss at the sink's last step (the only one MindSpore returns). The total
for the progress line and ETA is ``epoch_num x batch_num`` (MindSpore trains ``sink_size``
steps per epoch in sink mode and sets ``batch_num`` to it); a step beyond that total
recounts it as the dataset's size x the epochs, or drops it, so the line never reads
``step 120/1``.

A monitoring failure never stops training: anything unexpected while reading a step is
logged once as a warning and that reading is skipped.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
from mindspore.train import Callback

from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig
from mindwatch.events.writer import LogDirError, PathLike, absolute_logdir
from mindwatch.metrics.straggler import InputWaitMedians
from mindwatch.metrics.system import host_peak_rss_mb
from mindwatch.metrics.timing import Every
from mindwatch.mindspore.actions import LoopActions
from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell
from mindwatch.mindspore.collective import (
    MindSporeCollective,
    pipeline_loss_ranks,
    rank_and_world_size,
)
from mindwatch.mindspore.compute_probe import ComputeBenchmark
from mindwatch.mindspore.device_memory import device_id, device_memory_probe, device_target
from mindwatch.mindspore.flops import device_peak_tflops, graph_flops_per_step
from mindwatch.mindspore.layers import LayerRecorder
from mindwatch.mindspore.lr import LearningRateReader, find_optimizer
from mindwatch.mindspore.model import grad_norm_hint
from mindwatch.mindspore.outputs import (
    OutputLayout,
    output_layout,
    squared_norms_array,
    unpack_outputs,
)
from mindwatch.mindspore.tensors import to_float
from mindwatch.monitor import Monitor
from mindwatch.rules.straggler import BENCH_RANKS, StragglerRule
from mindwatch.run.claim import earlier_run
from mindwatch.run.lifecycle import EXIT_TIMEOUT_SECS

__all__ = ["TensorBoard", "TrainingMonitor"]

log = logging.getLogger(__name__)

# The longest the training thread waits for mindwatch's own threads to go idle before
# the compute micro-benchmark (rank 0's writing after a reduction takes milliseconds).
_SETTLE_SECS = 0.5


def ms_device_target() -> Optional[str]:
    """MindSpore's device target ("CPU", "Ascend", "GPU"), or None if it cannot tell."""
    try:
        import mindspore as ms

        return str(ms.get_context("device_target"))
    except Exception:
        return None


def _skipped_epoch_steps(cb: Any) -> int:
    """Steps of the epochs ``initial_epoch`` skipped, when ``cur_step_num`` ignores them."""
    epoch = int(cb.get("cur_epoch_num") or 1)
    batches = int(cb.get("batch_num") or 0)
    step = int(cb.get("cur_step_num") or 0)
    skipped = (epoch - 1) * batches
    return skipped if skipped and step <= batches else 0


def _add_device_telemetry(monitor: Monitor) -> None:
    """What only MindSpore can tell the sampler: this rank's device (npu-smi follows
    it) and the runtime's memory counters (none on CPU). Once per monitor."""
    telemetry = monitor.telemetry
    if telemetry is None or "device" in telemetry.sources:
        return
    telemetry.use_device(device_id(), device_target())
    if telemetry.settings.device_memory:
        probe = device_memory_probe()
        if probe is not None:
            telemetry.add_probe("device_memory", probe, "mindspore.runtime")


class TrainingMonitor(Callback):  # type: ignore[misc]
    """A ``mindspore.train.Callback`` that writes TensorBoard curves of a training run.

    Args:
        config: a :class:`~mindwatch.MonitorConfig` or a dict of its fields.
        logdir: run folder (overrides ``config.logdir``). Created now; an unwritable
            folder raises :class:`~mindwatch.LogDirError` here, before training.
        monitor: an existing :class:`~mindwatch.Monitor` to drive instead (it is flushed,
            not closed, when training ends; without it, the callback's own monitor is
            closed then, waiting at most 30 s for a hung file system).
        eval_dataset: a dataset whose mean loss is written as ``eval/loss`` every
            ``eval_every`` steps (computed with the train cell's loss network).
        eval_every: steps between such evaluations (needs ``eval_dataset``).

    ``Model.fit(..., valid_dataset=...)`` results, and ``Model.eval(..., callbacks=
    [monitor])`` results, are written as ``eval/<metric>`` at the last training step,
    with MindSpore's ``eval_loss`` as ``eval/loss``.

    Under data parallelism give the callback to **every** rank (after
    ``mindspore.communication.init()``): rank 0 writes the one global run, each metric
    reduced across ranks as it declares (loss averaged, step time the slowest rank's,
    throughput summed, lr and grad norm as they are), plus the spread across ranks
    (``ranks/loss_max``, ``ranks/loss_argmax``, ...); ``per_rank: true`` adds each
    rank's own values in ``<logdir>/rank_<r>/``. Only rank 0 prints progress. Under
    pipeline parallelism ``train/loss`` comes from the last stage. See
    ``docs/multicard.md``.
    """

    def __init__(
        self,
        config: Union[MonitorConfig, Mapping[str, Any], str, Path, None] = None,
        *,
        logdir: Optional[PathLike] = None,
        monitor: Optional[Monitor] = None,
        eval_dataset: Any = None,
        eval_every: Optional[int] = None,
    ) -> None:
        super().__init__()
        if (eval_dataset is None) != (eval_every is None):
            raise ValueError("eval_dataset and eval_every go together: give both or neither")
        if eval_every is not None and eval_every < 1:
            raise ValueError(f"eval_every must be >= 1 step, got {eval_every!r}")
        self.config = MonitorConfig.from_any(config)
        self._owns_monitor = monitor is None
        self.rank, self.world_size = rank_and_world_size()
        self._base_logdir = logdir if logdir is not None else self.config.logdir
        # When the folder already holds a run, whether this one resumes it is only known
        # when training starts (its first step): the Monitor is opened then.
        self._monitor: Optional[Monitor] = monitor
        if monitor is None and not self._folder_has_earlier_run():
            self._monitor = self._new_monitor()
        self.eval_dataset = eval_dataset
        self.eval_every = eval_every
        self._lr: Optional[LearningRateReader] = None
        self._optimizer: Any = None
        self._layout = OutputLayout()
        self._lr_from_outputs = False
        self._step_begin: Optional[float] = None
        self._last_end: Optional[float] = None
        self._flops_pending = False
        self._prev_step: Optional[int] = None
        self._samples: Optional[int] = None
        self._loss_net: Any = None
        self._next_eval = 0
        self._epochs_total = 0
        self._start_step = 0
        self._total: Optional[int] = None  # the total steps this callback announced
        self._step_offset: Optional[int] = None
        self._trained = False  # a Model.train with this callback has had its first step
        self._warn = WarnOnce(log)
        self._layers = LayerRecorder(self.config)
        self._forensics_layers = False  # the flight recorder gets the squared norms
        self._memory = Every(self.config.memory_every)
        self._device_memory = False
        straggler = self.config.alerts.rule(StragglerRule)
        self._input_waits: Optional[InputWaitMedians] = (
            InputWaitMedians(straggler.interval)
            if straggler.enabled and self.world_size > 1
            else None
        )
        # The compute micro-benchmark, agreed in a reduction so that every rank runs it
        # at the same step (made at its first run, once MindSpore's device is set).
        self._bench_every_s = straggler.bench_every_s if self._input_waits is not None else 0.0
        self._bench: Optional[ComputeBenchmark] = None
        self._bench_at = time.monotonic()  # the last run (or the start)
        self._bench_values: dict[str, float] = {}  # the last run's, for the next step
        self._actions = LoopActions(self.config, self.rank)

    def _folder_has_earlier_run(self) -> bool:
        """Whether the run folder holds a run another process wrote (then this one resumes
        it, or goes to a new folder next to it: :mod:`mindwatch.run.claim`). Checks now
        that the folder could be written, so a wrong path still fails before training."""
        folder = self._base_folder()
        if folder is None or self.config.run_name:
            return False
        if earlier_run(folder, rank=self.rank) is None:
            return False
        if not os.access(folder.parent, os.W_OK | os.X_OK):
            raise LogDirError(
                f"log folder '{folder}' holds an earlier run and its parent folder cannot be "
                "written for a new run next to it. Pass another logdir."
            )
        return True

    @property
    def monitor(self) -> Monitor:
        """The :class:`~mindwatch.Monitor` this callback drives (opened when training
        starts if the folder held an earlier run; asked for before, a new run)."""
        if self._monitor is None:
            self._monitor = self._new_monitor(resume=False)
        return self._monitor

    @monitor.setter
    def monitor(self, monitor: Monitor) -> None:
        self._monitor = monitor

    def _open_pending(self, cb: Any) -> None:
        """Open the Monitor deferred by an earlier run in the folder: resuming it when
        training starts after step 0 (``initial_epoch``, ``initial_step``), else a new
        run in a new folder."""
        base = self._start_step + _skipped_epoch_steps(cb)
        self._monitor = self._new_monitor(resume=base > 0)
        self._attach(cb)

    def _new_monitor(self, folder: Optional[Path] = None, *, resume: bool = False) -> Monitor:
        """The callback's own Monitor; ``folder``: reopen that run folder (no new name);
        ``resume``: continue the run in the configured folder."""
        config, logdir = self.config, self._base_logdir
        if folder is not None:
            config, logdir = config.model_copy(update={"run_name": None}), folder
            resume = True
        collective = None
        if self.world_size > 1:
            if MindSporeCollective.available():
                collective = MindSporeCollective()
            else:
                log.warning(
                    "mindwatch: %d ranks but mindspore.communication.init() has not run "
                    "yet, so values cannot be reduced across ranks: each rank writes its "
                    "own (rank 0 the run folder, rank r its rank_<r>/ sub-folder). Call "
                    "init() before creating the callback.",
                    self.world_size,
                )
        target = device_target()
        return Monitor(
            logdir,
            config,
            resume=resume,
            world_size=self.world_size,
            rank=self.rank,
            collective=collective,
            loss_ranks=pipeline_loss_ranks(self.world_size),
            # Where this rank runs, for run.json's ranks and alerts ("rank 1 (node, NPU 1)").
            device=target if target != "unknown" else None,
            device_id=device_id(),
        )

    @property
    def logdir(self) -> Any:
        """The run folder; before training, when the configured folder holds an earlier
        run, that folder (training may resume it or move next to it: asking does not
        decide)."""
        folder = self._base_folder()
        if self._monitor is None and folder is not None:
            return folder
        return self.monitor.logdir

    def _base_folder(self) -> Optional[Path]:
        """The configured run folder, absolute (None if none is configured), resolved as
        Monitor resolves it: a LogDirError for one that cannot be (empty, a NUL, not a
        path), before anything reads it."""
        base = self._base_logdir
        return None if base is None else absolute_logdir(base)

    def _live_monitor(self) -> Monitor:
        if self._monitor is None:
            return self.monitor  # asked for outside training (Model.eval alone): a new run
        if self.monitor.closed and self._owns_monitor:  # used again after training ended
            last_step = self.monitor.last_step
            self.monitor = self._new_monitor(self.monitor.logdir)  # the same run folder
            self.monitor.continue_at(last_step)  # e.g. Model.eval results belong there
        return self.monitor

    # --------------------------------------------------------------- train hooks

    def on_train_begin(self, run_context: Any) -> None:
        self._guarded("train begin", lambda: self._train_begin(run_context.original_args()))

    def _train_begin(self, cb: Any) -> None:
        optimizer = self._optimizer = find_optimizer(cb)
        self._lr = LearningRateReader(optimizer) if optimizer is not None else None
        train_network = cb.get("train_network")
        self._layout = output_layout(train_network)
        self._layers = self._layer_recorder(train_network)
        self._forensics_layers = False  # the recorder gets the squared norms (_attach)
        self._samples = self._guarded(
            "batch size", lambda: cb.get("train_dataset").get_batch_size()
        )
        self._loss_net = getattr(cb.get("train_network"), "network", None)
        self._guarded(
            "parameters",
            lambda: self._layers.begin(cb.get("train_network"), cb.get("network"), optimizer),
        )
        self._device_memory = ms_device_target() not in ("CPU", None)
        self._flops_pending = True
        self._start_step = int(cb.get("cur_step_num") or 0)
        self._epochs_total = int(cb.get("epoch_num") or 0) * int(cb.get("batch_num") or 0)
        self._step_offset = None  # known at the first step (initial_epoch)
        self._total = None
        if self._monitor is not None:
            self._attach(cb)
        # else: opened at the first epoch's begin, when a resume can be told (_open_pending)

    def _attach(self, cb: Any) -> None:
        """What training begins with that needs the Monitor."""
        monitor, optimizer = self._live_monitor(), self._optimizer
        self._actions.begin(cb, optimizer, monitor)
        self._guarded("flight recorder", lambda: self._prepare_recorder(cb, monitor))
        # MindFormers' cells return the lr the optimizer applied, computed in the graph;
        # but from their own copy of the schedule, which dynamic_lr does not scale.
        dynamic_lr = self._actions.dynamic_lr is not None
        self._lr_from_outputs = self._layout.lr_from_outputs and not dynamic_lr
        self._guarded("device peak", lambda: self._set_device_peak(monitor))
        self._guarded("hardware telemetry", lambda: _add_device_telemetry(monitor))
        self._guarded("hyperparameters", lambda: self._log_hparams(cb, optimizer))
        monitor.restart_clock()
        self._last_end = time.perf_counter()
        self._step_begin = None

    def _prepare_recorder(self, cb: Any, monitor: Monitor) -> None:
        """Name the per-parameter squared norms the train cell returns, in its order
        (the order of its ``weights``: the gradients'), for the flight recorder; or tell
        it why there are none (its layout's reason), so alerts can say so."""
        recorder = monitor.flight_recorder
        train_network = cb.get("train_network")
        if recorder is None:
            return
        if self._layout.provides_squared_norms(train_network):
            weights = getattr(train_network, "weights", None) or ()
            recorder.set_layers([p.name for p in weights], squared_norms_array)
        if not recorder.layer_names:
            recorder.no_layers(self._layout.cell.no_layer_norms, type(train_network).__name__)
        self._forensics_layers = bool(recorder.layer_names)

    def on_train_epoch_begin(self, run_context: Any) -> None:
        if self._monitor is None:
            self._guarded("run folder", lambda: self._open_pending(run_context.original_args()))

    def _layer_recorder(self, train_network: Any) -> LayerRecorder:
        """The per-layer recorder; a train cell built asking for per-parameter gradient
        norms every step (MindFormers' ``local_norm=True``, or ``TrainOneStepWith
        GradNormCell(layer_norms=True)``) means their curves: with ``layer_norms_every``
        unset they are written every step. A cell that returns them by default (for the
        flight recorder) does not: hundreds of curves a step are the user's choice."""
        config = self.config
        if config.layer_norms_every is None and self._layout.asks_layer_curves(train_network):
            log.info(
                "mindwatch: the train cell returns per-parameter gradient norms every step; "
                "writing layers/grad_norm/<param> every step (set layer_norms_every to thin)"
            )
            config = config.model_copy(
                update={"layer_norms_every": 1, "layer_norms_of": ["gradients"]}
            )
        return LayerRecorder(config)

    def _set_device_peak(self, monitor: Monitor) -> None:
        """The device's peak TFLOPS for perf/mfu, when the config does not give it."""
        if self.config.peak_tflops is not None:
            return
        found = device_peak_tflops()
        if found is not None:
            monitor.set_peak_tflops(found[0], source=found[1])

    def _count_flops(self, cb: Any) -> None:
        """After the first step compiled the train graph: its FLOPs per step."""
        self._flops_pending = False
        if self.config.flops_per_sample is not None:
            return  # the user's count wins; MindSpore's is not needed
        counted = graph_flops_per_step(cb.get("train_network"), self.world_size)
        if counted is not None:
            self.monitor.set_model_flops(counted[0], source=counted[1])

    def _log_hparams(self, cb: Any, optimizer: Any) -> None:
        """What the run's hyperparameters are, as far as the callback can see them."""
        import mindspore as ms

        seen: dict[str, Any] = {
            "train_cell": type(cb.get("train_network")).__name__,
            "batch_size": self._samples,
            "epochs": cb.get("epoch_num"),
            "steps_per_epoch": cb.get("batch_num"),
            "world_size": self.world_size,
            "mode": "GRAPH" if ms.get_context("mode") == ms.GRAPH_MODE else "PYNATIVE",
            "dataset_sink_mode": bool(cb.get("dataset_sink_mode")),
        }
        if optimizer is not None:
            seen["optimizer"] = type(optimizer).__name__
            lr = optimizer.learning_rate
            if isinstance(lr, ms.Parameter):
                seen["lr"] = to_float(lr, "lr")
            else:
                seen["lr_schedule"] = type(lr).__name__
        if isinstance(cb.get("train_network"), TrainOneStepWithGradNormCell):
            clip = cb.get("train_network").clip
            seen["clip_grad_norm"] = (
                to_float(cb.get("train_network").clip_norm, "clip_grad_norm") if clip else 0.0
            )
        given = self.config.hparams  # values the user set win
        self.monitor.log_hparams(
            {k: v for k, v in seen.items() if v is not None and k not in given}
        )

    def _first_step(self, cb: Any) -> None:
        """What can only be known once ``cur_epoch_num`` is set: the resume offset."""
        offset = _skipped_epoch_steps(cb)
        last = self.monitor.last_step
        if self._trained and self._start_step + offset == 0 and last:
            # This callback trained before in this process, and this Model.train starts
            # from step 0 again (no initial_epoch): it goes on training the same network,
            # so its steps follow the last one instead of drawing over steps 1, 2, ...
            offset = last
        self._step_offset = offset
        self._trained = True
        base = self._start_step + offset  # the step before the first one of this run
        self._prev_step = base
        self.monitor.rebase_clock(base)
        if base > 0 and (last is None or base < last):
            # Resumed (initial_epoch / initial_step) in a new process, or stepped back in
            # this one: void what was logged beyond the checkpoint. A Model.train that
            # continues where this process's previous one stopped needs no marker.
            self.monitor.mark_resume(base + 1)
        if self.monitor.total_steps is None and self._epochs_total:
            self._total = base + self._epochs_total
            self.monitor.set_total_steps(self._total)
        if self.eval_every:
            self._next_eval = (base // self.eval_every + 1) * self.eval_every
        self._guarded("grad norm", lambda: self._tell_missing_grad_norm(cb))

    def _tell_missing_grad_norm(self, cb: Any) -> None:
        """Once, at the first step: a train cell that returns no gradient norm gives no
        ``train/grad_norm`` (nor the rules on it); say how to get one."""
        if not self.monitor.writes_shared:
            return  # rank 0 says it for the job
        outputs = cb.get("net_outputs")
        if outputs is None or "grad_norm" in unpack_outputs(outputs, self._layout):
            return
        self._warn_once("grad_norm", grad_norm_hint(self._layout, cb.get("train_network")))

    def _recount_total(self, cb: Any, step: int) -> None:
        """A step beyond the total announced at train begin: ``epoch_num x batch_num``
        did not count the steps (a launcher that sets ``batch_num`` to the sink size or
        the number of sinks). Count them as the dataset's size x the epochs instead, or,
        if that is exceeded too, show no total (and no ETA) rather than ``step 120/1``."""
        epochs = int(cb.get("epoch_num") or 0)
        base = self._start_step + (self._step_offset or 0)
        total: Optional[int] = None
        if epochs and cb.get("train_dataset") is not None:
            counted = base + epochs * int(cb.get("train_dataset").get_dataset_size())
            total = counted if counted >= step else None
        # None: unknown from now on; the check on each step is then never true again
        self._total = total
        self.monitor.set_total_steps(total)

    def on_train_step_begin(self, run_context: Any) -> None:
        if self._monitor is None:  # driven without an epoch begin
            self._guarded("run folder", lambda: self._open_pending(run_context.original_args()))
        self._step_begin = time.perf_counter()

    def _step_parts(self, steps: int) -> dict[str, float]:
        """``perf/compute_ms`` and ``perf/data_wait_ms`` of the step(s) that just ended
        (a sink of ``steps`` steps shares them)."""
        begin, last_end = self._step_begin, self._last_end
        if begin is None:
            return {}
        now = time.perf_counter()
        parts = {"perf/compute_ms": (now - begin) * 1000.0 / steps}
        if last_end is not None and begin >= last_end:
            parts["perf/data_wait_ms"] = (begin - last_end) * 1000.0 / steps
        return parts

    def on_train_step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        if self._monitor is None:
            self._guarded("run folder", lambda: self._open_pending(cb))
        try:
            if self._step_offset is None:
                self._first_step(cb)
            step = int(cb.cur_step_num) + (self._step_offset or 0)
        except Exception as exc:  # monitoring must never take training down
            self._warn_once("step", f"could not read the step number: {exc!r}")
            return
        if self._total is not None and step > self._total:
            self._guarded("total steps", lambda: self._recount_total(cb, step))
        # In sink mode (Ascend) one call covers several steps.
        previous, self._prev_step = self._prev_step, step
        parts = self._step_parts(step - previous if previous is not None and step > previous else 1)
        if self._input_waits is not None and "perf/data_wait_ms" in parts:
            self._input_waits.add(parts["perf/data_wait_ms"], parts["perf/compute_ms"])
        if self._flops_pending:
            self._guarded("model FLOPs", lambda: self._count_flops(cb))
        if self.config.alerts.sample_ids is not None:
            self._guarded(
                "sample ids", lambda: self._actions.note_sample_ids(step, cb, self.monitor)
            )
        if self._forensics_layers:  # a reference to the cell's output: no device sync
            recorder = self.monitor.flight_recorder
            if recorder is not None:
                recorder.add_layers(step, self._layout.squared_norms(cb.get("net_outputs")))
        if self._layers.active and self.monitor.writes_shared:  # the same on every rank
            histograms = self._layers.histograms_due(step)
            self._guarded(
                "layer metrics",
                lambda: self._layers.record(
                    self.monitor,
                    step,
                    self._layout.squared_norms(cb.get("net_outputs")),
                    histograms=histograms,
                    loss_net=self._loss_net,
                    batch=cb.get("train_dataset_element"),
                ),
            )
        if not self.monitor.collects(step):
            self._maybe_evaluate(step)  # collect_freq: nothing is read on this step
            # ... but a checkpoint may be saved (and an old one rotated away) on it.
            self._guarded("controls", lambda: self._apply_controls(run_context, cb))
            self._last_end = time.perf_counter()
            return
        values = self._guarded("loss", lambda: unpack_outputs(cb.get("net_outputs"), self._layout))
        values = values or {}
        values.update(parts)
        if self._input_waits is not None:
            values.update(self._input_waits.due())
        if self._bench_values:
            values.update(self._bench_values)
            self._bench_values = {}
        if self._lr is not None and not (self._lr_from_outputs and "lr" in values):
            lrs = self._guarded("learning rate", self._lr.read)
            if lrs:
                values["lr"] = lrs[0][1]
                if len({lr for _, lr in lrs}) > 1:
                    values.update({f"train/lr/{name}": lr for name, lr in lrs})
        # A NaN input may give a finite loss (ReLU maps NaN to 0 on some kernels) and a
        # NaN gradient: either one sends us looking for the sample.
        if any(not math.isfinite(values.get(k, 0.0)) for k in ("loss", "grad_norm")):
            self._guarded(
                "non-finite samples",
                lambda: self._actions.nonfinite_samples(step, cb, self.monitor),
            )
        epoch = cb.get("cur_epoch_num")
        if epoch:
            values["epoch"] = float(epoch)
        if self._memory.every and self._memory(step):
            values.update(self._guarded("memory", self._read_memory) or {})
        self._guarded("step", lambda: self.monitor.log_step(step, samples=self._samples, **values))
        if self._bench_every_s:
            self._guarded("compute benchmark", self._maybe_benchmark)
        if "grad_norm" in values:
            grad_norm = values["grad_norm"]
            self._guarded(
                "dynamic lr",
                lambda: self._actions.adjust_lr(step, grad_norm, self.monitor, self._lr),
            )
        self._maybe_evaluate(step)
        self._guarded("controls", lambda: self._apply_controls(run_context, cb))
        self._last_end = time.perf_counter()

    def _maybe_benchmark(self) -> None:
        """Run the micro-benchmark when the reduction that ``log_step`` may just have made
        agreed on it (every rank at this step), once this process's own threads are
        idle; ask for it when it is due on this rank's clock. Its values go with the
        next step logged, on every rank the same."""
        aggregator = self.monitor.aggregator
        if aggregator is None or not aggregator.reducing:
            return
        if aggregator.take_benchmark():
            self.monitor.settle(_SETTLE_SECS)
            if self._bench is None:
                self._bench = ComputeBenchmark(device_target())
            self._bench_values = {**self._bench.run(), BENCH_RANKS: float(self.world_size)}
            self._bench_at = time.monotonic()
            if self._input_waits is not None:
                self._input_waits.disturb()  # the pause let every pipeline run ahead
        elif time.monotonic() - self._bench_at >= self._bench_every_s:
            aggregator.request_benchmark()  # (asking again before it ran changes nothing)

    def _apply_controls(self, run_context: Any, cb: Any) -> None:
        """What the monitor says is due at this step end, carried out by the actions."""
        monitor = self.monitor
        due = monitor.end_step(wait=self._actions.wants_verdicts(cb))
        self._actions.apply(due, monitor, run_context)

    def _read_memory(self) -> dict[str, float]:
        values = {"perf/host_peak_rss_mb": host_peak_rss_mb()}
        if self._device_memory:  # MindSpore's allocator; always 0 on CPU
            import mindspore.runtime

            peak = float(mindspore.runtime.max_memory_allocated())
            values["perf/device_peak_memory_mb"] = peak / (1024.0 * 1024.0)
        return values

    def _maybe_evaluate(self, step: int) -> None:
        if self.eval_every and step >= self._next_eval:
            self._next_eval = (step // self.eval_every + 1) * self.eval_every
            self._evaluate(step)

    def on_train_epoch_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        epoch = int(cb.get("cur_epoch_num") or 0)
        if (
            self._layers.active
            and self.monitor.writes_shared
            and self._layers.epoch_histograms_due(epoch)
        ):
            step = self.monitor.last_step or 0
            self._guarded(
                "histograms",
                lambda: self._layers.record(
                    self.monitor,
                    step,
                    None,
                    norms=False,
                    histograms=True,
                    loss_net=self._loss_net,
                    batch=cb.get("train_dataset_element"),
                ),
            )

    def on_eval_end(self, run_context: Any) -> None:
        self._guarded("evaluation results", lambda: self._eval_end(run_context.original_args()))

    def _eval_end(self, cb: Any) -> None:
        results = cb.get("eval_results") or cb.get("metrics") or {}
        metrics: dict[str, float] = {}
        for key, value in results.items():
            try:
                metrics["loss" if key == "eval_loss" else key] = to_float(value, key)
            except (TypeError, ValueError, IndexError):
                self._warn_once(
                    f"eval:{key}", f"eval metric {key!r} is not a number: {value!r:.50}"
                )
        monitor = self._live_monitor()
        if metrics:
            monitor.log_eval(monitor.last_step or 0, **metrics)
        if self._owns_monitor and not self._in_training(cb):
            monitor.flush()  # a standalone Model.eval: its results are on disk now
        monitor.restart_clock()  # evaluation time is not a training step
        self._last_end = time.perf_counter()  # nor waiting for data

    @staticmethod
    def _in_training(cb: Any) -> bool:
        return cb.get("train_network") is not None and cb.get("train_dataset") is not None

    def on_train_end(self, run_context: Any) -> None:
        # The verdicts on the last steps first, while their checkpoints exist (this
        # callback runs before ModelCheckpoint's own end): a last-stable checkpoint.
        if self._monitor is None:
            return  # training ended before its first epoch: nothing was logged
        self._guarded(
            "controls",
            lambda: self._actions.finish(self.monitor.end_step(wait=True), self.monitor),
        )
        if self._layers.active and self.monitor.writes_shared:
            base = self._start_step + (self._step_offset or 0)
            steps = max(0, (self._prev_step or base) - base)
            epochs = int(run_context.original_args().get("cur_epoch_num") or 0)
            self._guarded("histograms", lambda: self._layers.tell_missing_histograms(steps, epochs))
        # Our own monitor is closed (files complete, run.json finished); one the caller
        # passed in stays open for them to keep logging to, and is only flushed.
        if self._owns_monitor:
            self._guarded("end", lambda: self.monitor.close(timeout=EXIT_TIMEOUT_SECS))
        else:
            self._guarded("end", lambda: self.monitor.flush(timeout=EXIT_TIMEOUT_SECS))

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """MindSpore leaves every callback's context when ``Model.train`` ends, also
        when it raises (then ``on_train_end`` never runs): the run is closed as
        ``failed``, with what was logged written out."""
        monitor = self._monitor
        if exc is not None and self._owns_monitor and monitor is not None and not monitor.closed:
            self._guarded("end", lambda: monitor.abort(exc, timeout=EXIT_TIMEOUT_SECS))

    # --------------------------------------------------------------- helpers

    def _evaluate(self, step: int) -> None:
        if not self.monitor.writes_shared:
            return  # every rank evaluates the same data: rank 0's result is the one written
        if self._loss_net is None:
            self._warn_once("eval", "eval_dataset given but the train cell has no loss network")
            return

        def mean_loss() -> float:
            net = self._loss_net
            net.set_train(False)
            try:
                losses = [
                    to_float(net(*batch))
                    for batch in self.eval_dataset.create_tuple_iterator(num_epochs=1)
                ]
            finally:
                net.set_train(True)
            return float(np.mean(losses)) if losses else float("nan")

        loss = self._guarded("evaluation", mean_loss)
        if loss is not None:
            self.monitor.log_eval(step, loss=loss)
        self.monitor.restart_clock()

    def _guarded(self, what: str, read: Any) -> Any:
        try:
            return read()
        except Exception as exc:  # monitoring must never take training down
            self._warn_once(what, f"could not read the {what}: {exc!r}; skipping it")
            return None

    def _warn_once(self, key: str, message: str) -> None:
        self._warn(key, "mindwatch: %s", message)


class TensorBoard(TrainingMonitor):
    """The ``TensorBoard`` callback the seeds describe, which MindSpore does not ship.

        model.train(epochs, ds, callbacks=[TensorBoard("runs/exp", histogram_interval=1)])

    Args:
        log_dir: the run folder.
        histogram_interval: write parameter and gradient histograms every this many
            epochs (None: none, unless ``collect_specified_data`` names them: then every
            ``collect_freq`` steps).
        update_time: longest delay, in seconds, before logged values reach the disk.
        **options: any other :class:`~mindwatch.MonitorConfig` key (``target``,
            ``layer_norms_every``, ``collect_freq``, ...).

    A thin front over :class:`TrainingMonitor`: same data, same files.
    """

    def __init__(
        self,
        log_dir: PathLike,
        histogram_interval: Optional[int] = None,
        update_time: float = 2.0,
        **options: Any,
    ) -> None:
        config: dict[str, Any] = {"logdir": os.fspath(log_dir), "flush_secs": update_time}
        if histogram_interval is not None:  # else collect_specified_data paces them
            config["histogram_interval"] = histogram_interval
        config.update(options)
        super().__init__(config)
