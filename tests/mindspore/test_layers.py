"""Per-layer norms, the global parameter norm and histograms, under a real Model.train."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import Callback, Model

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import make_dataset, make_network
from tests.tbread import accumulator, scalars

BATCH = 16


class LastBatch(Callback):  # type: ignore[misc]
    def on_train_step_end(self, run_context: Any) -> None:
        self.batch = run_context.original_args().train_dataset_element


def _train(tmp_path: Path, config: dict[str, Any], steps: int = 20, epochs: int = 1) -> Any:
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(4)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt, layer_norms=True)
    last = LastBatch()
    monitor = TrainingMonitor(logdir=tmp_path, config={"print_every": 0, **config})
    Model(cell).train(epochs, make_dataset(steps * BATCH, BATCH, 0), callbacks=[monitor, last])
    return net, cell, last.batch


def test_layer_norms_add_up_and_match_the_weights(tmp_path: Path) -> None:
    net, _, _ = _train(tmp_path, {"layer_norms_every": 5, "param_norm_every": 5})
    read = scalars(tmp_path)
    names = [p.name for p in net.trainable_params()]
    for step in (5, 10, 15, 20):
        grads = [dict(read[f"layers/grad_norm/{n}"])[step] for n in names]
        global_norm = dict(read["train/grad_norm"])[step]
        assert np.sqrt(np.sum(np.square(grads))) == pytest.approx(global_norm, rel=1e-5)
        params = [dict(read[f"layers/param_norm/{n}"])[step] for n in names]
        total = dict(read["train/param_norm"])[step]
        assert np.sqrt(np.sum(np.square(params))) == pytest.approx(total, rel=1e-5)
    # The last record is at the last step: the norms of the final weights.
    for p in net.trainable_params():
        expected = float(np.linalg.norm(p.asnumpy().astype(np.float64)))
        assert dict(read[f"layers/param_norm/{p.name}"])[20] == pytest.approx(expected, rel=1e-6)
    assert [s for s, _ in read["train/param_norm"]] == [5, 10, 15, 20]


def test_target_and_invert_choose_the_parameters(tmp_path: Path) -> None:
    _train(tmp_path / "t", {"layer_norms_every": 10, "target": [r"^4\."]})
    chosen = {t for t in scalars(tmp_path / "t") if t.startswith("layers/")}
    assert chosen == {
        f"layers/{k}/4.{p}" for k in ("grad_norm", "param_norm") for p in ("weight", "bias")
    }
    _train(tmp_path / "i", {"layer_norms_every": 10, "target": ["bias"], "invert": True})
    chosen = {t.split("/")[-1] for t in scalars(tmp_path / "i") if t.startswith("layers/")}
    assert chosen == {"0.weight", "2.weight", "4.weight"}


def test_histograms_at_the_step_and_epoch_intervals(tmp_path: Path) -> None:
    net, _, batch = _train(tmp_path / "s", {"histogram_every_steps": 8, "target": [r"^0\."]})
    acc = accumulator(tmp_path / "s")
    assert sorted(acc.Tags()["histograms"]) == [
        "gradients/0.bias",
        "gradients/0.weight",
        "parameters/0.bias",
        "parameters/0.weight",
    ]
    assert [h.step for h in acc.Histograms("parameters/0.weight")] == [8, 16]
    weight = net.trainable_params()[0].asnumpy()
    assert acc.Histograms("parameters/0.weight")[-1].histogram_value.num == weight.size

    net, cell, batch = _train(
        tmp_path / "e", {"histogram_interval": 1, "histograms_of": ["gradients"]}, epochs=2
    )
    assert [p.name for p in net.trainable_params()][:2] == ["0.weight", "0.bias"]  # not renamed
    acc = accumulator(tmp_path / "e")
    assert all(t.startswith("gradients/") for t in acc.Tags()["histograms"])
    last = acc.Histograms("gradients/0.weight")
    assert [h.step for h in last] == [20, 40]  # the last step of each epoch
    # The gradient picture is the gradient of the last batch at the final weights.
    grads = ms.value_and_grad(cell.network, None, cell.weights)(*batch)[1]
    expected = grads[0].asnumpy()
    assert last[-1].histogram_value.min == pytest.approx(float(expected.min()), rel=1e-5)
    assert last[-1].histogram_value.max == pytest.approx(float(expected.max()), rel=1e-5)


def test_grad_norms_need_the_layer_norms_cell(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.05, 0.9))
    monitor = TrainingMonitor(logdir=tmp_path, config={"print_every": 0, "layer_norms_every": 5})
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        model.train(1, make_dataset(10 * BATCH, BATCH, 0), callbacks=[monitor])
    said = [r.getMessage() for r in caplog.records if "layers/grad_norm needs" in r.getMessage()]
    assert len(said) == 1, said
    assert "TrainOneStepWithGradNormCell(loss_net, optimizer) (by default; not with " in said[0]
    tags = scalars(tmp_path)
    assert "layers/param_norm/0.weight" in tags
    assert not any(t.startswith("layers/grad_norm") for t in tags)


@pytest.mark.parametrize("layer_norms", [None, True, False])
def test_grad_norm_curves_every_step_only_when_asked(layer_norms: Any, tmp_path: Path) -> None:
    """The cell returns the squared norms by default (for the flight recorder) but their
    curves, one per parameter, are written every step only when asked for
    (``layer_norms=True``); ``layer_norms_every`` writes them from the default cell."""
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(4)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    kwargs = {} if layer_norms is None else {"layer_norms": layer_norms}
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt, **kwargs)
    for every in (None, 4):
        folder = tmp_path / f"every-{every}"
        config = {"print_every": 0, "layer_norms_every": every, "layer_norms_of": ["gradients"]}
        monitor = TrainingMonitor(logdir=folder, config=config)
        Model(cell).train(1, make_dataset(12 * BATCH, BATCH, 0), callbacks=[monitor])
        read = scalars(folder)
        steps = {tuple(s for s, _ in v) for t, v in read.items() if t.startswith("layers/")}
        if layer_norms is False:
            assert steps == set(), steps  # no norms: nothing to write
        elif every == 4:
            assert steps == {(4, 8, 12)}, steps
        elif layer_norms:
            assert steps == {tuple(range(1, 13))}, steps
        else:
            assert steps == set(), steps  # returned by default, not drawn unasked
        grads = [t for t in read if t.startswith("layers/grad_norm/")]
        assert len(grads) == (0 if not steps else len(net.trainable_params()))


def test_adam_moment_norms(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    config = {
        "print_every": 0,
        "layer_norms_every": 5,
        "optimizer_state_norms": True,
        "target": [r"^2\.weight$"],
    }
    Model(net, loss, opt).train(
        1,
        make_dataset(10 * BATCH, BATCH, 0),
        callbacks=[TrainingMonitor(logdir=tmp_path, config=config)],
    )
    read = scalars(tmp_path)
    assert {t for t in read if t.startswith("layers/")} == {
        "layers/param_norm/2.weight",
        "layers/adam_m_norm/2.weight",
        "layers/adam_v_norm/2.weight",
    }
    m = opt.moment1[2].asnumpy().astype(np.float64)
    assert dict(read["layers/adam_m_norm/2.weight"])[10] == pytest.approx(
        np.linalg.norm(m), rel=1e-6
    )


def test_the_seeds_tensorboard_callback(tmp_path: Path) -> None:
    from mindwatch.mindspore import TensorBoard

    ms.set_context(mode=ms.GRAPH_MODE)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.05, 0.9))
    callback = TensorBoard(tmp_path, histogram_interval=1, update_time=0.5, print_every=0)
    assert callback.config.flush_secs == 0.5
    model.train(2, make_dataset(5 * BATCH, BATCH, 0), callbacks=[callback])
    acc = accumulator(tmp_path)
    assert [h.step for h in acc.Histograms("parameters/0.weight")] == [5, 10]
    assert [h.step for h in acc.Histograms("gradients/0.weight")] == [5, 10]
    assert [e.step for e in acc.Scalars("train/loss")] == list(range(1, 11))
