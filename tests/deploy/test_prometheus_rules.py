"""The shipped Prometheus alert rules: promtool accepts them, and their unit tests (each
alert fires on its planted condition, never on the healthy run) pass."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "mindwatch.rules.yml"
RULE_TESTS = RULES_DIR / "mindwatch.rules.test.yml"
EXAMPLE_CONFIG = RULES_DIR / "prometheus.example.yml"


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip(
            "promtool is not installed: apt-get install prometheus "
            "(`make test` does it as root or with passwordless sudo)"
        )
    return path


def _promtool(promtool: str, *args: str) -> str:
    done = subprocess.run(
        [promtool, *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=120
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_promtool_accepts_the_rules(promtool: str) -> None:
    output = _promtool(promtool, "check", "rules", str(RULES))
    assert "SUCCESS: 5 rules found" in output


def test_each_alert_fires_on_its_condition_and_not_on_a_healthy_run(promtool: str) -> None:
    output = _promtool(promtool, "test", "rules", str(RULE_TESTS))
    assert "SUCCESS" in output


def test_the_example_scrape_config_loads_the_rules(promtool: str) -> None:
    output = _promtool(promtool, "check", "config", str(EXAMPLE_CONFIG))
    assert "is valid prometheus config file syntax" in output
    assert "SUCCESS: 5 rules found" in output


def test_every_alert_is_unit_tested_and_says_where_and_what_to_do() -> None:
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"][0]["rules"]
    tests = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))["tests"]
    tested = {case["alertname"] for group in tests for case in group["alert_rule_test"]}
    names = {rule["alert"] for rule in rules}
    assert names == {
        "MindwatchNonFinite",
        "MindwatchStalled",
        "MindwatchThroughputDrop",
        "MindwatchAlertRaised",
        "MindwatchRunFailed",
    }
    assert tested == names
    for rule in rules:
        assert rule["labels"]["severity"]
        text = rule["annotations"]["summary"] + rule["annotations"]["description"]
        assert "$labels.run" in text
        assert "$labels.job" in text
        assert "Runbook:" in rule["annotations"]["description"]
