"""Any number a training loop logs (issue 20, item 3).

``mindwatch.metrics.values.number`` is the one place where logged values become floats:
any Python number (ints up to 10**400, Fractions, Decimals), any numpy scalar, 0-d and
one-element arrays are written (read back as float32 where finite, counted as
non-finite where not), or refused with a TypeError naming the key (complex numbers,
strings); never an OverflowError on the training thread, and the run ends "finished".
MindSpore Tensors: tests/mindspore/test_hostile_values.py.
"""

from __future__ import annotations

import decimal
import json
import logging
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mindwatch
from tests.hostile.promise import mindwatch_warnings, one_warning, reads_back


def _run_json(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "run.json").read_text()))


def test_a_count_too_large_for_a_float_is_inf_with_one_warning_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_step(1, loss=2.0, tokens=10)
        mon.log_step(2, loss=1.0, tokens=10**400)  # OverflowError on the training thread
        mon.log_step(3, loss=0.5, tokens=10**400)  # once per key, not per step
        one_warning(caplog.records, "'tokens'", "too large", "1.000e+400", "inf")
        mon.log_step(4, loss=0.25, tokens=10, big_tokens_count=-(10**400))
    assert "-inf" in mindwatch_warnings(caplog.records)[1]
    info = _run_json(tmp_path)
    assert info["status"] == "finished"
    assert info["nonfinite"]["perf/tokens_per_s"] == 2  # counted, and said at close
    assert info["nonfinite"]["train/big_tokens_count"] == 1
    reads_back(
        tmp_path,
        {
            "train/loss": [(1, 2.0), (2, 1.0), (3, 0.5), (4, 0.25)],
            "train/big_tokens_count": [(4, -math.inf)],
        },
    )


def test_eval_scalars_hparams_and_flops_take_any_number(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0, "hparams": {"huge": 10**400}}) as mon:
        mon.log_hparams(ratio=Fraction(1, 3), exact=decimal.Decimal("0.25"), n=np.int64(7))
        mon.set_model_flops(10**400, source="test")  # a framework's count, as an int
        mon.log_step(1, loss=Fraction(1, 2), samples=decimal.Decimal(8))
        mon.log_eval(1, loss=decimal.Decimal("1e400"), acc=Fraction(3, 4))
        mon.log_scalars(1, {"model/params": 10**400})
        with pytest.raises(TypeError, match=r"'acc'.*complex"):
            mon.log_eval(2, acc=1 + 2j)
    info = _run_json(tmp_path)
    assert info["status"] == "finished"
    assert info["hparams"]["huge"] == str(10**400)  # its digits, as TensorBoard shows them
    assert info["hparams"]["ratio"] == pytest.approx(1 / 3)
    reads_back(
        tmp_path,
        {
            "train/loss": [(1, 0.5)],
            "eval/loss": [(1, math.inf)],
            "eval/acc": [(1, 0.75)],
            "model/params": [(1, math.inf)],
        },
    )


# ------------------------------------------------------------------ the property

INTEGER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOAT_DTYPES = [np.float16, np.float32, np.float64, np.longdouble]
COMPLEX_DTYPES = [np.complex64, np.complex128]


def numpy_values() -> st.SearchStrategy[Any]:
    real = st.sampled_from(INTEGER_DTYPES + FLOAT_DTYPES + [np.bool_]).flatmap(
        lambda dtype: hnp.from_dtype(np.dtype(dtype))
    )
    complex_ = st.sampled_from(COMPLEX_DTYPES).flatmap(lambda d: hnp.from_dtype(np.dtype(d)))
    scalar = st.one_of(real, real, complex_)
    return st.one_of(
        scalar,  # numpy scalars
        scalar.map(np.array),  # 0-d arrays
        scalar.map(lambda v: np.array([v])),  # one element
        scalar.map(lambda v: np.array([[v]])),
        st.builds(np.longdouble, st.sampled_from(["1e400", "-1e400", "1e-400", "inf", "nan"])),
    )


def python_values() -> st.SearchStrategy[Any]:
    huge = st.integers(-(10**400), 10**400)
    return st.one_of(
        st.integers(),
        huge,
        st.sampled_from([10**400, -(10**400), 2**1024, 2**1023, 0, True, False]),
        st.floats(),  # NaN, +-inf, subnormals, +-0.0
        st.fractions(),
        st.builds(Fraction, huge, st.integers(1, 10**10)),
        st.decimals(),  # also NaN, sNaN, Infinity
        st.builds(decimal.Decimal, st.sampled_from(["1e400", "-1e999999", "1e-400", "sNaN"])),
        st.complex_numbers(),
    )


def expected(value: Any) -> float | None:  # noqa: PLR0911 - one case per kind of number
    """The float a value should be written as (None: it must be refused), found
    independently of mindwatch: numpy's own conversion, exact rational arithmetic."""
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0]
    if isinstance(value, (complex, np.complexfloating)):
        return None
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            return math.nan
        if value.is_infinite():
            return math.copysign(math.inf, value)
        return (
            float(value)
            if abs(value) < decimal.Decimal("1.8e308")
            else (math.copysign(math.inf, value))
        )
    if isinstance(value, np.generic):
        return float(value.astype(np.float64)) if value.dtype != np.longdouble else float(value)
    if isinstance(value, (int, Fraction)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return float(value)


def test_any_number_is_written_counted_or_refused_naming_the_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One run logs every example at a step of its own; at the end the run is finished,
    every accepted value reads back and the non-finite ones are counted."""
    mon = mindwatch.Monitor(tmp_path, {"print_every": 0, "alerts": {"enabled": False}})
    written: list[tuple[int, float]] = []
    refused = 0

    # 300 examples: each a real log_step (a few microseconds); the run is read back once
    # at the end with EventAccumulator (~0.3 s), ~1 s in all.
    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(st.one_of(python_values(), numpy_values()))
    def log_one(value: Any) -> None:
        nonlocal refused
        step = len(written) + refused + 1
        want = expected(value)
        try:
            with np.errstate(all="ignore"):
                mon.log_step(step, loss=1.0, value_under_test=value)
        except TypeError as exc:  # anything else (OverflowError...) fails the test
            message = str(exc)
        else:
            message = ""
        if message:
            assert want is None, f"{value!r} refused: {message}"
            assert "'value_under_test'" in message, message
            refused += 1
            return
        assert want is not None, f"{value!r} accepted"
        written.append((step, want))

    log_one()
    mon.close()
    info = _run_json(tmp_path)
    assert info["status"] == "finished"
    assert refused > 0
    assert len(written) > 150
    bad = sum(1 for _, v in written if not math.isfinite(v))
    assert info.get("nonfinite", {}).get("train/value_under_test", 0) == bad
    with np.errstate(over="ignore"):  # float32 of a huge finite double is inf: as written
        reads_back(tmp_path, {"train/value_under_test": written})
    assert not [w for w in mindwatch_warnings(caplog.records) if "Traceback" in w]
