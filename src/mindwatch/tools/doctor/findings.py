"""A check's result, as ``mindwatch doctor`` prints it: a verdict, what was found, the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Finding", "Verdict"]

Verdict = Literal["ok", "info", "warning", "problem"]


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: Verdict
    message: str
    fix: str = ""
