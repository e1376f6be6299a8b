"""The flight recorder and the first-mover analysis on recorded series (no framework:
the recorder takes any array-like, the adapter's tensors are tested where it feeds it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mindwatch.forensics import FlightRecorder, analyse, first_nonfinite, movers

NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def healthy(steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per-parameter squared norms and a loss with 10 % log-normal noise, as training gives."""
    rng = np.random.default_rng(seed)
    norms = np.array([2.0, 0.3, 1.5, 0.2]) * rng.lognormal(0.0, 0.1, (steps, len(NAMES)))
    loss = 1.0 * rng.lognormal(0.0, 0.05, steps)
    return norms**2, loss


def record(squares: np.ndarray, loss: np.ndarray, capacity: int = 256) -> FlightRecorder:
    recorder = FlightRecorder(capacity)
    recorder.set_layers(NAMES)
    for i, (row, value) in enumerate(zip(squares, loss), start=1):
        recorder.add_layers(i, row)
        recorder.add_scalars(i, {"train/loss": float(value), "lr": 0.01, "epoch": 1.0})
    return recorder


def test_the_layer_that_moved_first_is_ranked_first_with_its_lead() -> None:
    squares, loss = healthy(300)
    squares[295:, 2] *= 50.0**2  # fc2.weight's gradient x50 from step 296
    squares[298:, [1, 3]] *= 3.0**2  # the others follow three steps later,
    squares[298:, 0] *= 400.0**2  # one of them far more: moving first is what counts
    loss[298:] *= 4.0  # and the loss with them
    window = record(squares, loss).window(300)
    ranked = movers(window, 300, lookback=32, z=6.0)
    assert [m.name for m in ranked[:1]] == ["fc2.weight"]
    assert ranked[0].onset == 296
    assert ranked[0].kind == "layer"
    assert {m.name for m in ranked} == set(NAMES) | {"loss"}  # lr is flat: never a mover
    out = analyse(window, 300, lookback=32, z=6.0, rank=0)
    assert out["first_mover"]["name"] == "fc2.weight"
    assert out["first_mover"]["lead_steps"] == 3  # loss departed at 299
    assert out["loss_onset"] == 299
    assert out["heat"]["layers"][0] == "fc2.weight"
    assert len(out["heat"]["steps"]) == 32


def test_at_the_same_onset_the_layer_that_moved_most_comes_first() -> None:
    squares, loss = healthy(200, seed=3)
    squares[190:, 0] *= 20.0**2
    squares[190:, 3] *= 4.0**2
    ranked = movers(record(squares, loss).window(200), 200, lookback=20, z=6.0)
    assert [m.name for m in ranked] == ["fc1.weight", "fc2.bias"]


def test_healthy_noise_moves_nothing() -> None:
    for seed in range(20):
        squares, loss = healthy(256, seed=seed)
        assert movers(record(squares, loss).window(256), 256, lookback=32, z=6.0) == []


def test_scores_are_relative_to_each_series_own_scale() -> None:
    squares, loss = healthy(200, seed=1)
    tiny = squares * 1e-12  # a norm of 1e-6 moves as much as one of 2 when it grows 8x
    tiny[190:, 1] *= 8.0**2
    squares[190:, 1] *= 8.0**2
    a = movers(record(squares, loss).window(200), 200, lookback=20, z=6.0)
    b = movers(record(tiny, loss).window(200), 200, lookback=20, z=6.0)
    assert [m.name for m in a] == [m.name for m in b] == ["fc1.bias"]
    assert a[0].z == pytest.approx(b[0].z)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_the_first_nonfinite_gradient_in_backward_order(bad: float) -> None:
    squares, loss = healthy(120)
    squares[110, [0, 2]] = bad  # fc2 is later in the network: backward reaches it first
    squares[111:, :] = math.nan
    loss[110:] = math.nan
    window = record(squares, loss).window(112)
    found = first_nonfinite(window, 112)
    assert found is not None
    assert found["step"] == 111
    assert found["parameter"] == "fc2.weight"
    assert found["parameters"] == 2
    assert found["of"] == 4
    assert found["backward_order"] == ["fc2.weight", "fc1.weight"]
    out = analyse(window, 112, lookback=16, z=6.0)
    assert out["movers"][0]["onset"] == 111
    assert out["movers"][0]["z"] == "inf"


