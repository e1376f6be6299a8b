"""``build_model``: MindSpore's ``Model(net, loss_fn, optimizer)`` with ``train/grad_norm``.

    model = build_model(net, loss_fn, optimizer)      # instead of Model(net, loss_fn, optimizer)
    model.train(epochs, dataset, callbacks=build_callbacks("monitor.yaml"))

``Model`` wraps ``net`` and ``loss_fn`` in ``nn.TrainOneStepCell``, which returns only
the loss, so no callback can see the gradient norm. :func:`build_model` builds the very
same ``Model`` (amp level, eval network, metrics, every keyword as given), then replaces
its train cell with :class:`~mindwatch.mindspore.cells.TrainOneStepWithGradNormCell`
around the same loss network, optimizer (and so its state) and gradient reducer, with
the same ``sens``, inputs and JIT config; parameter names, and so checkpoints, are
unchanged. The replacement happens before anything is compiled.

It does so only where the result is the same training step plus the norm: a plain
``TrainOneStepCell`` with ``sens`` 1, in a single process or under data parallelism.
Otherwise (a loss-scale cell, a fixed loss scale other than 1, boost, gradient
accumulation or pipeline cells, semi-/auto-parallel sharding, MindSpore's graceful
exit) it keeps MindSpore's cell and says why, once.

Why not a callback that swaps the cell by itself: callbacks get ``cb_params.
train_network``, a reference, while ``Model`` keeps calling its own ``_train_network``;
in dataset sink mode the graph is compiled before ``on_train_begin``; and the new cell
returns ``(loss, grad_norm)`` where the user's other callbacks may expect a loss alone.
Asking for it where the model is built is the one safe place.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from mindspore import nn

from mindwatch.mindspore.cells import TrainOneStepWithGradNormCell
from mindwatch.mindspore.outputs import OutputLayout

__all__ = ["build_model", "grad_norm_hint"]

log = logging.getLogger(__name__)


def grad_norm_hint(layout: OutputLayout, train_network: Any) -> str:
    """Why a train cell of ``layout`` gives no grad norm, and the fix (its row's
    ``grad_norm_hint``)."""
    hint = layout.cell.grad_norm_hint.format(cell=type(train_network).__name__)
    return "no train/grad_norm: " + hint


def build_model(
    network: Any,
    loss_fn: Any = None,
    optimizer: Any = None,
    *,
    clip_grad_norm: Optional[float] = None,
    layer_norms: Optional[bool] = None,
    **model_kwargs: Any,
) -> Any:
    """``mindspore.train.Model(network, loss_fn, optimizer, **model_kwargs)`` whose train
    cell also returns the global gradient norm (``train/grad_norm``).

    Args:
        network: as for ``Model`` (``metrics``,
            ``eval_network``, ``amp_level``, ``loss_scale_manager``, ...).
        loss_fn: see ``network``.
        optimizer: see ``network``.
        model_kwargs: see ``network``.
        clip_grad_norm: also clip the gradients to this global norm (the norm written is
            the one before clipping).
        layer_norms: as for :class:`~mindwatch.mindspore.cells.TrainOneStepWithGradNormCell`:
            by default (None) the cell also returns each gradient's squared norm, which
            the flight recorder keeps to name the layer that moved first before an
            alert; True also writes ``layers/grad_norm/<param>`` every step (unless
            ``layer_norms_every`` is set); False returns ``(loss, grad_norm)`` only.

    Where the replacement would not be the same training step (see the module's notes)
    MindSpore's own cell is kept with one warning; ``clip_grad_norm`` then raises, since
    the gradients would silently go unclipped.
    """
    from mindspore.train import Model

    if optimizer is None:
        raise ValueError(
            "build_model needs the optimizer: it builds the train cell that returns the "
            "gradient norm; for a train cell of your own, return the norm from it (or use "
            "TrainOneStepWithGradNormCell) and pass it to Model directly"
        )
    model = Model(network, loss_fn, optimizer, **model_kwargs)
    cell = model._train_network
    reason = _not_replaceable(cell)
    if reason is not None:
        message = (
            f"mindwatch: build_model keeps MindSpore's {type(cell).__name__}: {reason}; "
            "the gradient norm is not computed"
        )
        if clip_grad_norm is not None:
            raise ValueError(f"{message}, so clip_grad_norm={clip_grad_norm} cannot apply")
        log.warning("%s (train/grad_norm will be missing)", message)
        return model
    replaced = TrainOneStepWithGradNormCell(
        cell.network,
        cell.optimizer,
        clip_grad_norm=clip_grad_norm,
        sens=cell.sens if cell.sense_flag else None,
        layer_norms=layer_norms,
    )
    # The very reducer Model's cell built (group, mean, degree), not a second one.
    replaced.grad_reducer = cell.grad_reducer
    replaced.reducer_flag = cell.reducer_flag
    replaced.set_train()
    inputs = cell.get_inputs()
    if inputs:
        replaced.set_inputs(*inputs)
    replaced._jit_config_dict = cell._jit_config_dict
    model._train_network = replaced
    return model


def _not_replaceable(cell: Any) -> Optional[str]:
    """Why Model's train cell cannot become the grad-norm cell unchanged, or None."""
    if type(cell) is not nn.TrainOneStepCell:
        return (
            "Model built it for loss scaling, boost, gradient accumulation or a pipeline, "
            "which TrainOneStepWithGradNormCell does not do"
        )
    if cell.sense_flag and float(cell.sens) != 1.0:
        return f"a fixed loss scale of {cell.sens:g} (the norm would be of the scaled gradients)"
    if getattr(cell, "return_grad", False) or getattr(cell, "use_graceful_exit", False):
        return "it returns gradients or uses MindSpore's graceful exit"
    mode = str(getattr(cell, "parallel_mode", "stand_alone"))
    if mode not in ("stand_alone", "data_parallel"):
        return (
            f"parallel mode {mode}: each rank holds shards of the gradients, and the norm "
            "of its shards is not the global norm"
        )
    return None
