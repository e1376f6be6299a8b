"""Resume continuity: a job killed at ~250 and resumed from its step-200 checkpoint reads,
in a live TensorBoard, as one clean curve with one point per step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.tbread import scalars
from tests.tbserver import live_tensorboard, query, wait_for_tags

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("scripts") / "resume_train.py"


def _records(path: Path) -> dict[int, float]:
    out = {}
    for line in path.read_text().splitlines():
        step, loss = line.split()
        out[int(step)] = float(loss)
    return out


def _run(tmp_path: Path, phase: str) -> subprocess.Popen[bytes]:
    args = [str(tmp_path / "run"), str(tmp_path / "ckpt"), str(tmp_path / f"{phase}.txt"), phase]
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        env={**os.environ, "GLOG_v": "3"},
        stderr=subprocess.PIPE,
    )


def test_resumed_run_has_one_point_per_step_in_tensorboard(tmp_path: Path) -> None:
    first = _run(tmp_path, "first")
    record = tmp_path / "first.txt"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if record.exists() and max(_records(record) or {0: 0}) >= 250:
            break
        if first.poll() is not None:
            raise AssertionError(f"training ended early: {first.stderr.read()!r}")  # type: ignore[union-attr]
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    crashed = _records(record)
    assert 250 <= max(crashed) < 300
    assert (tmp_path / "ckpt" / "net-2_100.ckpt").exists()

    resumed = _run(tmp_path, "resume")
    assert resumed.wait(300) == 0, resumed.stderr.read()  # type: ignore[union-attr]
    again = _records(tmp_path / "resume.txt")
    assert sorted(again) == list(range(201, 301))
    # The resumed attempt really differs from the crashed one on the steps both ran.
    assert any(again[s] != crashed[s] for s in range(201, max(crashed) + 1))

    with live_tensorboard(tmp_path) as url:
        wait_for_tags(url, {"train/loss"})
        points = query(url, "/data/plugin/scalars/scalars", run="run", tag="train/loss")
    steps = [p[1] for p in points]
    assert steps == list(range(1, 301))  # every step exactly once: no fold-back, no duplicate
    values = {p[1]: p[2] for p in points}
    f32 = np.float32
    assert all(f32(values[s]) == f32(crashed[s]) for s in range(1, 201))
    assert all(f32(values[s]) == f32(again[s]) for s in range(201, 301))

    # Programs reading the files (TensorBoard's EventAccumulator) see the same clean
    # series: the purge marker, not a server heuristic, is what hides the crashed tail.
    read = scalars(tmp_path / "run")["train/loss"]
    assert [s for s, _ in read] == list(range(1, 301))
    assert all(f32(v) == f32(again[s]) for s, v in read if s > 200)

    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [a["status"] for a in info["attempts"]] == ["crashed", "finished"]
    assert info["attempts"][1]["resumed_at"] == 201
    assert info["status"] == "finished"
