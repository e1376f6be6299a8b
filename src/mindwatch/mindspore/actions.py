"""The training loop's side of mindwatch's controls, applied at step boundaries.

The rules run off the training thread and hand back what is due at a step as one value,
:class:`~mindwatch.alerts.StepControls` (:meth:`mindwatch.Monitor.end_step`, which the
callback asks for after each step); the dynamic learning rate decides on this thread
(it is a few comparisons). :meth:`LoopActions.apply` carries out the value it is given,
and never asks the monitor for more:

* ``keep_last_stable``: link the newest ``ModelCheckpoint`` file saved before the
  alert's step as ``last_stable-<name>`` (:mod:`.stable`), record it in ``run.json``
  (a later alert, e.g. the divergence that follows a NaN, keeps the one kept before the
  earliest anomaly),
  and hand the alert back to the monitor, which writes it naming the file. On the
  training thread, so it never races ``ModelCheckpoint``'s own rotation;
* ``scale_lr`` (``alerts.dynamic_lr``): scale the optimizer's lr in place from the next
  update on, and report it as an ``info`` alert;
* ``stop``: ``run_context.request_stop()``; ``Model.train`` ends after this step.

It also reads the sample ids of each batch (``alerts.sample_ids``) for the monitor,
which puts them into an alert of that step.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from mindwatch.alerts import Alert, Control, StepControls
from mindwatch.alerts.dynamic_lr import LRController
from mindwatch.config import MonitorConfig
from mindwatch.mindspore.lr import LearningRateReader, LearningRateScaler
from mindwatch.mindspore.stable import StableKeeper
from mindwatch.monitor import Monitor

__all__ = ["LoopActions"]

_MAX_IDS = 1024  # sample ids kept per batch


class LoopActions:
    """Controls and per-batch facts of one ``Model.train`` run, on the training thread."""

    def __init__(self, config: MonitorConfig, rank: int) -> None:
        self.config = config
        self.rank = rank
        self.keeper: Optional[StableKeeper] = None
        self.dynamic_lr: Optional[tuple[LRController, LearningRateScaler]] = None
        self.steps_per_epoch: Optional[int] = None
        # The step of the earliest anomaly a last-stable checkpoint was kept for: a later
        # alert (a divergence that follows a NaN) must not move it past that step.
        self.anomaly_at: Optional[int] = None

    def begin(self, cb: Any, optimizer: Any, monitor: Monitor) -> None:
        """At train begin: find the checkpoints to keep, make the lr scalable."""
        self.steps_per_epoch = int(cb.get("batch_num") or 0) or None
        monitor.steps_per_epoch = self.steps_per_epoch
        self.keeper = StableKeeper(cb.get("list_callback"))
        self.anomaly_at = None
        monitor.keep_checkpoints(bool(self.keeper.checkpointers))
        self.dynamic_lr = None
        if self.config.alerts.dynamic_lr.enabled and optimizer is not None:
            scaler = LearningRateScaler(optimizer)
            if scaler.prepare():  # before the first step compiles the graph
                self.dynamic_lr = (LRController(self.config.alerts.dynamic_lr), scaler)

    def note_sample_ids(self, step: int, cb: Any, monitor: Monitor) -> None:
        """``alerts.sample_ids``: this step's batch ids, for an alert at this step."""
        batch = cb.get("train_dataset_element")
        position = self.config.alerts.sample_ids
        if batch is None or position is None or position >= len(batch):
            return
        ids = np.asarray(batch[position].asnumpy()).reshape(-1)[:_MAX_IDS].tolist()
        monitor.log_sample_ids(step, ids)

    def nonfinite_samples(self, step: int, cb: Any, monitor: Monitor) -> None:
        """A non-finite loss or gradient norm: which samples of the batch held NaN or Inf
        in an input, for the flight recorder (their ids with ``alerts.sample_ids``, else their
        positions in the batch as ``#i``). Only on such a step: it copies the batch."""
        recorder = monitor.flight_recorder
        batch = cb.get("train_dataset_element")
        if recorder is None or not batch:
            return
        position = self.config.alerts.sample_ids
        columns = [
            np.asarray(t.asnumpy()) if hasattr(t, "asnumpy") else np.asarray(t) for t in batch
        ]
        rows = columns[0].shape[0] if columns and columns[0].ndim else 0
        if rows == 0:
            return
        bad = np.zeros(rows, dtype=bool)
        for j, data in enumerate(columns):
            if j == position or data.ndim == 0 or data.shape[0] != rows:
                continue
            if np.issubdtype(data.dtype, np.floating):
                bad |= ~np.isfinite(data.reshape(rows, -1)).all(axis=1)
        if not bad.any():
            return
        where = np.flatnonzero(bad)[:_MAX_IDS]
        if position is not None and position < len(columns):
            ids = columns[position].reshape(rows, -1)[where, 0].tolist()
        else:
            ids = [f"#{int(i)}" for i in where]
        recorder.add_nonfinite_samples(step, ids)

    def adjust_lr(
        self, step: int, grad_norm: float, monitor: Monitor, lr: Optional[LearningRateReader]
    ) -> None:
        """``alerts.dynamic_lr``: the controller's decision, applied now."""
        if self.dynamic_lr is None:
            return
        controller, scaler = self.dynamic_lr
        control = controller.observe(step, {controller.settings.metric: grad_norm})
        if control is None or control.factor is None:
            return
        scaler.apply(control.factor)
        if lr is not None:
            lr.invalidate()
        if control.alert is not None:
            control.alert.rank = self.rank
            control.alert.run = monitor.logdir.name
            monitor.report(control.alert)

    def wants_verdicts(self, cb: Any) -> bool:
        """Whether the rules' verdicts on every step so far must be in before this step
        ends: a ``ModelCheckpoint`` saves on it (and may rotate old files away), so the
        checkpoint a verdict asks to keep must be chosen while it is still there."""
        keeper = self.keeper
        return (
            keeper is not None and bool(self.config.alerts.last_stable_on) and keeper.save_due(cb)
        )

    def apply(self, due: StepControls, monitor: Monitor, run_context: Any = None) -> None:
        """Carry out what is due: keep last stable checkpoints (the alert then goes back
        to the monitor, naming the file), and stop (``alerts.stop_on``: ``Model.train``
        ends after this step)."""
        for control in due.controls:
            if control.kind == "keep_last_stable" and control.alert is not None:
                self._keep_last_stable(control, monitor)
        if run_context is not None and due.stop:
            run_context.request_stop()

    def finish(self, due: StepControls, monitor: Monitor) -> None:
        """At train end, given what is due once the rules judged every step: keep what
        it asks for; then the monitor (which may outlive this run: one passed in) no
        longer holds alerts back for a checkpoint nobody will keep."""
        self.apply(due, monitor)
        if self.keeper is not None and self.keeper.checkpointers:
            monitor.keep_checkpoints(False)
        self.keeper = None

    def _keep_last_stable(self, control: Control, monitor: Monitor) -> None:
        alert: Alert = control.alert  # type: ignore[assignment]
        keeper = self.keeper
        kept = None
        earlier = self.anomaly_at is not None and self.anomaly_at <= alert.step
        if keeper is not None and not earlier:  # the first anomaly, or one before it
            kept = keeper.keep(before=alert.step, steps_per_epoch=self.steps_per_epoch)
        if kept is not None:
            self.anomaly_at = alert.step
            step = StableKeeper.step_of(kept, self.steps_per_epoch)
            alert.extra["last_stable"] = str(kept)
            done = f"kept {kept.name} as last stable"
            alert.action = f"{alert.action}; {done}" if alert.action else done
            monitor.record(
                last_stable={"path": str(kept), "step": step, "alert": alert.rule, "at": alert.step}
            )
        monitor.report(alert)
