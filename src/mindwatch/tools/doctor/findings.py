"""A check's result, as ``mindwatch doctor`` prints it: a verdict, what was found, the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mindwatch.common.i18n import N_, _

__all__ = ["VERDICTS", "Finding", "Verdict", "run_check"]

Verdict = Literal["ok", "info", "warning", "problem"]


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: Verdict
    message: str
    fix: str = ""


#: How doctor marks each verdict, translated where it is printed.
VERDICTS: dict[Verdict, str] = {
    "ok": N_("ok"),
    "info": N_("info"),
    "warning": N_("WARNING"),
    "problem": N_("PROBLEM"),
}


def run_check(name: str) -> str:
    """The check of run ``name`` (``run exp``), as a finding names it."""
    return _("run {name}").format(name=name)
