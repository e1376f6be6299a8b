"""TrainingMonitor under real Model.train / Model.fit runs, GRAPH and PyNative, sink on and off."""

from __future__ import annotations

import logging
import types
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import WarmupCosineLR, make_dataset, make_network, warmup_cosine
from mindwatch.mindspore.outputs import OutputLayout, layout_named, unpack_outputs
from tests.mindspore.conftest import Recorder, run_context
from tests.tbread import scalars

STEPS, BATCH = 40, 16
QUIET = {"print_every": 0}


def _train_cell(lr: Any = 0.05) -> Any:
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9)
    return TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt)


@pytest.mark.parametrize("sink", [False, True], ids=["nosink", "sink"])
def test_logged_values_match_the_network_step_by_step(
    tmp_path: Path, mode: str, sink: bool, recorder: Recorder
) -> None:
    ms.set_seed(1)
    warmup = 10
    cell = _train_cell(WarmupCosineLR(0.05, warmup=warmup, total=STEPS))
    monitor = TrainingMonitor(logdir=tmp_path, config=QUIET)
    Model(cell).train(
        1,
        make_dataset(STEPS * BATCH, BATCH, seed=0),
        callbacks=[monitor, recorder],
        dataset_sink_mode=sink,
    )
    read = scalars(tmp_path)
    steps = [s for s, _ in read["train/loss"]]
    assert steps == list(range(1, STEPS + 1))  # no gaps, no duplicates
    assert recorder.steps == steps
    assert [v for _, v in read["train/loss"]] == pytest.approx(recorder.losses, rel=1e-6)
    assert [v for _, v in read["train/grad_norm"]] == pytest.approx(recorder.grad_norms, rel=1e-6)
    # The lr the optimizer used at step s is the schedule at optimizer step s - 1.
    expected_lr = warmup_cosine(np.arange(STEPS), 0.05, warmup, STEPS)
    assert [v for _, v in read["train/lr"]] == pytest.approx(expected_lr.tolist(), rel=1e-5)
    assert [s for s, _ in read["perf/samples_per_s"]] == steps
    assert all(v > 0 for _, v in read["perf/step_time_ms"])
    assert {v for _, v in read["train/epoch"]} == {1.0}


def test_grad_norm_is_the_global_norm_of_the_gradients(mode: str) -> None:
    ms.set_seed(2)
    cell = _train_cell(lr=0.0)  # lr 0: the step leaves the weights alone
    x, y = (ms.Tensor(a) for a in _batch())
    grad_fn = ms.value_and_grad(cell.network, None, cell.weights)
    _, grads = grad_fn(x, y)
    expected = float(
        np.sqrt(sum(float((g.asnumpy().astype(np.float64) ** 2).sum()) for g in grads))
    )
    _, grad_norm, squares = cell(x, y)
    assert float(grad_norm.asnumpy()) == pytest.approx(expected, rel=1e-5)
    # By default the cell also returns the terms of that norm: each gradient's sum of
    # squares, in the order of its weights.
    each = [float((g.asnumpy().astype(np.float64) ** 2).sum()) for g in grads]
    assert squares.shape == (len(cell.weights),)
    assert squares.asnumpy().tolist() == pytest.approx(each, rel=1e-5)


def test_clipping_bounds_the_update_and_reports_the_unclipped_norm(mode: str) -> None:
    ms.set_seed(3)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), learning_rate=1.0)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt, clip_grad_norm=0.01)
    before = [p.asnumpy().copy() for p in net.trainable_params()]
    grad_norm = cell(*(ms.Tensor(a) for a in _batch()))[1]
    after = [p.asnumpy() for p in net.trainable_params()]
    step_norm = np.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(after, before)))
    assert float(grad_norm.asnumpy()) > 0.01
    assert step_norm == pytest.approx(0.01, rel=1e-3)  # SGD lr 1: the update is the clipped grad
    with pytest.raises(ValueError, match="clip_grad_norm must be > 0"):
        TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt, clip_grad_norm=0)