def test_negative_square_sums_count_as_broken_and_finite_ones_do_not() -> None:
    squares, loss = healthy(40)
    assert first_nonfinite(record(squares, loss).window(40), 40) is None
    squares[30, 1] = -1.0  # not a square sum: a broken value, not a departure to ignore
    window = record(squares, loss).window(40)
    assert movers(window, 40, lookback=16, z=6.0)[0].name == "fc1.bias"


def test_the_batch_and_its_nonfinite_samples_go_with_the_alert() -> None:
    squares, loss = healthy(60)
    recorder = record(squares, loss)
    recorder.add_sample_ids(60, [120, 121, 122, 123])
    recorder.add_nonfinite_samples(60, [122])
    out = analyse(recorder.window(60), 60, lookback=16, z=6.0, rank=1, batch=3)
    assert out["batch"] == {
        "rank": 1,
        "step": 60,
        "batch": 3,
        "sample_ids": [120, 121, 122, 123],
        "nonfinite_samples": [122],
    }


def test_memory_is_bounded_by_the_capacity() -> None:
    recorder = FlightRecorder(64)
    recorder.set_layers(NAMES)
    row = np.ones(len(NAMES))
    for step in range(1, 100_001):
        recorder.add_layers(step, row)
        recorder.add_scalars(step, {"loss": 1.0})
        recorder.add_sample_ids(step, [step])
    assert len(recorder) == 64
    window = recorder.window(100_000)
    assert window.steps == list(range(100_000 - 63, 100_001))
    assert window.layers is not None
    assert window.layers.shape == (64, len(NAMES))
    assert len(window.sample_ids) == 64


def test_a_window_ends_at_the_alert_step() -> None:
    squares, loss = healthy(50)
    window = record(squares, loss).window(30)
    assert window.steps[-1] == 30
    assert window.index(30) == 29
    assert window.index(31) is None
    assert set(window.scalars) == {"loss", "lr"}  # epoch is not kept


def test_a_layer_departs_up_before_a_spike_and_down_before_vanishing() -> None:
    squares, loss = healthy(200, seed=4)
    squares[185:, 1] *= 0.01**2  # fc1.bias's gradient falls 100x from step 186
    squares[190:, 2] *= 30.0**2  # fc2.weight's grows 30x from step 191
    window = record(squares, loss).window(200)
    up = movers(window, 200, lookback=20, z=6.0)
    assert [(m.name, m.onset) for m in up] == [("fc2.weight", 191)]  # a dip is no cause
    down = movers(window, 200, lookback=20, z=6.0, direction="down")
    assert [(m.name, m.onset) for m in down] == [("fc1.bias", 186)]
    squares[199, 3] = math.nan  # not finite: a departure either way
    window = record(squares, loss).window(200)
    assert "fc2.bias" in {m.name for m in movers(window, 200, lookback=20, z=6.0, direction="down")}


def test_a_falling_loss_is_no_mover_and_non_finite_ties_go_in_backward_order() -> None:
    squares, loss = healthy(200, seed=6)
    loss[185:] *= 0.2  # training made progress: not a cause of anything
    squares[195:, :] = math.nan  # every gradient not finite at step 196
    window = record(squares, loss).window(200)
    ranked = movers(window, 200, lookback=20, z=6.0)
    assert "loss" not in {m.name for m in ranked}
    assert [m.name for m in ranked] == list(reversed(NAMES))  # fc2.bias first: backward
