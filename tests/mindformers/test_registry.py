"""MindWatchMonitor in MindFormers' real callback registry (MindFormers 1.9)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.tbread import scalars


def test_a_mindformers_config_builds_and_trains_with_mindwatchmonitor(
    tmp_path: Path, mindformers_python: Path
) -> None:
    done = subprocess.run(
        [str(mindformers_python), str(Path(__file__).with_name("mf_train.py")), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # MindFormers writes its own logs below the working folder
        env={**os.environ, "GLOG_v": "3"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"ok": True, "mindformers": "1.9.0"}
    losses = scalars(tmp_path / "run")["train/loss"]
    assert [s for s, _ in losses] == list(range(1, 31))
    assert "per_print_times" in done.stderr  # a MindFormers-only key, named in a warning
