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
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mindwatch
from mindwatch.metrics import values
from mindwatch.metrics.values import number
from tests.hostile.promise import config_error, mindwatch_warnings, one_warning, reads_back


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


# ----------------------------------------- the common cases stay fast (item 11)


def calls_inside(function: Any, *args: Any) -> list[str]:
    """The functions of mindwatch.metrics.values that ``function(*args)`` calls (beyond
    itself): a common case must take none of the general path's."""
    called: list[str] = []
    module_file = values.__file__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == module_file:
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        function(*args)
    finally:
        sys.setprofile(None)
    return [name for name in called if name != function.__name__]


COMMON = {
    "float": 1.5,
    "int": 7,
    "bool": True,
    "np.float32": np.float32(1.5),
    "np.float16": np.float16(2.0),
    "np.int64": np.int64(7),
    "np.uint64": np.uint64(2**64 - 1),
    "np.bool_": np.bool_(True),
    "0-d array": np.array(1.5),
    "one-element array": np.array([3], dtype=np.int32),
}


@pytest.mark.parametrize("value", COMMON.values(), ids=COMMON.keys())
def test_a_common_value_takes_the_fast_path(value: Any) -> None:
    """The reviewer measured the general path first at about twice the cost (np.float32
    0.16 -> 0.32 us): by exact type, these need none of its checks. (No timing here: the
    numbers are in the change's report.)"""
    number("k", value)  # a type seen once (bool: remembered as plain)
    assert calls_inside(number, "k", value) == []
    assert number("k", value) == float(np.asarray(value).reshape(-1)[0])


def test_an_int_too_large_for_a_float_still_warns_on_the_fast_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    assert number("fast_big", -(10**400)) == -math.inf
    one_warning(caplog.records, "'fast_big'", "too large", "-inf")


# ----------------------------------------------- text in any container (item 15)


TEXT = {
    "bytearray": bytearray(b"2.5"),
    "memoryview": memoryview(b"4.5"),
    "np.str_": np.str_("1.0"),
    "np.bytes_": np.bytes_(b"3.5"),
    "0-d str array": np.array("1.5"),
    "1-element str array": np.array(["1.5"]),
    "bytes array": np.array([b"1.5"]),
    "(1, 1) str array": np.array([["1.5"]]),
    "object array of a str": np.array("1.5", dtype=object),
    "object array of [str]": np.array(["1.5"], dtype=object),
    "object array of bytes": np.array([b"1.5"], dtype=object),
}


@pytest.mark.parametrize("value", TEXT.values(), ids=TEXT.keys())
def test_text_in_any_container_is_a_type_error_naming_the_key(tmp_path: Path, value: Any) -> None:
    """np.array("1.5") was written as 1.5 and bytearray(b"2.5") as 2.5: float() parses
    them; a curve of parsed text hides a bug in the training loop."""
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)
        with pytest.raises(TypeError) as info:
            mon.log_step(2, loss=1.0, parsed=value)
        mon.log_step(3, loss=0.5)
    message = config_error(info, "'parsed'", "must be a number, got the string")
    assert "pass the number itself" in message
    reads_back(tmp_path, {"train/loss": [(1, 1.0), (3, 0.5)]})


@settings(max_examples=200, deadline=None, derandomize=True, database=None)  # ~0.1 s
@given(
    text=st.one_of(
        st.from_regex(r"\A[-+]?[0-9]{1,5}(\.[0-9]{0,3})?\Z"),
        st.sampled_from(["nan", "inf", "-Infinity", "1e5", " 2 ", "0x10"]),
    ),
    wrap=st.sampled_from(
        [
            str,
            lambda t: t.encode(),
            lambda t: bytearray(t.encode()),
            lambda t: memoryview(t.encode()),
            np.str_,
            np.array,
            lambda t: np.array([t]),
            lambda t: np.array([t.encode()]),
            lambda t: np.array(t, dtype=object),
            lambda t: np.array([t], dtype=object),
        ]
    ),
)
def test_a_number_as_text_is_never_parsed(text: str, wrap: Any) -> None:
    with pytest.raises(TypeError, match=r"'k' must be a number, got the string"):
        number("k", wrap(text))
