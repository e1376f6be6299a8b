"""The MindFormers tag view and the FLOPs arithmetic, as pure functions."""

from __future__ import annotations

import pytest

from mindwatch.metrics.flops import mfu, peak_for_device, tflops
from mindwatch.metrics.mindformers_view import mindformers_view


def test_one_step_in_mindformers_names_against_steps_and_samples() -> None:
    values = [
        ("train/loss", 2.5),
        ("train/lr", 1e-4),
        ("train/grad_norm", 0.75),
        ("train/loss_scale", 1024.0),
        ("perf/step_time_ms", 125.0),
        ("perf/compute_ms", 100.0),  # the iteration time, as MindFormers measures it
        ("train/epoch", 1.0),  # MindFormers has no tag for it
    ]
    (by_step, by_samples) = mindformers_view(
        7, values, samples=4, world_size=8, flops_per_step=2e12
    )
    assert by_step[0] == 7
    assert dict(by_step[1]) == {
        "loss": 2.5,
        "learning-rate": 1e-4,
        "grad-norm": 0.75,
        "loss-scale": 1024.0,
        "iteration-time": 100.0,
        "batch-size": 32.0,  # global: 4 per device x 8 devices
        "throughput": pytest.approx(40.0),  # per device: 4 samples / 0.1 s
        "B-samples-per-day": pytest.approx(40.0 * 8 * 86400 / 1e9),
        "model-flops-throughput-per-npu": pytest.approx(20.0),  # TFLOPS: 2e12 / 100 ms / 1e9
    }
    assert by_samples[0] == 7 * 32  # samples seen
    assert dict(by_samples[1]) == {
        "loss_vs_samples": 2.5,
        "learning-rate_vs_samples": 1e-4,
        "grad-norm_vs_samples": 0.75,
        "loss-scale_vs_samples": 1024.0,
        "iteration-time_vs_samples": 100.0,
        "batch-size_vs_samples": 32.0,
        "throughput_vs_samples": pytest.approx(40.0),
    }


def test_what_is_left_out_when_it_is_unknown() -> None:
    # a custom loop: no compute time (the step time stands in), no grad norm, no FLOPs
    (by_step, _) = mindformers_view(
        3, [("train/loss", 1.0), ("perf/step_time_ms", 50.0)], samples=2, world_size=1
    )
    names = dict(by_step[1])
    assert names["iteration-time"] == 50.0
    assert names["throughput"] == pytest.approx(40.0)
    assert "grad-norm" not in names
    assert "model-flops-throughput-per-npu" not in names
    # no batch size: no samples axis, no throughput
    assert mindformers_view(3, [("train/loss", 1.0)], samples=None, world_size=1) == [
        (3, [("loss", 1.0)])
    ]
    assert mindformers_view(3, [("train/epoch", 1.0)], samples=None, world_size=1) == []


def test_tflops_and_mfu() -> None:
    assert tflops(4.718592e6, 0.01) == pytest.approx(4.718592e-4)
    assert mfu(128.0, 256.0) == 0.5
    assert peak_for_device("Ascend910A") == (256.0, pytest.approx(peak_for_device("Ascend910A")[1]))
    assert peak_for_device("Ascend910B3") is None  # no sourced figure: not guessed
