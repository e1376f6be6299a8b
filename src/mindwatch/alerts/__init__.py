"""Alerts: the engine that makes them from the rules' findings, the model, where they go
(``alerts.jsonl``, the log), and the controls they ask of the training loop."""

from mindwatch.alerts.control import NOTHING_DUE, Control, ControlKind, StepControls
from mindwatch.alerts.engine import RuleEngine
from mindwatch.alerts.model import CAUSES, Alert, Severity, severity_rank
from mindwatch.alerts.reading import read_alerts
from mindwatch.alerts.sinks import AlertLog

__all__ = [
    "CAUSES",
    "NOTHING_DUE",
    "Alert",
    "AlertLog",
    "Control",
    "ControlKind",
    "RuleEngine",
    "Severity",
    "StepControls",
    "read_alerts",
    "severity_rank",
]
