"""What a train cell's outputs hold, by the cell's class: loss, grad norm, loss scale, lr.

``Model.train`` hands callbacks the train cell's return value (``net_outputs``). Its
shape depends on the cell:

=====================================  ===============================================
train cell (or any subclass)           outputs
=====================================  ===============================================
``nn.TrainOneStepCell``                ``loss``
:class:`TrainOneStepWithGradNormCell`  ``(loss, grad_norm[, squared_norms])``
``nn.TrainOneStepWithLossScaleCell``   ``(loss, overflow, loss_scale)``
MindFormers' ``MFTrainOneStepCell``,   ``(loss, overflow, loss_scale, lr, global_norm)``
``MFPipelineWithLossScaleCell``        and, with ``local_norm=True``, two more:
                                       ``local_norm`` (one *squared* L2 norm per
                                       gradient, in ``weights`` order, of this rank's
                                       gradients before the gradient reducer) and
                                       ``size``
=====================================  ===============================================

MindFormers' cells subclass ``nn.TrainOneStepWithLossScaleCell``, so they are recognised
first, by any class in their hierarchy (a user's subclass of ``MFTrainOneStepCell``
counts), and never by importing MindFormers. MindFormers returns ``global_norm`` only
with ``use_clip_grad=True``; otherwise the slot is None and no grad norm is recorded.
Its ``lr`` is the learning rate the optimizer applied at this step, computed inside the
graph, so mindwatch reads it from there instead of evaluating the schedule again.

MindFormers' own ``MFLossMonitor`` shows the loss divided by the number of micro
batches under pipeline parallelism, by ``micro_batch_interleave_num`` and by the
gradient accumulation steps (the last two skipped with ``calculate_per_token_loss``);
:func:`output_layout` finds the same divisor from the cells themselves, so
``train/loss`` is the value MindFormers prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from mindspore import nn

from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell
from mindwatch.mindspore.tensors import to_float

__all__ = [
    "MINDFORMERS_CELLS",
    "OutputLayout",
    "is_mindformers_cell",
    "loss_value",
    "mindformers_loss_divisor",
    "output_layout",
    "squared_norms_array",
    "unpack_outputs",
]

MINDFORMERS_CELLS = ("MFTrainOneStepCell", "MFPipelineWithLossScaleCell")
_MAX_DEPTH = 8  # wrappers between the train cell and the model (pipeline, GA, interleave)


@dataclass(frozen=True)
class OutputLayout:
    """How a train cell packs its outputs.

    ``kind`` is 'loss', 'grad_norm', 'loss_scale' or 'mindformers'; ``loss_divisor``
    turns the cell's loss into the per-micro-batch mean MindFormers shows.
    """

    kind: str = "loss"
    loss_divisor: float = 1.0

    def squared_norms(self, outputs: Any) -> Any:
        """The per-parameter squared gradient norms in ``outputs`` (a framework tensor,
        not yet copied to the host), or None when the cell does not return them."""
        if not isinstance(outputs, (tuple, list)):
            return None
        if self.kind == "grad_norm" and len(outputs) >= 3:
            return outputs[2]
        if self.kind == "mindformers" and len(outputs) >= 7:
            return outputs[5]
        return None

    def provides_squared_norms(self, train_network: Any) -> bool:
        """Whether this cell returns per-parameter squared gradient norms every step."""
        if self.kind == "grad_norm":
            return bool(getattr(train_network, "layer_norms", False))
        if self.kind == "mindformers":
            return bool(getattr(train_network, "local_norm", False))
        return False


def is_mindformers_cell(train_network: Any) -> bool:
    """A MindFormers train cell, or a subclass of one (checked by class hierarchy)."""
    return any(
        cls.__name__ in MINDFORMERS_CELLS and cls.__module__.startswith("mindformers")
        for cls in type(train_network).__mro__
    )


def output_layout(train_network: Any) -> OutputLayout:
    """The :class:`OutputLayout` of ``train_network`` (``Model``'s train cell)."""
    if isinstance(train_network, TrainOneStepWithGradNormCell):
        return OutputLayout("grad_norm")
    if is_mindformers_cell(train_network):
        return OutputLayout("mindformers", mindformers_loss_divisor(train_network))
    if isinstance(train_network, nn.TrainOneStepWithLossScaleCell):
        return OutputLayout("loss_scale")
    return OutputLayout("loss")


def _wrapped(cell: Any) -> list[Any]:
    """``cell.network``, its ``network``, ...: the wrappers down to the model."""
    chain: list[Any] = []
    inner = getattr(cell, "network", None)
    while inner is not None and len(chain) < _MAX_DEPTH:
        chain.append(inner)
        inner = getattr(inner, "network", None)
    return chain


def mindformers_loss_divisor(train_network: Any) -> float:
    """What MindFormers' ``MFLossMonitor`` divides the cell's loss by (see the module
    doc): the micro batches of a pipeline, the interleave count, the gradient
    accumulation steps, read from the cells that implement them."""
    import mindspore as ms

    per_token = bool(getattr(train_network, "calculate_per_token_loss", False))
    divisor = 1.0
    stages = ms.get_auto_parallel_context("pipeline_stages") or 1
    if int(stages) > 1 and not per_token:
        divisor *= float(getattr(train_network, "micro_size", 1) or 1)
    for cell in _wrapped(train_network):
        name = type(cell).__name__
        if name == "MicroBatchInterleaved":
            divisor *= float(getattr(cell, "interleave_num", 1) or 1)
        elif name.startswith("GradAccumulationCell") and not per_token:
            divisor *= float(getattr(cell, "micro_size", 1) or 1)
    return divisor


def loss_value(loss: Any) -> float:
    """The loss as a float: the mean when the cell returns several values (per sample or
    per micro batch), as MindFormers shows it."""
    if getattr(loss, "size", 1) == 1 or not hasattr(loss, "asnumpy"):
        return to_float(loss, "loss")
    return float(np.mean(loss.asnumpy(), dtype=np.float64))


def unpack_outputs(outputs: Any, layout: OutputLayout) -> dict[str, float]:
    """``{'loss': ..., 'grad_norm': ..., 'lr': ...}`` from a train cell's outputs.

    Slots that are None (MindFormers' ``global_norm`` without gradient clipping) are
    left out.
    """
    if not isinstance(outputs, (tuple, list)):
        return {"loss": loss_value(outputs) / layout.loss_divisor}
    values = {"loss": loss_value(outputs[0]) / layout.loss_divisor}
    kind, n = layout.kind, len(outputs)
    if kind == "grad_norm" and n >= 2:
        values["grad_norm"] = to_float(outputs[1], "grad_norm")
    elif kind in ("loss_scale", "mindformers") and n >= 3:
        values["overflow"] = float(bool(to_float(outputs[1], "overflow")))
        values["loss_scale"] = to_float(outputs[2], "loss_scale")
        if kind == "mindformers":
            for key, index in (("lr", 3), ("grad_norm", 4)):
                if n > index and outputs[index] is not None:
                    values[key] = to_float(outputs[index], key)
    return values


def squared_norms_array(squares: Any) -> Optional[np.ndarray[Any, Any]]:
    """The squared norms as a flat float64 array (one device-to-host copy)."""
    if squares is None:
        return None
    data = squares.asnumpy() if hasattr(squares, "asnumpy") else squares
    return np.asarray(data, dtype=np.float64).reshape(-1)
