"""``Settings``: the base of every settings model, and the bounds numbers share.

Every section of the config (``MonitorConfig`` and each nested model) derives from
:class:`Settings`, and so does each rule's settings model (:mod:`mindwatch.rules`, which
sits below the config so the config can read the rules' declarations). A new field gets
these checks without asking for them:

* frozen after validation, unknown keys refused (with the closest valid one named);
* numbers finite: ``.nan``, ``.inf`` and ``-.inf`` are refused wherever a float is
  accepted (``flush_secs: .inf`` used to validate and then kill the writer thread);
* integers within 64 bits (``-2**63 <= n < 2**63``): TensorBoard's steps are int64, a
  deque or a port cannot take more, and ``10**400`` is a typo, not a setting.

Durations also have an upper bound of their own, chosen for what each one means and
stated in its description (the seconds given to ``threading`` must stay below
``threading.TIMEOUT_MAX``, about 292 years, but a sensible bound is far lower).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["DAY", "HOUR", "INT64", "Settings"]

INT64 = 1 << 63
HOUR = 3600.0
DAY = 86400.0


class Settings(BaseModel):
    """Frozen, no unknown keys, finite floats, integers that fit 64 bits."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _fits_64_bits(cls, value: Any) -> Any:
        # Before pydantic's own checks, which would call 10**400 "not a valid number"
        # on a float field and accept it on an int field.
        if isinstance(value, int) and not isinstance(value, bool) and not -INT64 <= value < INT64:
            raise ValueError(
                "is out of range: numbers here must fit in 64 bits (between -2**63 and "
                "2**63 - 1, about 9.2e18); use the value you meant"
            )
        return value
