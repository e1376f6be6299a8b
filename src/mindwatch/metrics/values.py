"""Logged values as Python numbers: checked at the front door, counted when not finite.

:func:`number` and :func:`step_number` run on the training thread for every value
logged, so their common cases (a ``float``, an ``int`` step) cost one type check.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from decimal import Decimal
from numbers import Rational
from typing import Any, NoReturn, Optional

import numpy as np

from mindwatch.common.warn import WarnOnce

__all__ = ["INT64", "NonFiniteCounter", "number", "step_number"]

INT64 = 1 << 63  # TensorBoard's steps are int64
_INF = float("inf")
_NAN = float("nan")

log = logging.getLogger(__name__)
# Once per key and process: a value out of a float's range usually repeats every step.
_too_large = WarnOnce(log)


# numpy's real scalar types, by exact type: ``float()`` of one is exact and cannot fail
# (``longdouble`` is not here: it can hold numbers beyond a float's range).
_NUMPY_REAL = frozenset(np.dtype(code).type for code in "?bBhHiIlLqQefd")
# Text in any form: ``float()`` parses str, bytes and bytearray, numpy arrays of them
# parse through ``float()`` or ``item()``.
_TEXT = (str, bytes, bytearray, memoryview)
_COMPLEX = (complex, np.complexfloating)
_SPECIAL = (*_TEXT, *_COMPLEX, np.ndarray)
# Whether a type is one of _SPECIAL, remembered by type: an isinstance() against the
# seven costs half a tensor's float() (a few dozen types in a process, at most).
_special_types: dict[type, bool] = {}
_NDARRAY = np.ndarray


def number(key: str, value: Any) -> float:  # noqa: PLR0911 - a return per fast path
    """``value`` as a float, or a TypeError that names the key.

    This is the one place where the numbers users hand mindwatch become floats (log_step,
    log_eval, log_scalars, hparams, the MindSpore adapter's outputs). It accepts Python
    numbers (``int`` of any size, ``bool``, ``float``, ``Fraction``, ``Decimal``), numpy
    scalars of every real dtype, 0-d and one-element arrays, and framework tensors (via
    ``item()``). It rejects text in any form (``str``, ``bytes``, ``bytearray``,
    ``memoryview``, numpy arrays of strings, object arrays holding a string), which
    ``float()`` would silently parse, and complex numbers, whose imaginary part numpy's
    ``float()`` would silently drop.

    A value that is not a number raises instead of being skipped with a warning: it is
    a programming error, visible on the very first step, and a curve that silently
    never appears is worse.

    A number too large for a float (an ``int`` beyond about 1.8e308, ``10**400``, a
    ``Decimal`` or numpy ``longdouble`` as large) is data, not a programming error: it
    becomes ``+inf`` or ``-inf``, written and counted as non-finite like a NaN, with one
    warning per key (per process) naming it. It never raises ``OverflowError`` on the
    training thread.

    It runs for every value logged, so the common cases come first, by exact type: a
    ``float`` costs one check, an ``int`` two, a numpy real scalar three, a numpy array
    four; a framework tensor (after its first value) its own ``float()`` and a
    dictionary look-up.
    """
    if type(value) is float:
        return value
    kind = type(value)
    if kind is int:
        try:
            return float(value)
        except OverflowError:  # beyond a float's range: +-inf, with one warning
            return _too_large_value(key, value, _INF)
    if kind in _NUMPY_REAL:
        return float(value)
    if kind is _NDARRAY and value.dtype.type in _NUMPY_REAL:
        if value.ndim == 0:
            return float(value)
        if value.size == 1:  # float() of it: deprecated by NumPy 1.25, refused by 2
            return float(value.item())
    elif _special_types.get(kind) is False:
        # A type seen before that is neither text, complex nor a numpy array: a framework
        # tensor, as a rule. Its item() reads one element whatever the shape ((), (1,),
        # (1, 1): torch's writer takes them all), exactly for bfloat16, and without
        # autograd's warning about float() of a tensor that requires grad. A finite
        # float of it is the answer; anything else gets the general path's checks.
        read = getattr(value, "item", None)
        try:
            result = read() if read is not None else value
            if type(result) is not float:
                result = float(result)
        except (TypeError, ValueError, ArithmeticError, RuntimeError):
            return _general(key, value)  # says precisely what is wrong
        if result - result == 0.0:
            return result
    return _general(key, value)


def _general(key: str, value: Any) -> float:
    """:func:`number` for everything but the common types."""
    kind = type(value)
    special = _special_types.get(kind)
    if special is None:
        special = issubclass(kind, _SPECIAL)
        if len(_special_types) < 1000:
            _special_types[kind] = special
    if special:
        if isinstance(value, _TEXT):
            _text(key, value)
        if isinstance(value, _COMPLEX):
            _complex(key, value)
        if isinstance(value, np.ndarray):
            dtype_kind = value.dtype.kind
            if dtype_kind == "c":
                _complex(key, value)
            if dtype_kind in "US":
                _text(key, value)
            if value.ndim == 0 and dtype_kind != "O":  # objects: by item(), below
                result = _as_float(key, value)
                if result is not None:
                    return result
    elif not hasattr(value, "item"):  # Python numbers: int, bool, Fraction, Decimal...
        result = _as_float(key, value)
        if result is not None:
            return result
    if getattr(value, "is_meta", False) is True:  # torch's device for shapes only
        raise TypeError(
            f"mindwatch: '{key}' is a tensor on the 'meta' device, which has a shape but no "
            "values; log a tensor on a device that holds them (cpu, cuda, npu...)"
        )
    # A one-element array or tensor of any shape (NumPy >= 1.25 deprecates float() on
    # it, NumPy 2 refuses it), a numpy scalar of a type float() may not take exactly
    # (longdouble, bfloat16), an object array (whose float() would parse a string it
    # holds), a tensor whose float() failed (a complex one).
    if _element_count(value) == 1 and hasattr(value, "item"):
        try:
            item = value.item()
        except (TypeError, ValueError, RuntimeError):
            item = None
        if isinstance(item, _TEXT):
            _text(key, value)
        if isinstance(item, complex):  # a framework tensor of a complex dtype
            _complex(key, value)
        if item is not None:
            result = _as_float(key, item)
            if result is not None:
                return result
    shape = getattr(value, "shape", None)
    what = f"{type(value).__name__} of shape {tuple(shape)}" if shape else type(value).__name__
    raise TypeError(
        f"mindwatch: '{key}' must be a number (int, float, or a one-element "
        f"numpy array / tensor), got {what}: {value!r:.60}"
    ) from None


def _element_count(value: Any) -> Optional[int]:
    """How many elements an array or tensor holds (None if it does not say): numpy's and
    MindSpore's ``size``, torch's ``numel()`` (its ``size`` is a method), or the product
    of the shape."""
    size = getattr(value, "size", None)
    if type(size) is int:
        return size
    numel = getattr(value, "numel", None)
    if callable(numel):
        try:
            return int(numel())
        except (TypeError, ValueError, RuntimeError):
            return None
    shape = getattr(value, "shape", None)
    try:
        return math.prod(int(n) for n in shape) if shape is not None else None
    except (TypeError, ValueError):
        return None


def _text(key: str, value: Any) -> NoReturn:
    raise TypeError(
        f"mindwatch: '{key}' must be a number, got the string {value!r:.60}; pass the number itself"
    )


def _as_float(key: str, value: Any) -> Optional[float]:
    """``float(value)``; +-inf (and one warning) for a finite number too large for a
    float; None when ``value`` is not a number at all."""
    try:
        result = float(value)
    except OverflowError:  # int, Fraction: "too large to convert to float"
        result = _INF
    except (TypeError, ValueError):
        if isinstance(value, Decimal) and value.is_snan():
            return _NAN  # a signalling NaN: a NaN all the same
        return None
    else:
        # Decimal and numpy longdouble become inf without an error: a value that came
        # out infinite but does not equal that infinity was finite, and too large.
        if result - result == 0.0 or math.isnan(result) or _equals(value, result):
            return result
    return _too_large_value(key, value, result)


def _too_large_value(key: str, value: Any, result: float) -> float:
    """+-inf for ``value``, a finite number too large for a float, with one warning per
    key naming it."""
    try:
        negative = bool(value < 0)
    except Exception:  # an odd type: the sign of its float then
        negative = result < 0
    _too_large(
        f"too large {key}",
        "mindwatch: '%s' = %s is too large for a float (at most about 1.8e308); it is "
        "written as %s and counted as non-finite. Log it in other units (or its log) to "
        "keep its value; training goes on.",
        key,
        _approx(value),
        "-inf" if negative else "inf",
    )
    return -_INF if negative else _INF


def _equals(value: Any, result: float) -> bool:
    try:
        return bool(value == result)
    except Exception:  # a type that cannot compare with a float
        return True  # take float()'s word for it


def _approx(value: Any) -> str:
    """A huge number in a few characters (its repr can be hundreds of digits)."""
    try:
        if isinstance(value, Rational):
            exact = Decimal(int(value.numerator)) / Decimal(int(value.denominator))
            return f"{exact:.3e}"
        if isinstance(value, Decimal):
            return f"{value:.3e}"
    except ArithmeticError:
        pass
    return f"{value!r:.40}"


def _complex(key: str, value: Any) -> NoReturn:
    raise TypeError(
        f"mindwatch: '{key}' must be a real number, got the complex value {value!r:.60}; "
        "log its real part, imaginary part or magnitude (abs) as numbers of their own"
    )


def step_number(step: Any, name: str = "step") -> int:
    """``step`` as an int that fits TensorBoard's int64, or a TypeError naming ``name``."""
    try:
        value = int(step.__index__())
    except AttributeError:
        if isinstance(step, float) and step.is_integer():
            value = int(step)
        else:
            raise TypeError(
                f"mindwatch: {name} must be an int, got {type(step).__name__}: {step!r:.60}"
            ) from None
    if not -INT64 <= value < INT64:
        shown = f"{value:.3e}" if abs(value) < 10**300 else "a number of over 300 digits"
        raise TypeError(f"mindwatch: {name} must fit in 64 bits (TensorBoard's int64), got {shown}")
    return value


class NonFiniteCounter:
    """How many NaN / +-Inf values each tag had (written as they are; counted for
    ``run.json`` and the end-of-run warning). Thread-safe: local values are counted
    where they are derived, which is the pipeline's thread or, under reduction, the
    collective thread."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, values: Iterable[tuple[str, float]]) -> None:
        bad = [tag for tag, value in values if value - value != 0.0]  # NaN or +-Inf
        if bad:
            with self._lock:
                for tag in bad:
                    self._counts[tag] = self._counts.get(tag, 0) + 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
