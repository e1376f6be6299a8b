"""Smoothing equals TensorBoard's own (tf_smoothing in its scalar card, re-stated)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mindwatch.metrics.smoothing import ema


def tensorboard_smooth(values: list[float], weight: float) -> list[float]:
    """TensorBoard's algorithm, written from its documented behaviour step by step."""
    out, last, count = [], 0.0, 0
    constant = len({v for v in values if math.isfinite(v)}) <= 1
    for value in values:
        if constant or not math.isfinite(value):
            out.append(value)
            continue
        last = last * weight + (1 - weight) * value
        count += 1
        debias = 1 if weight == 1 else 1 - weight**count
        out.append(last / debias)
    return out


@pytest.mark.parametrize("weight", [0.0, 0.6, 0.9, 0.99])
def test_equals_tensorboards_formula(weight: float) -> None:
    rng = np.random.default_rng(0)
    values = (2.0 / (1 + np.arange(200) / 30) * rng.lognormal(0, 0.3, 200)).tolist()
    values[50] = math.nan
    values[70] = math.inf
    got = ema(values, weight)
    want = tensorboard_smooth(values, weight)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert math.isnan(got[50])
    assert got[70] == math.inf


@pytest.mark.parametrize("weight", [0.001, 0.6, 0.999])
def test_long_series_across_the_vectorised_blocks(weight: float) -> None:
    """A million-point report smooths in blocks: the seams must not show."""
    rng = np.random.default_rng(1)
    values = (1.0 + rng.random(5000)).tolist()
    values[1234] = math.nan
    np.testing.assert_allclose(
        ema(values, weight), tensorboard_smooth(values, weight), rtol=1e-9, equal_nan=True
    )


def test_the_first_point_is_not_pulled_to_zero_and_constants_stay() -> None:
    assert ema([3.0, 3.0, 3.0]).tolist() == [3.0, 3.0, 3.0]
    assert ema([4.0, 2.0])[0] == 4.0
    with pytest.raises(ValueError, match="smoothing weight"):
        ema([1.0], 1.0)
