"""Alerts: the model, and where they go (``alerts.jsonl``, the log)."""

from mindwatch.alerts.model import CAUSES, Alert, Severity, severity_rank
from mindwatch.alerts.sinks import AlertLog

__all__ = ["CAUSES", "Alert", "AlertLog", "Severity", "severity_rank"]
