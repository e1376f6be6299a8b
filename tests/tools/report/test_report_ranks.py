"""The report's "Ranks" table, from rank folders written by mindwatch's own writer.

Rank 1's input pipeline is slow: its median data wait is 9 ms against rank 0's 1 ms,
over 10 ms steps, so its input score is 1 - (9 - 1) / 10 = 0.2 (below 0.4: "input
pipeline"). Ranks 0 and 1's micro-benchmark takes 2 ms, rank 2's 5 ms: a compute score
of 2 / 5 = 0.4 (the others' median over its own; below 0.5: "compute").
Values are chosen so each cell has one right answer.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.events.writer import EventFileWriter
from mindwatch.run.rank_file import write_rank_file

WAIT = {0: 1.0, 1: 9.0, 2: 1.0}
BENCH = {0: 2.0, 1: 2.0, 2: 5.0}


def make_job(root: Path, *, bench: bool = True, npu: bool = False) -> Path:
    run = root / "job"
    with mindwatch.Monitor(run, {"print_every": 0}, world_size=3) as mon:
        for step in range(1, 101):
            mon.log_step(step, loss=1.0 / step)
    for rank in range(3):
        folder = run / f"rank_{rank}"
        with EventFileWriter(folder) as writer:
            for step in range(10, 101, 10):
                values = {
                    "straggler/input_wait_ms": WAIT[rank],
                    "straggler/step_ms": 10.0,
                    "hw/rss_mb": 500.0 + rank * 10 + step / 10,
                }
                if step <= 20:  # the first intervals (compile) are left out
                    values["straggler/input_wait_ms"] = 50.0 * (rank + 1)
                if bench:
                    values["straggler/bench_ms"] = BENCH[rank]
                if npu:
                    values["hw/npu_hbm_used_mb"] = 30000.0 + 1000 * rank
                    values["hw/npu_temp_c"] = 60.0 + rank
                writer.add_scalars(step, list(values.items()))
        if rank:  # rank 0's node and device are in the run's run.json
            hardware = {"node": f"node-{rank}", "device_id": rank, "sources": {"device": "Ascend"}}
            write_rank_file(folder, rank=rank, hardware=hardware)
    return run


def ranks_text(report: Path) -> str:
    page = report.read_text("utf-8")
    start = page.index('<table class="ranks">')
    table = page[start : page.index("</table>", start)]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    cells = [re.findall(r"<t[hd]>(.*?)</t[hd]>", row, re.S) for row in rows]
    return "\n".join(" | ".join(html.unescape(c) for c in row) for row in cells)


def test_the_ranks_table_names_the_slow_input_and_the_slow_compute(tmp_path: Path) -> None:
    run = make_job(tmp_path, npu=True)
    out = tmp_path / "report"
    result = CliRunner().invoke(
        main, ["report", str(run), "--out", str(out), "--format", "html,json,pdf", "--lang", "en"]
    )
    assert result.exit_code == 0, result.output
    text = ranks_text(out / "report.html")
    lines = text.splitlines()
    assert lines[0] == (
        "rank | node | device | input score | compute score | slowest part | "
        "peak host memory | peak device memory | max temperature"
    )
    assert lines[1].startswith("0 | ")
    assert " | 1.00 | 1.00 | none | 510 MB | 30,000 MB | 60 °C" in lines[1]
    assert (
        lines[2] == "1 | node-1 | NPU 1 | 0.20 | 1.00 | input pipeline | 520 MB | 31,000 MB | 61 °C"
    )
    assert lines[3] == "2 | node-2 | NPU 2 | 1.00 | 0.40 | compute | 530 MB | 32,000 MB | 62 °C"
    ranks = json.loads((out / "report.json").read_text())["runs"][0]["ranks"]
    assert [r["slowest_part"] for r in ranks] == ["none", "input", "compute"]
    assert ranks[1]["input_score"] == pytest.approx(0.2)
    assert (out / "report.pdf").read_bytes().startswith(b"%PDF")


def test_without_benchmark_or_npu_the_cells_say_not_measured(tmp_path: Path) -> None:
    run = make_job(tmp_path, bench=False)
    out = tmp_path / "report"
    CliRunner().invoke(
        main, ["report", str(run), "--out", str(out), "--format", "html", "--lang", "en"]
    )
    lines = ranks_text(out / "report.html").splitlines()
    assert lines[2] == "1 | node-1 | NPU 1 | 0.20 | — | input pipeline | 520 MB | — | —"
    assert lines[3] == "2 | node-2 | NPU 2 | 1.00 | — | none | 530 MB | — | —"


def test_the_ranks_table_in_chinese(tmp_path: Path) -> None:
    run = make_job(tmp_path)
    out = tmp_path / "report"
    CliRunner().invoke(
        main, ["report", str(run), "--out", str(out), "--format", "html", "--lang", "zh"]
    )
    page = (out / "report.html").read_text("utf-8")
    assert "<h2>各 rank</h2>" in page
    lines = ranks_text(out / "report.html").splitlines()
    assert lines[0].startswith("rank 号 | 节点 | 设备 | 输入得分 | 计算得分 | 最慢环节")
    assert "数据输入流水线" in lines[2]


def test_a_single_process_run_has_no_ranks_table(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path / "solo", {"print_every": 0}) as mon:
        for step in range(1, 11):
            mon.log_step(step, loss=1.0)
    out = tmp_path / "report"
    CliRunner().invoke(
        main, ["report", str(tmp_path / "solo"), "--out", str(out), "--format", "html,json"]
    )
    assert 'class="ranks"' not in (out / "report.html").read_text("utf-8")
    assert "ranks" not in json.loads((out / "report.json").read_text())["runs"][0]


def test_converted_worker_logs_get_no_table_of_dashes(tmp_path: Path) -> None:
    """`mindwatch convert` of two workers' logs gives rank folders with nothing the table
    shows (no straggler medians, no hardware, no run.json naming a node)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    fixture = Path(__file__).parents[2] / "fixtures" / "logs" / "mindformers-1.9-worker_0.log"
    for rank in (0, 1):
        (logs / f"worker_{rank}.log").write_text(fixture.read_text())
    assert CliRunner().invoke(main, ["convert", str(logs), str(tmp_path / "run")]).exit_code == 0
    assert (tmp_path / "run" / "rank_1").is_dir()
    out = tmp_path / "report"
    CliRunner().invoke(
        main, ["report", str(tmp_path / "run"), "--out", str(out), "--format", "json"]
    )
    assert "ranks" not in json.loads((out / "report.json").read_text())["runs"][0]
