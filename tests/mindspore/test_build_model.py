"""build_model: Model(net, loss_fn, optimizer) whose train cell also returns the grad norm."""

from __future__ import annotations

import logging
from pathlib import Path

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
import pytest
from mindspore import Tensor, nn
from mindspore.train import FixedLossScaleManager, Model

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell, build_model
from tests.tbread import scalars

X = np.array(
    [[1.0, 2.0, 0.5], [0.0, -1.0, 2.0], [3.0, 0.5, -0.5], [-1.0, 1.0, 1.0]], dtype=np.float32
)
T = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0], [0.5, 0.5]], dtype=np.float32)
W0 = np.array([[0.1, -0.2, 0.3], [0.0, 0.4, -0.1]], dtype=np.float32)
B0 = np.array([0.05, -0.05], dtype=np.float32)
LR = 0.1


def tiny() -> tuple[nn.Cell, nn.Cell, nn.Optimizer]:
    net = nn.Dense(3, 2)
    net.weight.set_data(Tensor(W0))
    net.bias.set_data(Tensor(B0))
    return net, nn.MSELoss(), nn.SGD(net.trainable_params(), LR)


def batches(steps: int) -> ds.Dataset:
    return ds.NumpySlicesDataset(
        {"x": np.tile(X, (steps, 1)), "t": np.tile(T, (steps, 1))}, shuffle=False
    ).batch(len(X))


def by_hand(steps: int) -> tuple[list[float], np.ndarray, np.ndarray]:
    """Grad norms of MSE on y = x W^T + b under plain SGD, worked out in numpy."""
    w, b = W0.astype(np.float64), B0.astype(np.float64)
    norms = []
    for _ in range(steps):
        err = X @ w.T + b - T  # (N, 2)
        scale = 2.0 / err.size  # mean over every element
        gw, gb = scale * err.T @ X, scale * err.sum(axis=0)
        norms.append(float(np.sqrt((gw**2).sum() + (gb**2).sum())))
        w, b = w - LR * gw, b - LR * gb
    return norms, w, b


def test_the_grad_norm_is_the_hand_computed_one_and_training_is_unchanged(
    tmp_path: Path, mode: str
) -> None:
    net, loss_fn, opt = tiny()
    model = build_model(net, loss_fn, opt, metrics={"mse": nn.MSE()})
    assert isinstance(model.train_network, TrainOneStepWithGradNormCell)
    plain_net, plain_loss, plain_opt = tiny()
    plain = Model(plain_net, plain_loss, plain_opt)
    # Same parameter names as Model's own cell: checkpoints are interchangeable.
    assert sorted(model.train_network.parameters_dict()) == sorted(
        plain.train_network.parameters_dict()
    )

    monitor = TrainingMonitor({"print_every": 0}, logdir=tmp_path)
    model.train(1, batches(3), callbacks=[monitor], dataset_sink_mode=False)
    norms, w, b = by_hand(3)
    read = scalars(tmp_path)
    assert [s for s, _ in read["train/grad_norm"]] == [1, 2, 3]
    assert [v for _, v in read["train/grad_norm"]] == pytest.approx(norms, rel=1e-5)
    # The optimizer applied exactly plain SGD's update (the same optimizer, its state).
    np.testing.assert_allclose(net.weight.asnumpy(), w, rtol=1e-5)
    np.testing.assert_allclose(net.bias.asnumpy(), b, rtol=1e-5)
    plain.train(1, batches(3), dataset_sink_mode=False)
    np.testing.assert_allclose(net.weight.asnumpy(), plain_net.weight.asnumpy(), rtol=1e-6)
    # Model's eval network is Model's own: evaluation works as it did.
    assert set(model.eval(batches(1), dataset_sink_mode=False)) == {"mse"}


def test_clipping_is_applied_and_the_norm_before_it_written(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    net, loss_fn, opt = tiny()
    clip = 0.5
    model = build_model(net, loss_fn, opt, clip_grad_norm=clip)
    model.train(1, batches(1), callbacks=[TrainingMonitor({"print_every": 0}, logdir=tmp_path)])
    (norm,), _, _ = by_hand(1)
    assert scalars(tmp_path)["train/grad_norm"] == [(1, pytest.approx(norm, rel=1e-5))]
    err = X @ W0.T + B0 - T
    gw = 2.0 / err.size * err.T @ X
    expected = W0 - LR * gw * clip / max(norm, clip)
    np.testing.assert_allclose(net.weight.asnumpy(), expected, rtol=1e-5)


def test_where_the_step_would_change_model_keeps_its_cell_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    scaled = {"loss_scale_manager": FixedLossScaleManager(128.0, drop_overflow_update=False)}
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        model = build_model(*tiny(), **scaled)
    assert type(model.train_network) is nn.TrainOneStepCell
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "build_model keeps MindSpore's TrainOneStepCell: a fixed loss scale of 128" in warning
    with pytest.raises(ValueError, match=r"clip_grad_norm=1\.0 cannot apply"):
        build_model(*tiny(), clip_grad_norm=1.0, **scaled)
    net, loss_fn, _ = tiny()
    with pytest.raises(ValueError, match="build_model needs the optimizer"):
        build_model(net, loss_fn)
