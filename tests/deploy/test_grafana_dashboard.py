"""The shipped Grafana dashboard: JSON Grafana imports (its data source an input), whose
every query names only metrics the exporter serves and covers what a platform watches.
(tests/tools/test_watch_prometheus.py runs each query against a real Prometheus.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mindwatch.exporter import METRIC_NAMES

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "mindwatch-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
# A metric selector: a name followed by its label matchers (functions take parentheses).
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{")
_NAME = re.compile(r"\bmindwatch_[a-z_]+\b")


def load() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # inside collapsed rows


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' and the template variables'."""
    exprs = [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]["query"]
        inner = re.fullmatch(r"label_values\((.*), *[a-z_]+\)", query)
        assert inner, query
        exprs.append(inner.group(1))
    return exprs


def metric_names(expr: str) -> set[str]:
    return set(_SELECTOR.findall(expr)) | set(_NAME.findall(expr))


def test_the_dashboard_imports_with_its_data_source_as_an_input() -> None:
    dashboard = load()
    assert dashboard["schemaVersion"] >= 39  # Grafana 10.4 / 11
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    assert dashboard["__inputs"][0]["pluginId"] == "prometheus"
    assert dashboard["uid"] == "mindwatch-training"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"job", "run", "metric"}
    for variable in variables.values():
        assert variable["datasource"] == DATASOURCE
        assert variable["query"]["query"].startswith("label_values(")


def test_every_metric_in_every_query_is_one_the_exporter_serves() -> None:
    dashboard = load()
    used: set[str] = set()
    for expr in queries(dashboard):
        names = metric_names(expr)
        assert names, expr
        assert names <= set(METRIC_NAMES), (expr, names - set(METRIC_NAMES))
        used |= names
    # What the issue asks the dashboard to show, and the health of each run.
    shown = {
        "loss", "learning_rate", "grad_norm", "samples_per_second", "tokens_per_second",
        "mfu_ratio", "step_seconds", "alerts_total", "rank_spread", "rank_argmax",
        "run_status", "last_step_timestamp_seconds", "step", "eval", "nonfinite_total",
    }  # fmt: skip
    assert {f"mindwatch_{name}" for name in shown} <= used
    # Every panel filters on the job and run chosen at the top.
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            assert 'job=~"$job"' in target["expr"], panel["title"]
            assert "$run" in target["expr"], panel["title"]
