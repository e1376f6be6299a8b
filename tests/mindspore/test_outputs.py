"""The train-cell layouts: one row per family of cells, tried in order, read by the code."""

from __future__ import annotations

import types
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from mindwatch.mindspore import TrainOneStepWithGradNormCell
from mindwatch.mindspore import outputs as outputs_module
from mindwatch.mindspore.demo import make_network
from mindwatch.mindspore.model import grad_norm_hint
from mindwatch.mindspore.outputs import (
    LAYOUTS,
    CellMatch,
    Slot,
    TrainCellLayout,
    layout_named,
    output_layout,
    unpack_outputs,
)


def _parts() -> tuple[Any, Any]:
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    return nn.WithLossCell(net, loss), nn.Momentum(net.trainable_params(), 0.01, 0.9)


def _mindformers_cell(loss_net: Any, opt: Any) -> Any:
    """A user's subclass of a cell named as MindFormers', from a mindformers module: a
    loss-scale cell, so the MindFormers row must come before the loss-scale one."""
    scale = ms.Tensor(np.float32(1.0))
    mf_cell = type(
        "MFTrainOneStepCell",
        (nn.TrainOneStepWithLossScaleCell,),
        {"__module__": "mindformers.wrapper.wrapper"},
    )
    users_cell = type("MyCell", (mf_cell,), {"local_norm": True})
    return users_cell(loss_net, opt, scale)


def test_each_cell_gets_the_first_row_that_matches() -> None:
    loss_net, opt = _parts()
    scale = ms.Tensor(np.float32(1.0))
    cells = {
        "grad_norm": TrainOneStepWithGradNormCell(loss_net, opt, layer_norms=True),
        "mindformers": _mindformers_cell(loss_net, opt),
        "loss_scale": nn.TrainOneStepWithLossScaleCell(loss_net, opt, scale),
        "loss": nn.TrainOneStepCell(loss_net, opt),
    }
    assert [row.name for row in LAYOUTS] == list(cells)  # the order they are tried in
    for name, cell in cells.items():
        layout = output_layout(cell)
        assert layout.cell.name == name
        assert layout.lr_from_outputs is (name == "mindformers")
        assert layout.provides_squared_norms(cell) is (name in ("grad_norm", "mindformers"))
    # mindwatch's cell returns them by default; asked for (True), its curves are meant
    # too; opted out (False) it returns none. Each row says why it may give none.
    default = TrainOneStepWithGradNormCell(loss_net, opt)
    asked = cells["grad_norm"]
    opted_out = TrainOneStepWithGradNormCell(loss_net, opt, layer_norms=False)
    layout = output_layout(default)
    assert [layout.provides_squared_norms(c) for c in (default, asked, opted_out)] == [
        True,
        True,
        False,
    ]
    assert [layout.asks_layer_curves(c) for c in (default, asked, opted_out)] == [
        False,
        True,
        False,
    ]
    mf = output_layout(cells["mindformers"])
    assert mf.asks_layer_curves(cells["mindformers"])  # local_norm: True is asking
    reasons = {row.name: row.no_layer_norms for row in LAYOUTS}
    assert reasons == {
        "grad_norm": "opt_out",
        "mindformers": "mindformers",
        "loss_scale": "cell",
        "loss": "cell",
    }
    assert output_layout(object()).cell.name == "loss"  # the last row takes any cell


def test_the_hint_for_a_missing_grad_norm_is_the_rows() -> None:
    cell = types.SimpleNamespace()
    hints = {name: grad_norm_hint(layout_named(name), cell) for name in ("loss", "loss_scale")}
    assert hints["loss"] == (
        "no train/grad_norm: the train cell (SimpleNamespace) returns only the loss; to get "
        "it, build the model with mindwatch.mindspore.build_model(net, loss_fn, optimizer) "
        "instead of Model(net, loss_fn, optimizer), or train Model(TrainOneStepWithGradNorm"
        "Cell(nn.WithLossCell(net, loss_fn), optimizer)); it adds one square-sum per "
        "gradient to the step's graph (docs/quickstart.md: 'With Model.train')"
    )
    assert hints["loss_scale"] == (
        "no train/grad_norm: the train cell (SimpleNamespace) returns (loss, overflow, "
        "loss_scale) and no gradient norm; mindwatch's TrainOneStepWithGradNormCell has no "
        "dynamic loss scaling, so on a device that needs it return the norm from your own "
        "subclass of SimpleNamespace"
    )
    assert grad_norm_hint(layout_named("grad_norm"), cell) == hints["loss"]
    assert grad_norm_hint(layout_named("mindformers"), cell) == (
        "no train/grad_norm: MindFormers returns global_norm only when it clips gradients: "
        "set runner_wrapper use_clip_grad: True (with a large max_grad_norm to see the norm "
        "without clipping)"
    )


def test_squared_norms_are_read_from_the_rows_slot() -> None:
    t = ms.Tensor
    squares = t(np.array([1.0, 4.0], np.float32))
    grad = layout_named("grad_norm")
    assert grad.squared_norms((t(np.float32(1.0)), t(np.float32(2.0)), squares)) is squares
    assert grad.squared_norms((t(np.float32(1.0)), t(np.float32(2.0)))) is None
    seven = (*(t(np.float32(v)) for v in (0.5, 0.0, 1.0, 1e-4, 2.0)), squares, t(np.int32(2)))
    assert layout_named("mindformers").squared_norms(seven) is squares
    assert layout_named("mindformers").squared_norms(seven[:5]) is None
    assert layout_named("loss_scale").squared_norms(seven) is None
    assert layout_named("loss").squared_norms(squares) is None


def test_a_new_layout_is_one_more_row(monkeypatch: pytest.MonkeyPatch) -> None:
    class LrCell:
        """A train cell of someone's own: (loss, lr, grad_norm or None)."""

    row = TrainCellLayout(
        "lr_cell",
        CellMatch(classes=(LrCell,)),
        slots=(Slot("lr", 1), Slot("grad_norm", 2, may_be_none=True)),
        min_outputs=2,
        grad_norm_hint="{cell} computes no norm without clipping",
    )
    monkeypatch.setattr(outputs_module, "LAYOUTS", (row, *LAYOUTS))
    layout = output_layout(LrCell())
    assert layout.cell is row
    assert layout.lr_from_outputs
    t = ms.Tensor
    assert unpack_outputs((t(np.float32(0.5)), t(np.float32(0.1)), None), layout) == {
        "loss": 0.5,
        "lr": pytest.approx(0.1),
    }
    assert unpack_outputs((t(np.float32(0.5)),), layout) == {"loss": 0.5}  # fewer than 2
    assert grad_norm_hint(layout, LrCell()).endswith("LrCell computes no norm without clipping")
