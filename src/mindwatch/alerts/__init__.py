"""Alerts: the engine that makes them from the rules' findings, the model, where they go
(``alerts.jsonl``, the log), and the controls they ask of the training loop."""

from mindwatch.alerts.control import Control, ControlKind
from mindwatch.alerts.engine import RuleEngine
from mindwatch.alerts.model import CAUSES, Alert, Severity, severity_rank
from mindwatch.alerts.reading import read_alerts
from mindwatch.alerts.sinks import AlertLog

__all__ = [
    "CAUSES",
    "Alert",
    "AlertLog",
    "Control",
    "ControlKind",
    "RuleEngine",
    "Severity",
    "read_alerts",
    "severity_rank",
]
