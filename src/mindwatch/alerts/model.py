"""An alert: what went wrong, where, compared to what, and what to check first."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Optional

from mindwatch.common.i18n import N_, _
from mindwatch.common.json_values import json_float
from mindwatch.rules import BUILTIN_RULES
from mindwatch.run.ranks import place_label

__all__ = [
    "CAUSES",
    "Alert",
    "Severity",
    "likely_causes",
    "severity_label",
    "severity_rank",
]

Severity = Literal["info", "warning", "critical"]
_ORDER = {"info": 0, "warning": 1, "critical": 2}


def severity_rank(severity: str) -> int:
    """info < warning < critical (unknown: below info)."""
    return _ORDER.get(severity, -1)


_LABELS = {"info": N_("info"), "warning": N_("warning"), "critical": N_("critical")}


def severity_label(severity: str) -> str:
    """``severity`` as a reader sees it, in the current language (the JSON keeps the
    English value)."""
    label = _LABELS.get(severity)
    return _(label) if label is not None else severity


# Likely causes per rule, declared by each rule (``Rule.causes``, from the seeds'
# troubleshooting and common practice); the first entries are what to check first.
CAUSES: dict[str, tuple[str, ...]] = {rule.name: rule.causes for rule in BUILTIN_RULES}


def likely_causes(rule: str) -> list[str]:
    """:data:`CAUSES` of ``rule``, in the current language."""
    return [_(cause) for cause in CAUSES.get(rule, ())]


@dataclass
class Alert:
    """One alert (one JSON line in ``alerts.jsonl``)."""

    rule: str
    severity: Severity
    metric: str
    value: Optional[float]
    step: int
    message: str
    baseline: Optional[float] = None
    rank: Optional[int] = None
    node: Optional[str] = None  # where ``rank`` runs: its host name,
    device: Optional[str] = None  # its device kind (Ascend, GPU, CPU)
    device_id: Optional[int] = None  # and its logical device id
    epoch: Optional[int] = None
    batch: Optional[int] = None
    run: Optional[str] = None
    time: float = field(default_factory=time.time)
    causes: list[str] = field(default_factory=list)
    action: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, Optional[int]]:
        """What deduplication and cooldowns count by."""
        return (self.rule, self.metric, self.rank)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        extra = data.pop("extra")
        data.update(extra)
        for name in ("value", "baseline"):
            number = data.get(name)
            if isinstance(number, float):
                data[name] = json_float(number)
        return {k: v for k, v in data.items() if v is not None and v != []}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=False)

    def place(self) -> Optional[str]:
        """Where the alert's rank runs, as :meth:`where` shows it: ``node-2, NPU 5``,
        ``host-a, CPU``, or the node alone when the device is unknown (None: no node)."""
        return place_label(self.node, self.device, self.device_id)

    def where(self) -> str:
        """``step S[, rank R (node, device)][, batch B]``."""
        where = _("step {step}").format(step=self.step)
        place = self.place()
        if self.rank is not None and place is not None:
            where += _(", rank {rank} ({place})").format(rank=self.rank, place=place)
        elif self.rank is not None:
            where += _(", rank {rank}").format(rank=self.rank)
        if self.batch is not None:
            where += _(", batch {batch}").format(batch=self.batch)
        return where

    def line(self) -> str:
        """One line for a console or a log."""
        return _("[{severity}] {rule} at {where}: {message}").format(
            severity=severity_label(self.severity),
            rule=self.rule,
            where=self.where(),
            message=self.message,
        )
