"""What a train cell's outputs hold, by the cell's class: loss, grad norm, loss scale, lr.

``Model.train`` hands callbacks the train cell's return value (``net_outputs``). Its
shape depends on the cell:

=====================================  ===============================================
train cell (or any subclass)           outputs
=====================================  ===============================================
``nn.TrainOneStepCell``                ``loss``
:class:`TrainOneStepWithGradNormCell`  ``(loss, grad_norm, squared_norms)``; with
                                       ``layer_norms=False``: ``(loss, grad_norm)``
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

The table above is :data:`LAYOUTS`, one :class:`TrainCellLayout` row per family of
cells: how it is recognised, which output holds which value, where the squared norms
are and which attribute asks for them, how to get a grad norm it does not give. The
code reads the rows and never names a layout, so a new train cell is one more row
(and its test in ``tests/mindspore/test_outputs.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from mindspore import nn

from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell
from mindwatch.mindspore.tensors import to_float

__all__ = [
    "LAYOUTS",
    "MINDFORMERS_CELLS",
    "CellMatch",
    "OutputLayout",
    "Slot",
    "SquaredNorms",
    "TrainCellLayout",
    "is_mindformers_cell",
    "layout_named",
    "loss_value",
    "mindformers_loss_divisor",
    "output_layout",
    "squared_norms_array",
    "unpack_outputs",
]

MINDFORMERS_CELLS = ("MFTrainOneStepCell", "MFPipelineWithLossScaleCell")
_MAX_DEPTH = 8  # wrappers between the train cell and the model (pipeline, GA, interleave)


@dataclass(frozen=True)
class CellMatch:
    """Which train cells a layout is for: instances of ``classes``, or cells with a class
    named one of ``names`` from a module under ``module`` anywhere in their hierarchy
    (a user's subclass counts; the framework that defines them is never imported)."""

    classes: tuple[type, ...] = ()
    names: tuple[str, ...] = ()
    module: str = ""

    def __call__(self, train_network: Any) -> bool:
        if self.classes and isinstance(train_network, self.classes):
            return True
        return bool(self.names) and any(
            cls.__name__ in self.names and cls.__module__.startswith(self.module)
            for cls in type(train_network).__mro__
        )


@dataclass(frozen=True)
class Slot:
    """One value in a train cell's output tuple: ``key`` at ``index``.

    ``flag``: a boolean (the overflow flag), written as 0 or 1. ``may_be_none``: the
    cell returns None there when it does not compute it (MindFormers' ``global_norm``
    without gradient clipping); the value is then left out.
    """

    key: str
    index: int
    flag: bool = False
    may_be_none: bool = False


@dataclass(frozen=True)
class SquaredNorms:
    """Where a cell returns one squared L2 norm per gradient: the output at ``index``
    when the cell returns at least ``outputs`` values; the cell's boolean attribute
    ``flag`` says it was built to return them (every step), and ``asked`` (``flag`` when
    empty) that the user asked for them, so their curves are written every step unless
    ``layer_norms_every`` says otherwise."""

    index: int
    outputs: int
    flag: str
    asked: str = ""


def _no_divisor(train_network: Any) -> float:
    return 1.0


@dataclass(frozen=True)
class TrainCellLayout:
    """How one family of train cells packs its outputs: a row of :data:`LAYOUTS`.

    The loss is always the first output (or the whole output, when it is no tuple).
    ``slots`` are read when the cell returns at least ``min_outputs`` values, each one
    that is there. ``grad_norm_hint`` says, when no grad norm came out, how to get one
    (``{cell}``: the cell's class name). ``no_layer_norms`` says why a cell of the row
    gives the flight recorder no per-parameter norms, as one of the reasons
    :func:`mindwatch.alerts.movers.no_layers_note` words with its fix (``opt_out``,
    ``mindformers``, ``cell``). ``loss_divisor`` is what the cell's loss is divided by
    for the value its framework shows.
    """

    name: str
    matches: CellMatch
    slots: tuple[Slot, ...] = ()
    min_outputs: int = 1
    squared_norms: Optional[SquaredNorms] = None
    grad_norm_hint: str = ""
    no_layer_norms: str = "cell"
    loss_divisor: Callable[[Any], float] = _no_divisor

    @property
    def lr_from_outputs(self) -> bool:
        """Whether the cell returns the learning rate the optimizer applied."""
        return any(slot.key == "lr" for slot in self.slots)


_BUILD_MODEL = (
    "build the model with mindwatch.mindspore.build_model(net, loss_fn, optimizer) instead "
    "of Model(net, loss_fn, optimizer), or train Model(TrainOneStepWithGradNormCell("
    "nn.WithLossCell(net, loss_fn), optimizer)); it adds one square-sum per gradient to "
    "the step's graph (docs/quickstart.md: 'With Model.train')"
)
_LOSS_ONLY = "the train cell ({cell}) returns only the loss; to get it, " + _BUILD_MODEL
_LOSS_SCALE_SLOTS = (Slot("overflow", 1, flag=True), Slot("loss_scale", 2))


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


#: The train cells mindwatch reads, tried in this order; the first that matches is the
#: cell's layout (MindFormers' cells subclass ``nn.TrainOneStepWithLossScaleCell``, so
#: they come before it; the last row takes any cell). A new layout is one more row.
LAYOUTS: tuple[TrainCellLayout, ...] = (
    TrainCellLayout(
        "grad_norm",
        CellMatch(classes=(TrainOneStepWithGradNormCell,)),
        slots=(Slot("grad_norm", 1),),
        min_outputs=2,
        squared_norms=SquaredNorms(
            index=2, outputs=3, flag="layer_norms", asked="layer_norms_asked"
        ),
        grad_norm_hint=_LOSS_ONLY,
        no_layer_norms="opt_out",
    ),
    TrainCellLayout(
        "mindformers",
        CellMatch(names=MINDFORMERS_CELLS, module="mindformers"),
        slots=(
            *_LOSS_SCALE_SLOTS,
            Slot("lr", 3, may_be_none=True),
            Slot("grad_norm", 4, may_be_none=True),
        ),
        min_outputs=3,
        squared_norms=SquaredNorms(index=5, outputs=7, flag="local_norm"),
        grad_norm_hint="MindFormers returns global_norm only when it clips gradients: set "
        "runner_wrapper use_clip_grad: True (with a large max_grad_norm to see the norm "
        "without clipping)",
        no_layer_norms="mindformers",
        loss_divisor=mindformers_loss_divisor,
    ),
    TrainCellLayout(
        "loss_scale",
        CellMatch(classes=(nn.TrainOneStepWithLossScaleCell,)),
        slots=_LOSS_SCALE_SLOTS,
        min_outputs=3,
        grad_norm_hint="the train cell ({cell}) returns (loss, overflow, loss_scale) and no "
        "gradient norm; mindwatch's TrainOneStepWithGradNormCell has no dynamic loss "
        "scaling, so on a device that needs it return the norm from your own subclass of "
        "{cell}",
    ),
    TrainCellLayout("loss", CellMatch(classes=(object,)), grad_norm_hint=_LOSS_ONLY),
)
_BY_NAME = {row.name: row for row in LAYOUTS}


@dataclass(frozen=True)
class OutputLayout:
    """A train cell's layout (its row of :data:`LAYOUTS`) and the divisor that turns
    its loss into the per-micro-batch mean MindFormers shows."""

    cell: TrainCellLayout = LAYOUTS[-1]
    loss_divisor: float = 1.0

    @property
    def lr_from_outputs(self) -> bool:
        """Whether the outputs hold the learning rate the optimizer applied."""
        return self.cell.lr_from_outputs

    def squared_norms(self, outputs: Any) -> Any:
        """The per-parameter squared gradient norms in ``outputs`` (a framework tensor,
        not yet copied to the host), or None when the cell does not return them."""
        norms = self.cell.squared_norms
        if norms is None or not isinstance(outputs, (tuple, list)) or len(outputs) < norms.outputs:
            return None
        return outputs[norms.index]

    def provides_squared_norms(self, train_network: Any) -> bool:
        """Whether this cell returns per-parameter squared gradient norms every step."""
        norms = self.cell.squared_norms
        return norms is not None and bool(getattr(train_network, norms.flag, False))

    def asks_layer_curves(self, train_network: Any) -> bool:
        """Whether the user built this cell asking for the per-parameter norms
        (``TrainOneStepWithGradNormCell(layer_norms=True)``, MindFormers' ``local_norm:
        True``), not only received them by default: their ``layers/grad_norm/<param>``
        curves are then written every step unless ``layer_norms_every`` is set."""
        norms = self.cell.squared_norms
        if norms is None or not self.provides_squared_norms(train_network):
            return False
        return bool(getattr(train_network, norms.asked or norms.flag, False))


def is_mindformers_cell(train_network: Any) -> bool:
    """A MindFormers train cell, or a subclass of one (checked by class hierarchy)."""
    return _BY_NAME["mindformers"].matches(train_network)


def layout_named(name: str, loss_divisor: float = 1.0) -> OutputLayout:
    """The layout of row ``name`` of :data:`LAYOUTS` (tests, tools)."""
    return OutputLayout(_BY_NAME[name], loss_divisor)


def output_layout(train_network: Any) -> OutputLayout:
    """The :class:`OutputLayout` of ``train_network`` (``Model``'s train cell): the
    first row of :data:`LAYOUTS` that matches it."""
    row = next(row for row in LAYOUTS if row.matches(train_network))
    return OutputLayout(row, row.loss_divisor(train_network))


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
    n = len(outputs)
    if n < layout.cell.min_outputs:
        return values
    for slot in layout.cell.slots:
        if n <= slot.index:
            continue
        value = outputs[slot.index]
        if value is None and slot.may_be_none:
            continue
        number = to_float(value, slot.key)
        values[slot.key] = float(bool(number)) if slot.flag else number
    return values


def squared_norms_array(squares: Any) -> Optional[np.ndarray[Any, Any]]:
    """The squared norms as a flat float64 array (one device-to-host copy)."""
    if squares is None:
        return None
    data = squares.asnumpy() if hasattr(squares, "asnumpy") else squares
    return np.asarray(data, dtype=np.float64).reshape(-1)
