"""Forensics under ``msrun`` with 2 CPU workers: a bad batch on rank 1 only is named with
its rank, step and sample ids, gathered from rank 1's own flight recorder; a run resumed
with the documented skip-list lines trains past it quietly (scripts/forensics_dp.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mindwatch.forensics import SkipList
from tests.mindspore.test_multicard import msrun_command, msrun_env, worker_log

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

SCRIPT = Path(__file__).with_name("scripts") / "forensics_dp.py"
BAD, RESUME, BATCH = 35, 30, 8


def _run(out: Path, *args: str) -> None:
    done = subprocess.run(
        msrun_command(out, *args, script=SCRIPT),
        env=msrun_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, worker_log(out, 0)[-3000:] + worker_log(out, 1)[-3000:]


def _seen(out: Path, name: str, rank: int) -> dict[int, dict[str, Any]]:
    data = json.loads((out / f"{name}_rank{rank}.json").read_text())
    return {int(step): v for step, v in data.items()}


def _alerts(run: Path) -> list[dict[str, Any]]:
    file = run / "alerts.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []


def test_a_bad_batch_on_rank_1_is_named_and_a_resumed_run_skips_it(tmp_path: Path) -> None:
    _run(tmp_path, f"--bad={BAD}")
    run = tmp_path / "first"
    bad_ids = _seen(tmp_path, "first", 1)[BAD]["ids"]  # what rank 1 really trained on
    assert bad_ids == list(range(100_000 + (BAD - 1) * BATCH, 100_000 + BAD * BATCH))
    spike = next(a for a in _alerts(run) if a["rule"] == "spike")
    assert (spike["step"], spike["rank"]) == (BAD, 1)
    assert spike["sample_ids"] == bad_ids  # rank 1's batch, gathered: not rank 0's
    forensics = spike["forensics"]
    assert forensics["ranks"] == [0, 1]
    assert forensics["batch"] == {**forensics["batch"], "rank": 1, "step": BAD}
    assert forensics["batch"]["sample_ids"] == bad_ids
    # Rank 1's own loss moved, at the step; the layers' norms are of the all-reduced
    # gradient, alike on both ranks: one mover each, with no rank.
    loss = [m for m in forensics["movers"] if m["name"] == "loss"]
    assert [(m["rank"], m["onset"]) for m in loss] == [(1, BAD)]
    assert forensics["first_mover"]["rank"] is None
    assert forensics["first_mover"]["onset"] == BAD
    record = json.loads((run / forensics["file"]).read_text())
    assert [a["rank"] for a in record["per_rank"]] == [0, 1]
    # The skip list holds exactly that batch.
    skip = SkipList.load(run)
    assert sorted(skip.samples) == bad_ids
    assert [(s["step"], s["rank"]) for s in skip.steps] == [(BAD, 1)]
    assert forensics["skip"]["python"][1].startswith("dataset = dataset.filter(SkipList.load(")

    # Resume from step 30's weights with the documented lines: rank 1 never sees the
    # bad samples, its loss at that step is ordinary, and no alert fires.
    _run(tmp_path, f"--resume-from={RESUME}", f"--skip={run}")
    resumed = _seen(tmp_path, "resumed", 1)
    at = BAD - RESUME  # the resumed run counts its steps from 1
    assert not set(bad_ids) & {i for s in resumed.values() for i in s["ids"]}
    assert resumed[at]["ids"] == [i + BATCH for i in bad_ids]  # the next batch moved up
    before = [_seen(tmp_path, "first", 1)[s]["loss"] for s in range(RESUME - 9, RESUME + 1)]
    assert resumed[at]["loss"] < 10 * max(before)
    assert _alerts(tmp_path / "resumed") == []
