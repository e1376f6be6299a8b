"""The MindSpore adapter: the only part of mindwatch that imports MindSpore.

``import mindwatch.mindspore`` is free; MindSpore is imported when one of the names
below is first used, so the core and the command line keep working on machines without
it, and an Ascend user's own MindSpore build is used as installed.

* :class:`TrainingMonitor` - a ``mindspore.train.Callback`` for ``Model.train`` /
  ``Model.fit``.
* :class:`TrainOneStepWithGradNormCell` - ``nn.TrainOneStepCell`` that also returns the
  global gradient norm, so ``train/grad_norm`` appears under ``Model.train``.
* :class:`TensorBoard` - the seeds' ``TensorBoard(log_dir, histogram_interval,
  update_time)`` callback, a thin front over ``TrainingMonitor``.
* :class:`SummaryRecord` - MindSpore's ``SummaryRecord`` (``add_value``, ``record``),
  writing TensorBoard event files through a :class:`mindwatch.Monitor`.
* :class:`SummaryCollector` - MindSpore's ``SummaryCollector`` callback, a thin front
  over ``TrainingMonitor`` with MindSpore's arguments.
* :func:`build_callbacks` - the callbacks a config describes (monitor, checkpoints), in
  the order that works.
* :func:`build_model` - ``Model(net, loss_fn, optimizer)`` whose train cell also returns
  the gradient norm.
* :class:`MindSporeCollective` - MindSpore's all-reduce and all-gather, for ``mindwatch.Monitor(...,
  collective=...)`` in a custom data-parallel loop (``TrainingMonitor`` uses it itself).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mindwatch.mindspore.build import build_callbacks
    from mindwatch.mindspore.callback import TensorBoard, TrainingMonitor
    from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell
    from mindwatch.mindspore.collective import MindSporeCollective
    from mindwatch.mindspore.model import build_model
    from mindwatch.mindspore.summary_collector import SummaryCollector
    from mindwatch.mindspore.summary_record import SummaryRecord

__all__ = [
    "MindSporeCollective",
    "SummaryCollector",
    "SummaryRecord",
    "TensorBoard",
    "TrainOneStepWithGradNormCell",
    "TrainingMonitor",
    "build_callbacks",
    "build_model",
]

_LAZY = {
    "TrainingMonitor": "mindwatch.mindspore.callback",
    "TensorBoard": "mindwatch.mindspore.callback",
    "TrainOneStepWithGradNormCell": "mindwatch.mindspore.cells",
    "build_callbacks": "mindwatch.mindspore.build",
    "build_model": "mindwatch.mindspore.model",
    "MindSporeCollective": "mindwatch.mindspore.collective",
    "SummaryCollector": "mindwatch.mindspore.summary_collector",
    "SummaryRecord": "mindwatch.mindspore.summary_record",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mindwatch.mindspore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