def _batch() -> tuple[np.ndarray, np.ndarray]:
    from mindwatch.mindspore.demo import make_data

    x, y = make_data(BATCH, seed=5)
    return x, y


def test_initial_epoch_continues_the_step_axis(tmp_path: Path, recorder: Recorder) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    cell = _train_cell()
    monitor = TrainingMonitor(logdir=tmp_path, config=QUIET)
    Model(cell).train(
        3, make_dataset(10 * BATCH, BATCH, 0), callbacks=[monitor, recorder], initial_epoch=1
    )
    assert recorder.steps[:2] == [1, 2]  # MindSpore itself restarts at 0 ...
    read = scalars(tmp_path)
    assert [s for s, _ in read["train/loss"]] == list(range(11, 31))  # ... mindwatch continues
    assert {v for _, v in read["train/epoch"]} == {2.0, 3.0}
    assert monitor.monitor.total_steps == 30


def test_a_second_model_train_with_the_callback_continues_after_its_last_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Model.train twice in one process with one callback (a second phase, more epochs):
    MindSpore starts cur_step_num at 0 again; the steps continue at 11 (they used to
    fold back over 1-10, with a warning, and doctor saw two runs mixed), and run.json
    counts both trainings (it used to keep the second's counts and files only)."""
    import json

    from mindwatch.events.mixing import mixed_runs

    ms.set_context(mode=ms.GRAPH_MODE)
    model = Model(_train_cell())
    monitor = TrainingMonitor(logdir=tmp_path / "run", config=QUIET)
    caplog.set_level(logging.WARNING, logger="mindwatch")
    model.train(1, make_dataset(10 * BATCH, BATCH, 0), callbacks=[monitor])
    model.train(2, make_dataset(10 * BATCH, BATCH, 1), callbacks=[monitor])
    read = scalars(tmp_path / "run")
    assert [s for s, _ in read["train/loss"]] == list(range(1, 31))
    assert not [r for r in caplog.records if "steps go back" in r.getMessage()]
    assert mixed_runs(tmp_path / "run") is None
    run = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert (run["status"], run["last_step"], run["steps_logged"]) == ("finished", 30, 30)
    assert run["steps_out_of_order"] == 0
    files = sorted(p.name for p in (tmp_path / "run").glob("*tfevents*"))
    assert sorted(run["event_files"]) == sorted(run["event_file_bytes"]) == files
    assert len(files) == 2
    assert len(run["attempts"]) == 1


def test_fit_validation_results_are_eval_scalars(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.05, 0.9)
    model = Model(net, loss, opt, metrics={"acc"})
    model.fit(
        2,
        make_dataset(10 * BATCH, BATCH, 0),
        valid_dataset=make_dataset(4 * BATCH, BATCH, 1),
        callbacks=[TrainingMonitor(logdir=tmp_path, config=QUIET)],
    )
    read = scalars(tmp_path)
    assert [s for s, _ in read["eval/loss"]] == [10, 20]
    assert [s for s, _ in read["eval/acc"]] == [10, 20]
    assert all(0 <= v <= 1 for _, v in read["eval/acc"])
    assert [s for s, _ in read["train/loss"]] == list(range(1, 21))
    assert [v for _, v in read["train/lr"]] == pytest.approx([0.05] * 20)


def test_eval_dataset_gives_eval_loss_every_n_steps(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    monitor = TrainingMonitor(
        logdir=tmp_path, config=QUIET, eval_dataset=make_dataset(4 * BATCH, BATCH, 7), eval_every=15
    )
    Model(_train_cell()).train(1, make_dataset(40 * BATCH, BATCH, 0), callbacks=[monitor])
    evals = scalars(tmp_path)["eval/loss"]
    assert [s for s, _ in evals] == [15, 30]
    assert all(np.isfinite(v) and v > 0 for _, v in evals)


def test_host_memory_is_written_every_memory_every_steps(tmp_path: Path) -> None:
    import resource

    monitor = TrainingMonitor(logdir=tmp_path, config={**QUIET, "memory_every": 10})
    Model(_train_cell()).train(1, make_dataset(25 * BATCH, BATCH, 0), callbacks=[monitor])
    memory = scalars(tmp_path)["perf/host_peak_rss_mb"]
    assert [s for s, _ in memory] == [10, 20]
    peak_now = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert all(100 < v <= peak_now for _, v in memory)  # MindSpore alone needs > 100 MiB
    assert "perf/device_peak_memory_mb" not in scalars(tmp_path)  # CPU: nothing to report


def test_pipeline_parallelism_takes_the_loss_from_the_last_stage() -> None:
    from mindwatch.mindspore.collective import pipeline_loss_ranks

    assert pipeline_loss_ranks(8) is None
    ms.set_auto_parallel_context(pipeline_stages=2)
    try:
        assert pipeline_loss_ranks(8) == (4, 5, 6, 7)
        assert pipeline_loss_ranks(2) == (1,)
    finally:
        ms.set_auto_parallel_context(pipeline_stages=1)


def test_group_and_list_learning_rates(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    net = make_network()
    params = net.trainable_params()
    per_step = [0.1 * 0.9**i for i in range(12)]
    groups = [
        {"params": params[:2], "lr": per_step},
        {"params": params[2:], "lr": 0.01},
    ]
    opt = nn.Momentum(groups, learning_rate=0.02, momentum=0.9)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt)
    Model(cell).train(
        1,
        make_dataset(12 * BATCH, BATCH, 0),
        callbacks=[TrainingMonitor(logdir=tmp_path, config=QUIET)],
    )
    read = scalars(tmp_path)
    assert [v for _, v in read["train/lr"]] == pytest.approx(per_step, rel=1e-6)
    assert [v for _, v in read["train/lr/learning_rate_group_0"]] == pytest.approx(per_step)
    assert [v for _, v in read["train/lr/learning_rate_group_1"]] == pytest.approx([0.01] * 12)


def _run_params(
    optimizer: Any, *, batch_size: int, batch_num: int, epoch: int = 1, **more: Any
) -> dict[str, Any]:
    """cb_params as Model.train fills them, for driving the callback by hand."""
    dataset = types.SimpleNamespace(get_batch_size=lambda: batch_size)
    return {
        "optimizer": optimizer,
        "train_network": None,
        "train_dataset": dataset,
        "epoch_num": 1,
        "batch_num": batch_num,
        "cur_epoch_num": epoch,
        **more,
    }


def test_sink_mode_on_ascend_shares_time_among_the_sink_steps(tmp_path: Path) -> None:
    """On Ascend the callback fires once per sink and cur_step_num jumps by sink_size."""
    opt = nn.Momentum(make_network().trainable_params(), 0.01, 0.9)
    monitor = TrainingMonitor(logdir=tmp_path, config=QUIET)
    base = _run_params(opt, batch_size=32, batch_num=16)
    monitor.on_train_begin(run_context(cur_step_num=0, **base))
    for sink in range(1, 5):
        outputs = ms.Tensor(np.float32(1.0 / sink))
        monitor.on_train_step_end(run_context(cur_step_num=4 * sink, net_outputs=outputs, **base))
        if sink == 2:  # an evaluation between sinks: its time is not a step, its steps are
            monitor.on_eval_end(run_context(eval_results={"eval_loss": np.float32(0.5)}, **base))
    monitor.on_train_end(run_context(**base))
    read = scalars(tmp_path)
    assert [s for s, _ in read["train/loss"]] == [4, 8, 12, 16]
    assert [v for _, v in read["train/loss"]] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4])
    assert read["eval/loss"] == [(8, 0.5)]
    # Every point, the first and the one after the evaluation included, is per step:
    # samples/s = batch * 1000 / (ms per step), with 4 steps sharing each interval.
    for (_, ms_per_step), (_, sps) in zip(read["perf/step_time_ms"], read["perf/samples_per_s"]):
        assert sps == pytest.approx(32 * 1000 / ms_per_step, rel=1e-5)
    assert monitor.monitor._clock._last_step == 16


