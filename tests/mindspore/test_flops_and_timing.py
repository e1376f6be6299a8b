"""Model FLOPs, TFLOPS and MFU; a step's compute and data wait; schedules that branch.

MindFormers' own job is tested in tests/mindformers (its venv); these use MindSpore
2.10 with the demo's MLP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.nn import learning_rate_schedule as schedules
from mindspore.train import Model

import mindwatch.mindspore.callback as callback_module
from mindwatch.mindspore import TrainingMonitor
from mindwatch.mindspore.demo import CLASSES, FEATURES, HIDDEN, make_dataset, make_network
from mindwatch.mindspore.lr import branches_on_values
from tests.mindspore.conftest import run_context
from tests.tbread import scalars

BATCH, STEPS = 16, 12
SCRIPTS = Path(__file__).with_name("scripts")


def mlp_flops_per_step(batch: int) -> float:
    """By hand, for the demo's MLP (Dense 64-128-128-10): every matrix multiplication
    costs 2 x rows x inner x columns; the forward pass, the weight gradients (the same
    again) and the input gradients of the second and third layers (the first layer's
    input is data: MindSpore does not compute its gradient)."""
    layers = [(FEATURES, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, CLASSES)]
    forward = sum(2 * batch * fan_in * fan_out for fan_in, fan_out in layers)
    input_grads = sum(2 * batch * fan_in * fan_out for fan_in, fan_out in layers[1:])
    return float(2 * forward + input_grads)


def train(logdir: Path, config: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    net = make_network()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    monitor = TrainingMonitor(logdir=logdir, config={"print_every": 0, **config})
    data = make_dataset(STEPS * BATCH, BATCH, 0)
    model.train(1, data, callbacks=[monitor], dataset_sink_mode=False)
    return scalars(logdir)


def test_graph_flops_match_a_hand_count_and_give_tflops_and_mfu(tmp_path: Path) -> None:
    ms.set_context(mode=ms.GRAPH_MODE)
    read = train(tmp_path, {"peak_tflops": 0.5})
    run = json.loads((tmp_path / "run.json").read_text())
    flops = mlp_flops_per_step(BATCH)
    assert run["flops"]["per_step"] == flops == 2_220_032
    assert (run["flops"]["peak_tflops"], run["flops"]["peak_source"]) == (0.5, "config")
    step_ms = dict(read["perf/step_time_ms"])
    mfu = dict(read["perf/mfu"])
    assert [s for s, _ in read["perf/tflops_per_device"]] == list(range(1, STEPS + 1))
    for step, achieved in read["perf/tflops_per_device"]:
        assert achieved == pytest.approx(flops / (step_ms[step] / 1000) / 1e12, rel=1e-5)
        assert mfu[step] == pytest.approx(achieved / 0.5, rel=1e-6)


def test_pynative_has_no_graph_count_but_flops_per_sample_works(tmp_path: Path) -> None:
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        read = train(tmp_path / "none", {})
        assert not any(tag.startswith("perf/tflops") for tag in read)
        read = train(tmp_path / "given", {"flops_per_sample": 1e6})
    finally:
        ms.set_context(mode=ms.GRAPH_MODE)
    step_ms = dict(read["perf/step_time_ms"])
    for step, achieved in read["perf/tflops_per_device"]:
        assert achieved == pytest.approx(1e6 * BATCH / (step_ms[step] / 1000) / 1e12, rel=1e-5)
    assert "perf/mfu" not in read  # no peak known on a CPU
    run = json.loads((tmp_path / "given" / "run.json").read_text())
    assert run["flops"] == {"per_sample": 1e6, "source": "config"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_compute_and_data_wait_of_each_step_and_of_a_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The callback's begin and end hooks split a step; a sink of 4 steps (Ascend's
    dataset sink mode: one call per sink) shares its times among its steps."""
    clock = FakeClock()
    monkeypatch.setattr(callback_module.time, "perf_counter", clock)
    opt = nn.Momentum(make_network().trainable_params(), 0.01, 0.9)
    dataset = types.SimpleNamespace(get_batch_size=lambda: 32)
    base = {"optimizer": opt, "train_network": None, "train_dataset": dataset}
    base.update(epoch_num=1, batch_num=16, cur_epoch_num=1)
    monitor = TrainingMonitor(logdir=tmp_path, config={"print_every": 0})
    monitor.on_train_begin(run_context(cur_step_num=0, **base))
    for sink in range(1, 4):
        clock.now += 0.008 * sink  # waiting for the sink's data: 8, 16, 24 ms
        monitor.on_train_step_begin(run_context(cur_step_num=4 * (sink - 1), **base))
        clock.now += 0.040  # the sink's 4 steps: 10 ms each
        outputs = ms.Tensor(np.float32(1.0))
        monitor.on_train_step_end(run_context(cur_step_num=4 * sink, net_outputs=outputs, **base))
    monitor.on_train_end(run_context(**base))
    read = scalars(tmp_path)
    assert read["perf/compute_ms"] == [(4, pytest.approx(10.0)), (8, 10.0), (12, 10.0)]
    assert read["perf/data_wait_ms"] == [(4, pytest.approx(2.0)), (8, 4.0), (12, 6.0)]


def test_a_schedule_that_branches_on_the_step_leaves_no_compile_error(tmp_path: Path) -> None:
    """MindFormers' schedules say ``if self.greater(...)``: compiled with a vector of
    steps that is an [ERROR] call stack in the user's log. mindwatch reads such a
    schedule per step, with the step shaped as the optimizer's: exact, no error."""
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "branching_lr.py"), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "GLOG_v": "3"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
    assert not errors, errors[:3]
    assert not list(tmp_path.rglob("*.ir"))  # MindSpore's analyze_fail.ir: no failed compile
    expected = json.loads(done.stdout.strip().splitlines()[-1])["expected"]
    lrs = scalars(tmp_path / "run")["train/lr"]
    assert [s for s, _ in lrs] == list(range(1, STEPS + 1))
    assert [v for _, v in lrs] == pytest.approx(expected, rel=1e-6)


def test_which_schedules_branch_on_values() -> None:
    elementwise = [
        schedules.CosineDecayLR(0.0, 0.1, 30),
        schedules.WarmUpLR(0.1, 5),
        schedules.PolynomialDecayLR(0.1, 0.01, 30, 1.0, update_decay_steps=True),  # if self.x:
        schedules.ExponentialDecayLR(0.1, 0.9, 4, is_stair=True),
    ]
    assert [branches_on_values(s) for s in elementwise] == [False] * 4

    class Branching(schedules.LearningRateSchedule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = schedules.WarmUpLR(0.1, 5)

        def construct(self, global_step: Any) -> Any:
            return self.helper(global_step)

        def helper(self, global_step: Any) -> Any:
            return self.inner(global_step) if global_step > 3 else self.inner(global_step) * 2

    class Wrapping(schedules.LearningRateSchedule):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def construct(self, global_step: Any) -> Any:
            return self.inner(global_step) * 0.5

    assert branches_on_values(Branching())  # through a helper method
    assert branches_on_values(Wrapping(Branching()))  # through a wrapped schedule
    assert not branches_on_values(Wrapping(schedules.WarmUpLR(0.1, 5)))
