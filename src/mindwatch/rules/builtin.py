"""The built-in rules, in one list: what the config, the alerts and the engine read.

:data:`BUILTIN_RULES` is the registry. Its order is the order of the ``alerts``
sections (and of docs/config.md), of :data:`RULE_NAMES` (and of the error that lists
them), and the order in which the engine runs the rules at each step. Adding a rule is
its own module (a :class:`~mindwatch.rules.base.Rule` subclass that declares its name,
settings, causes and messages) and one line here; docs/alerts.md describes it.
"""

from __future__ import annotations

from typing import Any

from mindwatch.rules.attention_logit import AttentionLogitGrowthRule, AttentionLogitRule
from mindwatch.rules.base import Rule, RuleSettings
from mindwatch.rules.divergence import DivergenceRule
from mindwatch.rules.eval_rebound import EvalReboundRule
from mindwatch.rules.gradients import GradExplosionRule, GradVanishingRule
from mindwatch.rules.hardware import HbmFullRule, NpuHealthRule, NpuTemperatureRule
from mindwatch.rules.layer_outlier import LayerGradOutlierRule
from mindwatch.rules.loss_scale import LossScaleCollapseRule
from mindwatch.rules.memory_growth import MemoryGrowthRule
from mindwatch.rules.nonfinite import NonFiniteRule
from mindwatch.rules.plateau import PlateauRule
from mindwatch.rules.spike import SpikeRule
from mindwatch.rules.stall import StallRule
from mindwatch.rules.straggler import StragglerRule
from mindwatch.rules.throughput import ThroughputDropRule

__all__ = [
    "BUILTIN_RULES",
    "RULE_NAMES",
    "AttentionLogitGrowthRule",
    "AttentionLogitRule",
    "DivergenceRule",
    "EvalReboundRule",
    "GradExplosionRule",
    "GradVanishingRule",
    "HbmFullRule",
    "LayerGradOutlierRule",
    "LossScaleCollapseRule",
    "MemoryGrowthRule",
    "NonFiniteRule",
    "NpuHealthRule",
    "NpuTemperatureRule",
    "PlateauRule",
    "SpikeRule",
    "StallRule",
    "StragglerRule",
    "ThroughputDropRule",
]

BUILTIN_RULES: tuple[type[Rule[Any]], ...] = (
    NonFiniteRule,
    SpikeRule,
    GradExplosionRule,
    GradVanishingRule,
    LayerGradOutlierRule,
    AttentionLogitRule,
    AttentionLogitGrowthRule,
    PlateauRule,
    DivergenceRule,
    ThroughputDropRule,
    StragglerRule,
    StallRule,
    EvalReboundRule,
    LossScaleCollapseRule,
    NpuTemperatureRule,
    HbmFullRule,
    NpuHealthRule,
    MemoryGrowthRule,
)


def _names(rules: tuple[type[Rule[Any]], ...]) -> tuple[str, ...]:
    """The rules' names, once each; a rule that forgot part of its declaration fails
    here, at import, rather than as a config section named 'rule' or a rule without
    settings."""
    names = tuple(rule.name for rule in rules)
    for rule in rules:
        if rule.name == Rule.name or not rule.name.isidentifier():
            raise TypeError(f"{rule.__name__} must declare its name (an identifier)")
        if rule.settings_model is RuleSettings or names.count(rule.name) > 1:
            raise TypeError(f"{rule.__name__} ({rule.name}): declare a settings_model, once")
    return names


RULE_NAMES: tuple[str, ...] = _names(BUILTIN_RULES)