def test_model_eval_with_the_callback_writes_eval_metrics(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.05, 0.9), metrics={"acc"})
    monitor = TrainingMonitor(logdir=tmp_path, config={**QUIET, "run_name": "exp"})
    model.train(1, make_dataset(5 * BATCH, BATCH, 0), callbacks=[monitor])
    model.eval(make_dataset(2 * BATCH, BATCH, 1), callbacks=[monitor])  # after training
    monitor.monitor.close()
    (run,) = tmp_path.iterdir()  # the results join the run's folder, not a new one
    read = scalars(run)
    assert [s for s, _ in read["eval/acc"]] == [5]
    assert [s for s, _ in read["train/loss"]] == [1, 2, 3, 4, 5]


def test_lr_reader_reads_lists_and_groups_without_graph_launches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mindwatch.mindspore.lr import LearningRateReader

    def no_launch(*args: Any) -> float:
        raise AssertionError("a graph launch per step")

    monkeypatch.setattr(LearningRateReader, "_call", staticmethod(no_launch))
    params = make_network().trainable_params()
    listed = nn.Momentum(params, learning_rate=[0.3, 0.2, 0.1], momentum=0.9)
    grouped = nn.Momentum(
        [{"params": params[:2], "lr": [0.5, 0.4]}, {"params": params[2:], "lr": 0.01}],
        learning_rate=0.02,
        momentum=0.9,
    )
    listed.global_step.set_data(ms.Tensor(np.array([2], np.int32)))  # step 1 ran last
    assert LearningRateReader(listed).read() == [("learning_rate", pytest.approx(0.2))]
    grouped.global_step.set_data(ms.Tensor(np.array([5], np.int32)))  # past the list's end
    assert LearningRateReader(grouped).read() == [
        ("learning_rate_group_0", pytest.approx(0.4)),
        ("learning_rate_group_1", pytest.approx(0.01)),
    ]


