"""One registry: every built-in rule is declared once, and the config, the alerts'
causes, the engine and the docs all follow it."""

from __future__ import annotations

import math
import re
import string
from pathlib import Path
from typing import Any

import pytest

from mindwatch.alerts import CAUSES, RuleEngine
from mindwatch.alerts.model import likely_causes
from mindwatch.common.i18n import set_language
from mindwatch.config import RULE_NAMES, AlertSettings, ConfigError, MonitorConfig
from mindwatch.rules import BUILTIN_RULES, Rule, RuleSettings
from mindwatch.rules.builtin import SpikeRule, StallRule, _names
from mindwatch.rules.spike import SpikeSettings

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_rule_has_its_config_section() -> None:
    assert tuple(rule.name for rule in BUILTIN_RULES) == RULE_NAMES
    settings = AlertSettings()
    for rule in BUILTIN_RULES:
        field = AlertSettings.model_fields[rule.name]
        assert field.annotation is rule.settings_model, rule.name
        section = settings.rule(rule)
        assert section == rule.settings_model() == getattr(settings, rule.name)
        assert (rule.settings_model.__doc__ or "").startswith(f"``{rule.name}``"), rule.name
    # A section keeps the YAML shape: alerts.<rule>.<key>, validated by the rule's model.
    config = MonitorConfig.from_dict({"alerts": {"spike": {"ratio": 5}, "stop_on": ["spike"]}})
    spike: SpikeSettings = config.alerts.rule(SpikeRule)
    assert (spike.ratio, spike.window, config.alerts.stop_on) == (5.0, 100, ["spike"])
    with pytest.raises(ConfigError, match="ratio"):
        MonitorConfig.from_dict({"alerts": {"spike": {"ratio": 0.5}}})


def test_stop_on_accepts_the_registry_and_names_it_when_wrong() -> None:
    for name in RULE_NAMES:
        assert AlertSettings(stop_on=[name], last_stable_on=[name]).stop_on == [name]
    with pytest.raises(ValueError, match="unknown rule") as caught:
        AlertSettings(stop_on=["spikes"])
    assert f"the rules are {', '.join(RULE_NAMES)}" in str(caught.value)


def test_every_rule_declares_its_causes_and_messages() -> None:
    set_language("en")
    assert set(CAUSES) == set(RULE_NAMES)
    for rule in BUILTIN_RULES:
        assert len(rule.causes) >= 2, rule.name
        assert likely_causes(rule.name) == list(rule.causes)  # English: the msgids
        if rule.observes_steps:
            assert rule.messages, rule.name
            for key, template in rule.messages.items():
                fields = [f for _t, f, _s, _c in string.Formatter().parse(template) if f]
                assert all(f.isidentifier() for f in fields), (rule.name, key)  # named


def test_the_engine_runs_the_step_rules_in_the_registrys_order() -> None:
    engine = RuleEngine(AlertSettings(), run="t", rank=0)
    step_rules = [rule for rule in BUILTIN_RULES if rule.observes_steps]
    assert [type(rule) for rule in engine.rules] == step_rules
    assert StallRule not in step_rules  # the watcher checks it against the clock
    off = RuleEngine(AlertSettings(spike={"enabled": False}), run="t", rank=0)
    assert SpikeRule not in [type(rule) for rule in off.rules]
    (alert,) = engine.observe(1, {"train/loss": math.nan})
    assert alert.causes == likely_causes("nonfinite")


def test_every_rule_is_documented() -> None:
    alerts_md = (DOCS / "alerts.md").read_text(encoding="utf-8")
    config_md = (DOCS / "config.md").read_text(encoding="utf-8")
    table = alerts_md.split("## Rules and their defaults", 1)[1].split("\n\n## ", 1)[0]
    for name in RULE_NAMES:
        assert re.search(rf"^\| `{name}` \|", table, re.M), f"docs/alerts.md: no row for {name}"
        assert f"### `alerts.{name}`" in config_md, f"docs/config.md: no section for {name}"


def test_a_rule_that_forgets_its_declaration_fails_at_import() -> None:
    class Unnamed(Rule[RuleSettings]):
        settings_model = RuleSettings

    class Unsettled(Rule[RuleSettings]):
        name = "unsettled"

    rules: Any
    for rules in ((Unnamed,), (Unsettled,), (SpikeRule, SpikeRule)):
        with pytest.raises(TypeError, match="declare"):
            _names(rules)


def test_the_registrys_names_are_its_rules_names_in_its_order() -> None:
    assert _names(BUILTIN_RULES) == RULE_NAMES == tuple(rule.name for rule in BUILTIN_RULES)
    assert _names((StallRule, SpikeRule)) == ("stall", "spike")
    assert len(set(RULE_NAMES)) == len(RULE_NAMES) == 18
