"""Real MindSpore Tensors as logged values (issue 20, item 3; the Python numbers and
numpy values are in tests/hostile/test_logged_values.py).

Every real dtype, 0-d, one-element and (1, 1) shapes, finite, extreme and non-finite
values: written (read back as float32) or counted as non-finite; a complex tensor is a
TypeError naming the key; never anything else, and the run ends "finished".
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindwatch
from mindwatch.mindspore.tensors import to_float
from tests.hostile.promise import reads_back

REAL = {
    "float16": ms.float16,
    "float32": ms.float32,
    "float64": ms.float64,
    "bfloat16": ms.bfloat16,
    "int8": ms.int8,
    "int32": ms.int32,
    "int64": ms.int64,
    "uint8": ms.uint8,
    "bool": ms.bool_,
}
EXTREMES = [0.0, -0.0, 1.5, -2.0, 65504.0, 1e38, 3.4e38, 1e-8, 5e-324, 2.0**62, -(2.0**63)]
NON_FINITE = [math.inf, -math.inf, math.nan]


def tensor(dtype: str, value: float, shape: tuple[int, ...]) -> tuple[Any, float]:
    """A MindSpore tensor of ``dtype`` holding ``value`` (cast as numpy casts it), and the
    float it should be written as."""
    kind = np.bool_ if dtype == "bool" else np.float32 if dtype == "bfloat16" else dtype
    with np.errstate(all="ignore"):
        if dtype in ("bool",) or dtype.startswith(("int", "uint")):
            if not math.isfinite(value):
                value = 0.0
            info = np.iinfo(kind) if dtype != "bool" else None
            if info is not None:
                value = float(min(max(value, info.min), info.max))
        data = np.full(shape, value).astype(kind)
    t = ms.Tensor(data, REAL[dtype])
    want = float(t.asnumpy().astype(np.float64).reshape(-1)[0])
    return t, want


# 60 examples: dtype x value x shape, each one log_step of a real Tensor (about 50 us);
# the run is read back once at the end (~0.3 s).
def test_any_real_tensor_is_written_or_counted(tmp_path: Path) -> None:
    mon = mindwatch.Monitor(tmp_path, {"print_every": 0, "alerts": {"enabled": False}})
    written: list[tuple[int, float]] = []

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(
        st.sampled_from(sorted(REAL)),
        st.sampled_from(EXTREMES + NON_FINITE) | st.floats(-1e6, 1e6),
        st.sampled_from([(), (1,), (1, 1)]),
    )
    def log_one(dtype: str, value: float, shape: tuple[int, ...]) -> None:
        t, want = tensor(dtype, value, shape)
        step = len(written) + 1
        mon.log_step(step, loss=t, grad_norm=t)
        assert to_float(t) == want or math.isnan(want)
        written.append((step, want))

    log_one()
    assert len(written) >= 50  # the examples really ran (a few may repeat)
    mon.close()
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "finished"
    bad = sum(1 for _, v in written if not math.isfinite(v))
    assert info.get("nonfinite", {}).get("train/loss", 0) == bad
    reads_back(tmp_path, {"train/loss": written, "train/grad_norm": written})


def test_a_complex_tensor_is_a_type_error_naming_the_key(tmp_path: Path) -> None:
    value = ms.Tensor(np.array([1 + 2j], np.complex64))
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_step(1, loss=0.5)
        with pytest.raises(TypeError, match=r"'phase'.*complex"):
            mon.log_step(2, loss=0.25, phase=value)
        mon.log_step(3, loss=0.125)
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "finished"
    reads_back(tmp_path, {"train/loss": [(1, 0.5), (3, 0.125)]})


def test_an_int64_tensor_too_large_for_float32_reads_back_as_float32(tmp_path: Path) -> None:
    big = ms.Tensor(np.array(2**62 + 1, np.int64))
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_step(1, tokens=big, loss=ms.Tensor(np.float16(65504)))
    reads_back(tmp_path, {"train/loss": [(1, 65504.0)]})


def test_a_tensor_after_its_first_value_takes_no_general_path() -> None:
    """Review of issue 20, item 11: a Tensor cost 0.42 us before the complex and dtype
    checks and 0.69 us after; now its type is remembered as plain, so a finite 0-d
    Tensor costs its own float() (the checks run when that fails or is not finite)."""
    from mindwatch.metrics.values import number
    from tests.hostile.test_logged_values import calls_inside

    value = ms.Tensor(1.5, ms.float32)
    assert number("k", value) == 1.5
    assert calls_inside(number, "k", value) == []
    assert calls_inside(number, "k", ms.Tensor(math.inf, ms.float32)) != []  # checked
    with pytest.raises(TypeError, match="complex"):
        number("k", ms.Tensor(np.complex64(1 + 2j)))