def test_loss_scale_and_mindformers_outputs_are_recognised() -> None:
    t = ms.Tensor
    assert unpack_outputs(
        (t(np.float32(0.5)), t(False), t(np.float32(1024.0))), layout_named("loss_scale")
    ) == {
        "loss": 0.5,
        "overflow": 0.0,
        "loss_scale": 1024.0,
    }
    five = (
        t(np.float32(0.5)),
        t(True),
        t(np.float32(512.0)),
        t(np.float32(1e-4)),
        t(np.float32(2.5)),
    )
    assert unpack_outputs(five, layout_named("mindformers")) == {
        "loss": 0.5,
        "overflow": 1.0,
        "loss_scale": 512.0,
        "lr": pytest.approx(1e-4),
        "grad_norm": 2.5,
    }
    # No gradient clipping: MindFormers' global_norm slot is None, and no grad norm.
    no_clip = (*five[:4], None)
    assert "grad_norm" not in unpack_outputs(no_clip, layout_named("mindformers"))
    # Pipeline micro batches: MindFormers shows the loss divided by their number.
    pipeline = layout_named("mindformers", loss_divisor=4.0)
    assert unpack_outputs(five, pipeline)["loss"] == 0.125
    assert unpack_outputs((t(np.float32(0.25)), t(np.float32(3.0))), OutputLayout()) == {
        "loss": 0.25
    }
    # A loss per sample is shown as its mean, as MindFormers does.
    per_sample = t(np.array([1.0, 2.0, 4.5], np.float32))
    assert unpack_outputs(per_sample, OutputLayout()) == {"loss": 2.5}


