"""Anomaly rules, declared: framework-free, stateful, the same in training and in the
watcher.

Each rule is one class (:class:`Rule`) that declares its name, its settings model, its
likely causes and its message templates; :mod:`mindwatch.rules.builtin` lists them.
The config builds the ``alerts`` section from that list, the alerts take their causes
from it, and the engine (:class:`mindwatch.alerts.RuleEngine`) runs the rules and adds
an alert's context (rank, run, epoch, batch) and cooldowns.

The rules' state is declared too (:class:`Stateful`), so ``mindwatch watch`` keeps it
between calls. (A training process that resumes starts its rules afresh: warm-ups and
cooldowns restart; persisting their state in checkpoints is not done yet.)
"""

from mindwatch.rules.base import Finding, Rule, RuleSettings, Stateful
from mindwatch.rules.builtin import BUILTIN_RULES, RULE_NAMES

__all__ = ["BUILTIN_RULES", "RULE_NAMES", "Finding", "Rule", "RuleSettings", "Stateful"]
