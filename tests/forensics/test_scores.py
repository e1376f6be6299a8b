"""The promises of ``mindwatch.forensics.analysis``'s docs, each on a series built so
that its score is known exactly: the robust spread (a spike in the baseline does not
widen it), the median centre, the floor of a flat series, judging in log or not, the
directions, the baseline of a short window, and the values a mover reports."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pytest

from mindwatch.forensics import FlightRecorder, Mover, analyse, movers
from tests.forensics.test_analysis import NAMES

MAD = 1.4826  # a median absolute deviation in standard deviations (normal noise)
SCALES = np.array([2.0, 0.3, 1.5, 0.2])  # each parameter's usual gradient norm
LOOKBACK, Z = 20, 6.0


def wiggle(n: int, amp: float) -> np.ndarray:
    """-amp, +amp, -amp, ...: a baseline whose median is 0 and whose MAD is ``amp``."""
    return np.where(np.arange(n) % 2 == 0, -amp, amp)


def job(
    n: int = 60,
    *,
    layer_log: Optional[np.ndarray] = None,
    loss: Optional[np.ndarray] = None,
    scalars: Optional[dict[str, np.ndarray]] = None,
) -> FlightRecorder:
    """A recorder of ``n`` steps: every layer's log-norm wiggles by 0.1 about its scale
    (``layer_log`` replaces fc2.weight's), the loss by 0.05 about 1, lr flat."""
    logs = np.tile(wiggle(n, 0.1)[:, None], (1, len(NAMES)))
    if layer_log is not None:
        logs[:, 2] = layer_log
    norms = SCALES * np.exp(logs)
    losses = np.exp(wiggle(n, 0.05)) if loss is None else loss
    recorder = FlightRecorder(256)
    recorder.set_layers(NAMES)
    for i in range(n):
        recorder.add_layers(i + 1, norms[i] ** 2)
        values = {"loss": float(losses[i]), "lr": 0.01}
        values.update({k: float(v[i]) for k, v in (scalars or {}).items()})
        recorder.add_scalars(i + 1, values)
    return recorder


def only(found: list[Mover]) -> Mover:
    assert len(found) == 1, found
    return found[0]


def test_a_spike_in_the_baseline_does_not_widen_the_spread() -> None:
    log = wiggle(60, 0.1)
    log[11] = math.log(1000.0)  # an earlier spike, x1000, in the baseline (steps 1-40)
    log[54:] += math.log(4.0)  # the layer x4 from step 55
    loss = np.exp(wiggle(60, 0.05))
    loss[11] *= 1000.0  # the loss spiked with it then
    recorder = job(layer_log=log, loss=loss)
    found = only(movers(recorder.window(60), 60, lookback=LOOKBACK, z=Z))
    assert (found.name, found.kind, found.onset) == ("fc2.weight", "layer", 55)
    # Median 0 and MAD 0.1 of the log baseline, the spike notwithstanding: a standard
    # deviation would be ~1.1 and score x4 about 1.2, below z, and name nothing.
    assert found.z == pytest.approx((math.log(4.0) - 0.1) / (MAD * 0.1), rel=1e-9)
    assert found.peak_z == pytest.approx((math.log(4.0) + 0.1) / (MAD * 0.1), rel=1e-9)
    # value: the alert step's; baseline: the median of the (not log) baseline norms
    assert found.value == pytest.approx(1.5 * 4.0 * math.exp(0.1), rel=1e-9)
    assert found.baseline == pytest.approx(1.5 * math.cosh(0.1), rel=1e-9)


def test_the_centre_is_the_median_of_the_baseline() -> None:
    log = wiggle(60, 0.1)
    log[:40:2] = -0.1 + np.linspace(0.0, 0.04, 20)  # a skewed baseline: mean != median
    log[1:40:2] = 0.1
    log[5] = 3.0  # and one large value, which moves a mean but not the median
    log[54:] = math.log(4.0)
    found = only(movers(job(layer_log=log).window(60), 60, lookback=LOOKBACK, z=Z))
    base = np.sort(log[:40])
    centre = (base[19] + base[20]) / 2
    spread = MAD * float(np.median(np.abs(log[:40] - centre)))
    assert found.z == pytest.approx((math.log(4.0) - centre) / spread, rel=1e-9)


@pytest.mark.parametrize(("factor", "moves"), [(1.03, False), (1.1, True), (0.9, True)])
def test_a_flat_series_is_judged_against_a_one_percent_floor(factor: float, moves: bool) -> None:
    # lr is flat in the baseline: its spread is 0, floored to 1 % in log, so a 3 % step
    # scores ~3 (no mover) and a 10 % step ~9.5, either way (lr departs both ways).
    lr = np.full(60, 0.01)
    lr[50:] *= factor
    recorder = job(scalars={"lr": lr})
    found = movers(recorder.window(60), 60, lookback=LOOKBACK, z=Z)
    if not moves:
        assert found == []
        return
    m = only(found)
    assert (m.name, m.onset) == ("lr", 51)
    assert m.z == pytest.approx(abs(math.log(factor)) / 0.01, rel=1e-9)


def test_the_loss_scale_departs_when_it_drops() -> None:
    scale = np.full(60, 65536.0)
    scale[52:] = 32768.0  # halved before an overflow
    m = only(movers(job(scalars={"loss_scale": scale}).window(60), 60, lookback=LOOKBACK, z=Z))
    assert (m.name, m.onset) == ("loss_scale", 53)
    assert m.z == pytest.approx(math.log(2.0) / 0.01, rel=1e-9)
    # Not so a layer's gradient or a logit series: down is no departure "up".
    log = wiggle(60, 0.1)
    log[52:] -= math.log(100.0)
    logit = np.full(60, 30.0) * np.exp(wiggle(60, 0.02))
    logit[52:] /= 4.0
    window = job(layer_log=log, scalars={"max_attention_logit/0": logit}).window(60)
    assert movers(window, 60, lookback=LOOKBACK, z=Z) == []


def test_a_series_that_is_not_positive_is_judged_in_its_own_units() -> None:
    # A loss around -2 (a log-likelihood): not judged in log; its median -2 and MAD 0.1
    # make a rise to -1 a score of 1 / 0.148.
    loss = -2.0 + wiggle(60, 0.1)
    loss[55:] = -1.0
    m = only(movers(job(loss=loss).window(60), 60, lookback=LOOKBACK, z=Z))
    assert (m.name, m.onset) == ("loss", 56)
    assert m.z == pytest.approx(1.0 / (MAD * 0.1), rel=1e-9)
    # The floor of such a series is 1 % of its centre: flat at -2, then -1.8.
    flat = np.full(60, -2.0)
    flat[55:] = -1.8
    m = only(movers(job(loss=flat).window(60), 60, lookback=LOOKBACK, z=Z))
    assert m.z == pytest.approx(0.2 / (0.01 * 2.0), rel=1e-9)


def test_a_short_window_judges_its_second_half_against_its_first() -> None:
    # 20 steps and a lookback of 16 would leave 4 baseline steps: too few (fewer than 8),
    # so steps 1-10 are the baseline and 11-20 judged. A one-step spike at step 6 is in
    # the baseline, and the robust spread ignores it.
    log = wiggle(20, 0.1)
    log[5] += math.log(50.0)
    assert movers(job(20, layer_log=log).window(20), 20, lookback=16, z=Z) == []
    log[14:] += math.log(4.0)  # a rise from step 15 is judged against steps 1-10
    m = only(movers(job(20, layer_log=log).window(20), 20, lookback=16, z=Z))
    assert (m.name, m.onset) == ("fc2.weight", 15)
    assert m.z == pytest.approx((math.log(4.0) - 0.1) / (MAD * 0.1), rel=1e-9)
    out = analyse(job(20, layer_log=log).window(20), 20, lookback=16, z=Z)
    assert out["heat"]["steps"] == list(range(11, 21))
    # Three steps leave a baseline of one: nothing is judged.
    short = analyse(job(3).window(3), 3, lookback=16, z=Z)
    assert short["movers"] == []
    assert "heat" not in short


def test_a_mover_departs_at_the_first_step_reaching_z() -> None:
    log = wiggle(60, 0.1)
    step_z = MAD * 0.1  # one unit of score in log
    # Scores 5, 5.9, 6.5, 12 at steps 51-54: the departure is the third of them.
    log[50:54] = [5.0 * step_z, 5.9 * step_z, 6.5 * step_z, 12.0 * step_z]
    log[54:] = 0.0
    m = only(movers(job(layer_log=log).window(60), 60, lookback=LOOKBACK, z=Z))
    assert m.onset == 53
    assert m.z == pytest.approx(6.5, rel=1e-9)
    assert m.peak_z == pytest.approx(12.0, rel=1e-9)
    # An alert before the rise sees nothing; one just after it, the same departure.
    assert movers(job(layer_log=log).window(52), 52, lookback=LOOKBACK, z=Z) == []
    m = only(movers(job(layer_log=log).window(54), 54, lookback=LOOKBACK, z=Z))
    assert (m.onset, m.z) == (53, pytest.approx(6.5, rel=1e-9))


def gappy(rise: float = 1.0) -> FlightRecorder:
    """40 steps; no norms at step 35, the logit logged every other step; fc2.weight
    x``rise`` from step 33."""
    recorder = FlightRecorder(64)
    recorder.set_layers(NAMES)
    for step in range(1, 41):
        norms = SCALES * np.exp(wiggle(40, 0.1)[step - 1])
        if step >= 33:
            norms[2] *= rise
        if step != 35:  # the cell returned no norms at step 35
            recorder.add_layers(step, norms**2)
        values = {"loss": float(np.exp(wiggle(40, 0.05)[step - 1]))}
        if step % 2 == 0:
            values["max_attention_logit/0"] = 30.0  # logged every other step
        recorder.add_scalars(step, values)
    return recorder


def test_a_step_without_a_value_is_nan_in_the_window_and_never_a_departure() -> None:
    window = gappy().window(40)
    assert window.steps == list(range(1, 41))
    logit = window.scalars["max_attention_logit/0"]
    assert np.isnan(logit[0::2]).all()
    assert (logit[1::2] == 30.0).all()
    assert window.layers is not None
    assert np.isnan(window.layers[34]).all()
    assert not np.isnan(window.layers[33]).any()
    # A gap is not a value: nothing departs (a zero there would be a dip, and in log a
    # value not finite, the largest departure).
    assert movers(window, 40, lookback=10, z=Z) == []
    assert movers(window, 40, lookback=10, z=Z, direction="down") == []
    # A layer that did depart keeps its scores around the gap.
    window = gappy(rise=4.0).window(40)
    m = only(movers(window, 40, lookback=10, z=Z))
    assert (m.name, m.onset) == ("fc2.weight", 33)
    assert m.z == pytest.approx((math.log(4.0) - 0.1) / (MAD * 0.1), rel=1e-9)
    assert m.peak_z == pytest.approx((math.log(4.0) + 0.1) / (MAD * 0.1), rel=1e-9)
    heat = analyse(window, 40, lookback=10, z=Z)["heat"]
    assert heat["layers"][0] == "fc2.weight"
    row = dict(zip(heat["steps"], heat["z"][0]))
    assert row[35] is None  # no value: no colour
    assert row[36] == round((math.log(4.0) + 0.1) / (MAD * 0.1), 2)
