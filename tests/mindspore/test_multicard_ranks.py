"""Real ``msrun`` jobs (2 CPU workers) read back rank by rank: the report's Ranks table
names the rank whose input pipeline is slow, and ``doctor`` the rank that stopped."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from mindwatch.cli import main
from tests.mindspore.test_multicard import msrun, worker_log

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def test_the_report_names_the_rank_with_the_slow_input_pipeline(tmp_path: Path) -> None:
    """Rank 1 sleeps 200 ms per batch while loading it: far longer than a step even on a
    loaded 2-core machine (where a 20 ms slowdown hid behind 30-90 ms steps and the
    batches prefetched while the graph compiled)."""
    config = {
        "per_rank": True,
        "aggregate_every": 10,
        "flush_secs": 0.2,
        "alerts": {"straggler": {"interval": 5}},
    }
    done = msrun(
        tmp_path, "model", "--steps=80", "--slow-input-ms=200", f"--config={json.dumps(config)}"
    )
    assert done.returncode == 0, worker_log(tmp_path, 0)[-3000:]
    facts = json.loads((tmp_path / "run" / "rank_1" / "rank.json").read_text())
    assert (facts["rank"], facts["hardware"]["device_id"]) == (1, 1)
    out = tmp_path / "report"
    result = CliRunner().invoke(
        main, ["report", str(tmp_path / "run"), "--out", str(out), "--format", "json,html"]
    )
    assert result.exit_code == 0, result.output
    ranks = json.loads((out / "report.json").read_text())["runs"][0]["ranks"]
    assert [(r["rank"], r["node"], r["device"], r["device_id"]) for r in ranks] == [
        (0, socket.gethostname(), "CPU", 0),
        (1, socket.gethostname(), "CPU", 1),
    ]
    assert [r["slowest_part"] for r in ranks] == ["none", "input"]
    assert ranks[1]["input_score"] < 0.4 <= ranks[0]["input_score"]
    assert all(r["peak_rss_mb"] > 50 for r in ranks)  # this process's own RSS, sampled
    assert 'class="ranks"' in (out / "report.html").read_text("utf-8")


def test_doctor_names_the_rank_that_left_the_job(tmp_path: Path) -> None:
    """Rank 1 leaves at step 13; with no gradient all-reduce rank 0 trains on alone (one
    timeout of mindwatch's own reduction), so rank 1's folder stops while rank 0's goes on."""
    config = {"per_rank": True, "aggregate_every": 5, "aggregate_timeout": 3, "flush_secs": 0.2}
    msrun(
        tmp_path,
        "loop",
        "--no-dp",
        "--die-at=13",
        "--steps=60",
        f"--config={json.dumps(config)}",
        env={"MS_NODE_TIMEOUT": "10"},
    )
    assert "rank 0 of 2 done" in worker_log(tmp_path, 0)
    result = CliRunner().invoke(main, ["doctor", str(tmp_path / "run")])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if "stopped reporting" in line]
    assert len(lines) == 1, result.output
    # Its points up to the last flush before it left, or none (killed before the first).
    # A custom loop that does not tell Monitor its device kind: the id alone.
    assert f"rank 1 ({socket.gethostname()}, device 1) " in lines[0]
    assert " last wrote step " in lines[0] or " wrote no step " in lines[0]
    assert lines[0].endswith("the other ranks are at step 60")
