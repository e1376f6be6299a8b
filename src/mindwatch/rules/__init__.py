"""Anomaly rules: framework-free, stateful, the same in training and in the watcher."""

from mindwatch.rules.base import Finding, Rule
from mindwatch.rules.engine import RuleEngine, build_rules

__all__ = ["Finding", "Rule", "RuleEngine", "build_rules"]
