"""``build_callbacks(config)``: the callbacks a config describes, in the order that works.

    model.train(epochs, dataset, callbacks=build_callbacks("monitor.yaml"))

Returned order, and why:

1. :class:`TrainingMonitor` first. MindSpore calls callbacks in list order at every
   hook, so the monitor sees each step before anything else acts on it: a step whose
   loss is NaN is recorded (and, with alerting, can stop training) before a checkpoint
   of that step is written; and the monitor's own per-step cost is not hidden behind a
   checkpoint's seconds of I/O. (A checkpoint step still shows as one longer
   ``perf/step_time_ms`` point: that wall time is really lost to training.)
2. MindSpore's ``ModelCheckpoint`` last, configured from the same config
   (``checkpoint.save_checkpoint_steps``, ``keep_checkpoint_max``, ``prefix``,
   ``directory``; the folder defaults to ``<run folder>/checkpoints`` and is made
   absolute now, so a later ``os.chdir`` does not move it).

The seeds' claim that ``SummaryCollector`` needs ``LossMonitor`` before it (or the
checkpoint callback needs the summary files) does not hold in MindSpore 2.10: no
built-in callback reads another's output; the order matters for the reasons above.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from mindspore.train import CheckpointConfig, ModelCheckpoint

from mindwatch.config import MonitorConfig
from mindwatch.events.writer import PathLike
from mindwatch.mindspore.callback import TrainingMonitor

__all__ = ["build_callbacks"]


def build_callbacks(
    config: Union[MonitorConfig, Mapping[str, Any], str, Path, None] = None,
    *,
    logdir: Optional[PathLike] = None,
    eval_dataset: Any = None,
    eval_every: Optional[int] = None,
) -> list[Any]:
    """The callbacks ``config`` (a MonitorConfig, dict, or YAML path) asks for."""
    cfg = MonitorConfig.from_any(config)
    monitor = TrainingMonitor(cfg, logdir=logdir, eval_dataset=eval_dataset, eval_every=eval_every)
    callbacks: list[Any] = [monitor]
    settings = cfg.checkpoint
    if settings.save_checkpoint_steps:
        directory = settings.directory or os.path.join(monitor.logdir, "checkpoints")
        callbacks.append(
            ModelCheckpoint(
                prefix=settings.prefix,
                directory=os.path.abspath(directory),
                config=CheckpointConfig(
                    save_checkpoint_steps=settings.save_checkpoint_steps,
                    keep_checkpoint_max=settings.keep_checkpoint_max,
                ),
            )
        )
    return callbacks
