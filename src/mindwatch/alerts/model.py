"""An alert: what went wrong, where, compared to what, and what to check first."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Optional

from mindwatch.common.json_values import json_float

__all__ = ["CAUSES", "Alert", "Severity", "severity_rank"]

Severity = Literal["info", "warning", "critical"]
_ORDER = {"info": 0, "warning": 1, "critical": 2}


def severity_rank(severity: str) -> int:
    """info < warning < critical (unknown: below info)."""
    return _ORDER.get(severity, -1)


# Likely causes per rule, from the seeds' troubleshooting and common practice; the first
# entries are what to check first.
CAUSES: dict[str, tuple[str, ...]] = {
    "nonfinite": (
        "a NaN or Inf in the input batch (check the data at this step)",
        "learning rate too high for this step (check train/lr)",
        "log/sqrt/division of zero or a negative number in the loss",
        "float16 overflow: use a loss scale or bfloat16",
    ),
    "spike": (
        "a bad batch: corrupted labels or outliers (check the batch at this step and rank)",
        "learning rate too high after warmup (check train/lr)",
        "gradient clipping off or too loose (check train/grad_norm)",
    ),
    "grad_explosion": (
        "learning rate too high or warmup too short",
        "no gradient clipping: set clip_grad_norm",
        "a bad batch at this step",
    ),
    "grad_vanishing": (
        "an attention mask or input that is all zeros (check the batch)",
        "dropout or a frozen layer stopping the gradient",
        "learning rate schedule decayed to ~0, or the loss saturated",
    ),
    "plateau": (
        "learning rate too low, or the schedule is not applied (is train/lr flat?)",
        "the model has converged: consider stopping or lowering the lr",
        "data repeating or labels not matching the inputs",
    ),
    "divergence": (
        "learning rate too high: lower it or lengthen warmup",
        "optimizer state corrupted after a resume (check the checkpoint)",
        "a data distribution shift (check recent batches)",
    ),
    "throughput_drop": (
        "the input pipeline is slower (disk, decoding, num_parallel_workers)",
        "another job on the same machine or card",
        "checkpointing or evaluation running more often",
    ),
    "stall": (
        "the job hangs: a collective waiting for a dead rank, or a deadlock in the data loader",
        "the job died without closing its files (check its log and exit status)",
    ),
    "eval_rebound": (
        "overfitting: stop early, add regularisation or data",
        "the learning rate schedule restarted or rose",
    ),
}


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
        where = f"step {self.step}"
        if self.rank is not None:
            where += f", rank {self.rank}"
        if self.batch is not None:
            where += f", batch {self.batch}"
        return where

    def line(self) -> str:
        """One line for a console or a log."""
        return f"[{self.severity}] {self.rule} at {self.where()}: {self.message}"
