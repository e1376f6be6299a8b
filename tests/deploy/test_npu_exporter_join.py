"""The PromQL joins docs/prometheus.md gives for Ascend's NPU-Exporter, evaluated by
promtool on series labelled as each side labels them: NPU-Exporter's per-chip series
(``id``, ``model_name``, ``vdie_id``, ``pcie_bus_info``, and the ``node`` its scrape
config adds) and a rank's own mindwatch series (``node``, ``device_id``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DOC = Path(__file__).resolve().parents[2] / "docs" / "prometheus.md"


def documented_queries() -> list[str]:
    """The expressions of the join section's ``promql`` block (comments dropped)."""
    section = DOC.read_text(encoding="utf-8").split("## Joining Ascend's NPU-Exporter")[1]
    block = re.search(r"```promql\n(.*?)```", section, re.S)
    assert block, "no promql block in the NPU-Exporter section"
    queries, current = [], []
    for line in block.group(1).splitlines():
        if line.strip().startswith("#") or not line.strip():
            if current:
                queries.append(" ".join(current))
                current = []
            continue
        current.append(line.strip())
    if current:
        queries.append(" ".join(current))
    return queries


def _series(name: str, value: str, **labels: str) -> dict[str, str]:
    text = ", ".join(f'{key}="{val}"' for key, val in labels.items())
    return {"series": f"{name}{{{text}}}", "values": value}


def _labels(**pairs: str) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(pairs.items())) + "}"


def test_the_documented_joins_pair_each_rank_with_its_chip(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed: apt-get install prometheus")
    chip = {"job": "npu-exporter", "model_name": "910A-Ascend-V1"}  # (empty labels: none)
    chips = [  # two nodes with a chip 5 each, and a chip 4 nobody uses
        ("trainer-01", "5", "0000:61:00.0", "40x10"),
        ("trainer-02", "5", "0000:DB:00.0", "46x10"),
        ("trainer-02", "4", "0000:3E:00.0", "39x10"),
    ]
    inputs = [
        _series(
            "npu_chip_info_temperature",
            temp,
            **chip,
            id=chip_id,
            node=node,
            pcie_bus_info=bus,
            instance=f"{node}:8082",
            vdie_id=f"185011D4-{node}-{chip_id}",
        )
        for node, chip_id, bus, temp in chips
    ]
    ranks = [("0", "trainer-01", "47x10"), ("1", "trainer-02", "45x10")]  # device 5 each
    for rank, node, temp in ranks:
        own = {"job": "llama", "run": "exp1", "rank": rank, "node": node, "device_id": "5"}
        own["instance"] = f"{node}:{9410 + int(rank)}"
        inputs.append(_series("mindwatch_info", "1x10", **own, version="0.1.0", world_size="2"))
        inputs.append(_series("mindwatch_hardware", temp, **own, metric="npu_temp_c"))
    # and the job's reduced series, which has neither node nor device_id
    inputs.append(_series("mindwatch_info", "1x10", job="llama", run="exp1", world_size="2"))
    temperatures, difference = documented_queries()
    expected_temperatures = []
    expected_difference = []
    for (rank, node, _), exporter_temp, bus, mine in zip(
        ranks, (40, 46), ("0000:61:00.0", "0000:DB:00.0"), (47, 45)
    ):
        labels = {**chip, "id": "5", "node": node, "pcie_bus_info": bus, "run": "exp1"}
        labels.update(rank=rank, instance=f"{node}:8082", vdie_id=f"185011D4-{node}-5")
        expected_temperatures.append({"labels": _labels(**labels), "value": exporter_temp})
        own = {"job": "llama", "run": "exp1", "rank": rank, "node": node, "device_id": "5"}
        own.update(instance=f"{node}:{9410 + int(rank)}", metric="npu_temp_c")
        expected_difference.append({"labels": _labels(**own), "value": mine - exporter_temp})
    spec = {
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {"expr": temperatures, "eval_time": "5m", "exp_samples": expected_temperatures},
                    {"expr": difference, "eval_time": "5m", "exp_samples": expected_difference},
                ],
            }
        ],
    }
    path = tmp_path / "join.test.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    done = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