def test_a_monitoring_failure_is_one_warning_not_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken_optimizer = types.SimpleNamespace(learning_rate=object(), global_step=None)
    base = _run_params(broken_optimizer, batch_size=8, batch_num=3)
    monitor = TrainingMonitor(logdir=tmp_path, config=QUIET)
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        monitor.on_train_begin(run_context(cur_step_num=0, **base))
        for step in (1, 2, 3):
            monitor.on_train_step_end(
                run_context(cur_step_num=step, net_outputs=ms.Tensor(np.float32(step)), **base)
            )
        monitor.on_train_end(run_context(**base))
    warnings = [r.getMessage() for r in caplog.records if "learning rate" in r.getMessage()]
    assert len(warnings) == 1
    assert scalars(tmp_path)["train/loss"] == [(1, 1.0), (2, 2.0), (3, 3.0)]


def test_unwritable_logdir_fails_before_training(tmp_path: Path) -> None:
    from mindwatch import LogDirError

    (tmp_path / "file").write_text("")
    with pytest.raises(LogDirError, match="file/run"):
        TrainingMonitor(logdir=tmp_path / "file" / "run")


def test_ranks_other_than_0_write_their_own_sub_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("RANK_ID", "1")
    monkeypatch.setenv("RANK_SIZE", "2")
    monitor = TrainingMonitor(logdir=tmp_path, config={"print_every": 10})
    # No communication initialised: nothing to reduce with, so rank 1 keeps its own values.
    assert monitor.logdir == tmp_path
    assert monitor.monitor.rank_logdir == tmp_path / "rank_1"
    from mindwatch.sinks import ProgressSink

    sinks = monitor.monitor._pipeline.main.sinks
    assert not any(isinstance(s, ProgressSink) for s in sinks)  # only rank 0 prints progress
    monitor.monitor.close()
    info = json.loads((tmp_path / "rank_1" / "run.json").read_text())
    assert (info["rank"], info["world_size"]) == (1, 2)
    assert not (tmp_path / "run.json").exists()


def test_a_resumed_initial_step_is_kept(tmp_path: Path) -> None:
    """MindSpore's own resume path starts cur_step_num at initial_step (e.g. 250)."""
    opt = nn.Momentum(make_network().trainable_params(), 0.01, 0.9)
    base = _run_params(opt, batch_size=8, batch_num=100, epoch=3, initial_step=250)
    monitor = TrainingMonitor(logdir=tmp_path, config=QUIET)
    monitor.on_train_begin(run_context(cur_step_num=250, **base))
    for step in (251, 252, 253):
        loss = ms.Tensor(np.float32(step))
        monitor.on_train_step_end(run_context(cur_step_num=step, net_outputs=loss, **base))
    monitor.on_train_end(run_context(**base))
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == [251, 252, 253]
    assert monitor.monitor.total_steps == 350


def test_mindformers_loss_divisor_is_read_from_the_wrapper_cells() -> None:
    """MFLossMonitor divides the loss by the pipeline's micro batches, the interleave
    count and the gradient accumulation steps; mindwatch finds them in the cells."""
    from mindspore.nn import MicroBatchInterleaved
    from mindspore.nn.wrap.cell_wrapper import GradAccumulationCell

    from mindwatch.mindspore.outputs import mindformers_loss_divisor

    chain = GradAccumulationCell(MicroBatchInterleaved(nn.Dense(4, 1), 2), 4)
    cell = types.SimpleNamespace(network=chain, micro_size=3, calculate_per_token_loss=False)
    assert mindformers_loss_divisor(cell) == 8.0  # no pipeline: interleave x accumulation
    ms.set_auto_parallel_context(pipeline_stages=2)
    try:
        assert mindformers_loss_divisor(cell) == 24.0  # and the pipeline's 3 micro batches
        cell.calculate_per_token_loss = True  # then only the interleave count divides
        assert mindformers_loss_divisor(cell) == 2.0
    finally:
        ms.set_auto_parallel_context(pipeline_stages=1)
