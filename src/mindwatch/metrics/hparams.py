"""Hyperparameters as TensorBoard's HPARAMS dashboard accepts them.

TensorBoard takes bool, number and string values under flat names. Nested mappings
(as in a YAML config) are flattened with dots (``optimizer.lr``); lists, tuples and
None become their string form, so they can still be compared; numpy scalars become
Python numbers; an int too large for a double (beyond about 1.8e308) keeps its digits
as text. Anything else is a TypeError naming the key: a silently stringified
object would show a useless ``<object at 0x...>`` in the dashboard. Secrets are masked
(:mod:`mindwatch.common.redact`: the value of ``api_key``, a URL's token): the dashboard
and ``run.json`` are shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Number
from typing import Any, Union

from mindwatch.common.redact import redact_value
from mindwatch.metrics.values import number

__all__ = ["HParamValue", "flatten_hparams"]

HParamValue = Union[bool, int, float, str]


def _text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a file name's bytes, as Python decodes them) cannot be
        # written: it becomes '?' rather than failing the run.
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


def _integer(value: int) -> Union[int, str]:
    try:  # TensorBoard stores numbers as doubles
        float(value)
    except OverflowError:  # keeps its digits as text instead of failing when written
        return str(value)
    return value


def _value(key: str, value: Any) -> HParamValue:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return _integer(value)
    if isinstance(value, Number):  # Fraction, Decimal: as floats (complex: TypeError)
        return number(key, value)
    if value is None or isinstance(value, (list, tuple)):
        return str(value)
    item = getattr(value, "item", None)  # numpy / framework scalars
    if callable(item) and getattr(value, "size", 1) == 1:
        result = item()
        if isinstance(result, (bool, int, float, str)):
            return result
    raise TypeError(
        f"mindwatch: hparam '{key}' must be a bool, number or string (or a list, which "
        f"is shown as text), got {type(value).__name__}: {value!r:.60}"
    )


def flatten_hparams(hparams: Mapping[str, Any], prefix: str = "") -> dict[str, HParamValue]:
    """``{'optimizer': {'lr': 0.1}}`` -> ``{'optimizer.lr': 0.1}``, values checked."""
    flat: dict[str, HParamValue] = {}
    for key, value in hparams.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_hparams(value, f"{name}."))
        else:
            flat[name] = redact_value(_value(name, value), name)
    return flat
