"""The shipped Grafana dashboard: JSON Grafana imports (its data source an input), whose
every query names only metrics the exporter serves and covers what a platform watches.
(tests/tools/watch/test_watch_prometheus.py runs each query against a real Prometheus.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

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
        "hardware", "straggler",
    }  # fmt: skip
    assert {f"mindwatch_{name}" for name in shown} <= used
    # Every panel filters on the job and run chosen at the top.
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            assert 'job=~"$job"' in target["expr"], panel["title"]
            assert "$run" in target["expr"], panel["title"]


_METRIC_LABEL = re.compile(r'\bmindwatch_(hardware|straggler)\{[^}]*\bmetric="([a-z_0-9]+)"')


def test_the_hardware_and_ranks_rows_show_the_telemetry_each_rank_samples() -> None:
    """Every ``mindwatch_hardware``/``mindwatch_straggler`` query names a tag mindwatch
    writes (one with a declared reduction), the hardware row covers what the issue asks
    for, and each such panel shows every rank's own series, told apart by rank and node
    (the labels a query joins NPU-Exporter on), next to the job's worst rank."""
    from mindwatch.aggregate.reductions import BUILTIN_REDUCTIONS

    dashboard = load()
    shown: dict[str, set[str]] = {"hardware": set(), "straggler": set()}
    prefix = {"hardware": "hw/", "straggler": "straggler/"}
    for panel in panels(dashboard):
        targets = panel.get("targets", [])
        found = [_METRIC_LABEL.search(t["expr"]) for t in targets]
        if not any(found):
            continue
        for match in found:
            assert match, panel["title"]  # a panel of one family and metric
            family, metric = match.groups()
            assert f"{prefix[family]}{metric}" in BUILTIN_REDUCTIONS, (panel["title"], metric)
            shown[family].add(metric)
        ranked = [t for t in targets if 'rank!=""' in t["expr"]]
        job = [t for t in targets if 'rank=""' in t["expr"]]
        assert len(ranked) == 1, panel["title"]
        assert len(job) == 1, panel["title"]
        assert "{{rank}}" in ranked[0]["legendFormat"], panel["title"]
        assert "{{node}}" in ranked[0]["legendFormat"], panel["title"]
    wanted = {"npu_temp_c", "npu_hbm_used_pct", "rss_mb", "rss_growth_mb_per_min", "cpu_percent"}
    assert wanted <= shown["hardware"]
    assert {"input_wait_ms", "step_ms"} <= shown["straggler"]
    # The outlier rank of every reduced metric at once (ranks/<metric>_argmax).
    tables = [p for p in panels(dashboard) if p["type"] == "table"]
    argmax = [
        t["expr"] for p in tables for t in p["targets"] if "mindwatch_rank_argmax" in t["expr"]
    ]
    assert argmax == ['mindwatch_rank_argmax{job=~"$job", run=~"$run"}']
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows[-2:] == ["Hardware", "Ranks (msrun)"]


# Panels that add series up (sum, count): under msrun a watcher serves the job's series
# (no rank label) and every rank's (rank="r"), and an in-job exporter with per_rank the
# same, so they must count the job-level series only, and a rank's only for a run that
# has no job-level series: the rank series of a run with a job-level mindwatch_info go.
_JOB_LEVEL = (
    'unless on (run, job, rank) (mindwatch_info{job=~"$job", run=~"$run", rank!=""}'
    ' and on (run, job) mindwatch_info{job=~"$job", run=~"$run", rank=""})'
)
_AGGREGATION = re.compile(r"\b(sum|count)\b")


def summing_targets(dashboard: dict[str, Any]) -> dict[str, str]:
    """Title (with the refId) to the expression of every target that adds series up."""
    return {
        f"{panel['title']}/{target['refId']}": target["expr"]
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
        if _AGGREGATION.search(target["expr"])
    }


def test_the_summing_panels_count_the_job_level_series_not_each_rank_again() -> None:
    targets = summing_targets(load())
    assert set(targets) == {
        "Non-finite values/A",
        "Alerts raised, by rule/A",
        "Alerts so far/A",
    }
    for title, expr in targets.items():
        sums = len(re.findall(r"\bsum by\b", expr))
        assert expr.count(_JOB_LEVEL) == sums, title


def _series(name: str, values: str, run: str, rank: str = "", **labels: str) -> dict[str, str]:
    own = {"run": run, "job": "mindwatch-watch", "instance": "watch:9401", **labels}
    if rank:
        own["rank"] = rank
    text = ", ".join(f'{key}="{value}"' for key, value in own.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def test_one_nan_and_one_stall_under_msrun_count_once(tmp_path: Path) -> None:
    """promtool evaluates the summing panels: "msrun" has a NaN in its job series and in
    rank 0's, and the watcher's stall alert on the job and on both ranks; "solo" the same
    without ranks; "ranks-only" only ranks' series (a rank's own exporter): counted."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed: apt-get install prometheus")
    nan, stall = "0x7 1x12", "0x7 1x12"
    info = "1x19"
    inputs = [
        _series("mindwatch_info", info, "msrun"),
        _series("mindwatch_info", info, "msrun", "0"),
        _series("mindwatch_info", info, "msrun", "1"),
        _series("mindwatch_nonfinite_total", nan, "msrun"),
        _series("mindwatch_nonfinite_total", nan, "msrun", "0"),
        _series("mindwatch_nonfinite_total", "0x19", "msrun", "1"),
        _series("mindwatch_info", info, "solo"),
        _series("mindwatch_nonfinite_total", nan, "solo"),
        _series("mindwatch_info", info, "ranks-only", "0"),
        _series("mindwatch_info", info, "ranks-only", "1"),
        _series("mindwatch_nonfinite_total", nan, "ranks-only", "0"),
        _series("mindwatch_nonfinite_total", "0x19", "ranks-only", "1"),
    ]
    for run, ranks in (("msrun", ("", "0", "1")), ("solo", ("",)), ("ranks-only", ("0",))):
        for rank in ranks:
            inputs.append(
                _series(
                    "mindwatch_alerts_total", stall, run, rank, rule="stall", severity="warning"
                )
            )
    per_run = {"msrun": 1, "solo": 1, "ranks-only": 1}
    expected = {
        "Non-finite values/A": [({"run": run}, n) for run, n in per_run.items()],
        "Alerts so far/A": [
            ({"run": run, "rule": "stall", "severity": "warning"}, n) for run, n in per_run.items()
        ],
        "Alerts raised, by rule/A": [
            ({"run": run, "rule": "stall", "severity": "warning"}, n) for run, n in per_run.items()
        ],
    }
    targets = summing_targets(load())
    cases = []
    for title, samples in expected.items():
        expr = (
            targets[title]
            .replace("$job", ".*")
            .replace("$run", ".*")
            .replace("$__rate_interval", "5m")
        )
        exp_samples = [
            {
                "labels": "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}",
                "value": value,
            }
            for labels, value in samples
        ]
        cases.append({"expr": expr, "eval_time": "12m", "exp_samples": exp_samples})
    spec = {
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": inputs, "promql_expr_test": cases}],
    }
    path = tmp_path / "dashboard.test.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
