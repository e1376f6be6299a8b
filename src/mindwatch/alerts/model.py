"""An alert: what went wrong, where, compared to what, and what to check first."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Optional

from mindwatch.common.i18n import N_, _
from mindwatch.common.json_values import json_float

__all__ = ["CAUSES", "Alert", "Severity", "likely_causes", "severity_label", "severity_rank"]

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


# Likely causes per rule, from the seeds' troubleshooting and common practice; the first
# entries are what to check first.
CAUSES: dict[str, tuple[str, ...]] = {
    "nonfinite": (
        N_("a NaN or Inf in the input batch (check the data at this step)"),
        N_("learning rate too high for this step (check train/lr)"),
        N_("log/sqrt/division of zero or a negative number in the loss"),
        N_("float16 overflow: use a loss scale or bfloat16"),
    ),
    "spike": (
        N_("a bad batch: corrupted labels or outliers (check the batch at this step and rank)"),
        N_("learning rate too high after warmup (check train/lr)"),
        N_("gradient clipping off or too loose (check train/grad_norm)"),
    ),
    "grad_explosion": (
        N_("learning rate too high or warmup too short"),
        N_("no gradient clipping: set clip_grad_norm"),
        N_("a bad batch at this step"),
    ),
    "grad_vanishing": (
        N_("an attention mask or input that is all zeros (check the batch)"),
        N_("dropout or a frozen layer stopping the gradient"),
        N_("learning rate schedule decayed to ~0, or the loss saturated"),
    ),
    "plateau": (
        N_("learning rate too low, or the schedule is not applied (is train/lr flat?)"),
        N_("the model has converged: consider stopping or lowering the lr"),
        N_("data repeating or labels not matching the inputs"),
    ),
    "divergence": (
        N_("learning rate too high: lower it or lengthen warmup"),
        N_("optimizer state corrupted after a resume (check the checkpoint)"),
        N_("a data distribution shift (check recent batches)"),
    ),
    "throughput_drop": (
        N_("the input pipeline is slower (disk, decoding, num_parallel_workers)"),
        N_("another job on the same machine or card"),
        N_("checkpointing or evaluation running more often"),
    ),
    "stall": (
        N_("the job hangs: a collective waiting for a dead rank, or a deadlock in the data loader"),
        N_("the job died without closing its files (check its log and exit status)"),
    ),
    "eval_rebound": (
        N_("overfitting: stop early, add regularisation or data"),
        N_("the learning rate schedule restarted or rose"),
    ),
}


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

    def where(self) -> str:
        """``step S[, rank R][, batch B]``."""
        where = _("step {step}").format(step=self.step)
        if self.rank is not None:
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
