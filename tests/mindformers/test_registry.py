"""MindWatchMonitor in MindFormers' real callback registry (MindFormers 1.9).

mindformers 2.0 needs ``hyper-parallel``, which is not on PyPI, so it cannot be
installed here; 1.9 installs with MindSpore 2.9 into a venv of its own (3.4 GB, about a
minute from the package registry), built once in ``.venv-mindformers`` and reused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tbread import scalars

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).parents[2]
VENV = ROOT / ".venv-mindformers"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed-mindformers-1.9.0"


def mindformers_python() -> Path:
    if not STAMP.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        pip = [str(PYTHON), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "mindformers==1.9.0", "mindspore==2.9.0"], check=True, timeout=1800)
        subprocess.run([*pip, "-e", str(ROOT)], check=True, timeout=1800)  # no mindspore extra
        STAMP.touch()
    return PYTHON


def test_a_mindformers_config_builds_and_trains_with_mindwatchmonitor(tmp_path: Path) -> None:
    python = mindformers_python()
    done = subprocess.run(
        [str(python), str(Path(__file__).with_name("mf_train.py")), str(tmp_path)],
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
