"""How a report prints numbers: significant digits, units, durations people read.

Every number a report shows (HTML, PDF, Markdown) goes through these functions, so
``0.6755183786153793`` is printed as ``0.676`` and ``2580.457763671875`` samples/s as
``2,580 samples/s`` everywhere. Missing values print as ``-``; NaN and infinity as
themselves (a run that diverged must say so, not hide it).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional

from mindwatch.common.i18n import N_, _

__all__ = [
    "LOSS_DIGITS",
    "duration",
    "metric_label",
    "metric_value",
    "milliseconds",
    "number",
    "quantity",
    "value",
]

LOSS_DIGITS = 4  # losses of two runs often differ in the third digit
_DIGITS = 3

# perf/<name>: (label, unit)
_METRICS = {
    "samples_per_s": (N_("samples per second"), N_("samples/s")),
    "tokens_per_s": (N_("tokens per second"), N_("tokens/s")),
    "step_time_ms": (N_("step time"), "ms"),
}


def _float(x: Any) -> Optional[float]:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        try:  # numpy scalars
            return float(x) if hasattr(x, "dtype") else None
        except (TypeError, ValueError):
            return None
    return float(x)


def number(x: Any, digits: int = _DIGITS) -> str:
    """``x`` to ``digits`` significant digits: ``0.676``, ``2,580``, ``14,700``,
    ``3.00e-5``; integers in full with thousands separators (``1,234,567``)."""
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return f"{int(x):,}"
    v = _float(x)
    if v is None or not math.isfinite(v) or v == 0:
        return _special(x, v)
    rounded = float(f"{v:.{digits - 1}e}")  # 9.996 -> 10.0 before counting decimals
    if abs(rounded) < 1e-4:
        mantissa, exponent = f"{v:.{digits - 1}e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    decimals = max(digits - 1 - math.floor(math.log10(abs(rounded))), 0)
    return f"{rounded:,.{decimals}f}"


def _special(x: Any, v: Optional[float]) -> str:
    if x is None:
        return "-"
    if v is None:
        return str(x)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "0"


def quantity(x: Any, unit: str, digits: int = _DIGITS) -> str:
    """A number and its unit: ``14,700 samples/s``; ``-`` when missing."""
    text = number(x, digits)
    return text if text == "-" else f"{text} {unit}"


def milliseconds(ms: Any) -> str:
    """A step time: ``5.21 ms``, ``881 ms``, ``1.23 s`` from 1,000 ms on."""
    v = _float(ms)
    if v is not None and math.isfinite(v) and abs(float(f"{v:.2e}")) >= 1000:
        return quantity(v / 1000, "s")
    return quantity(ms, "ms")


def duration(seconds: Any) -> str:
    """A run's length: ``0.35 s``, ``4.2 s``, ``3 min 05 s``, ``1 h 02 min``, ``2 d 03 h``."""
    s = _float(seconds)
    if s is None or not math.isfinite(s) or s < 0:
        return "-"
    if round(s, 1) < 1:
        return f"{s:.2f} s"
    if round(s, 1) < 60:
        return f"{s:.1f} s"
    whole = round(s)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    minutes = round(s / 60)
    if minutes < 24 * 60:
        return f"{minutes // 60} h {minutes % 60:02d} min"
    hours = round(s / 3600)
    return f"{hours // 24} d {hours % 24:02d} h"


def metric_label(name: str) -> str:
    """``samples_per_s`` -> ``samples per second`` (a ``perf/`` tag's readable name)."""
    found = _METRICS.get(name)
    return _(found[0]) if found else name.replace("_", " ")


def metric_value(name: str, x: Any) -> str:
    """A value of ``perf/<name>`` with its unit: ``5.21 ms``, ``14,700 samples/s``."""
    unit = _METRICS.get(name, ("", ""))[1]
    if unit == "ms" or name.endswith("_ms"):  # step_time_ms, compute_ms, data_wait_ms
        return milliseconds(x)
    if name.endswith("_mb"):  # host_peak_rss_mb
        return quantity(x, "MB")
    return quantity(x, _(unit)) if unit else number(x)


def value(x: Any) -> str:
    """Anything a table cell shows: numbers formatted, text as it is, ``-`` for None."""
    if x is None or _float(x) is not None or isinstance(x, int):
        return number(x)
    return str(x)
