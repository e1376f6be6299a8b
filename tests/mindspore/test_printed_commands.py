"""`mindwatch demo`'s closing line works as printed, alone and with `--workers 2` (whose
rank 0 runs under msrun with a PATH of msrun's): the demo is typed as a path from a shell
whose PATH has no mindwatch (a venv not activated), and the printed `... tensorboard DIR`
is then run as printed from that shell until TensorBoard serves, and stopped with Ctrl-C."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.common.test_invocation import SCRIPT, _env, _path_without_mindwatch

pytestmark = pytest.mark.slow


def _serves(words: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """Run ``words`` until TensorBoard says it serves, then Ctrl-C it; its output."""
    proc = subprocess.Popen(
        words, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    timer = threading.Timer(180, proc.kill)  # never hang the suite on a stuck start
    timer.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Press Ctrl-C to stop."):
                proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        timer.cancel()
    assert proc.returncode == 0, lines
    assert any(line.startswith("TensorBoard serves ") for line in lines), lines
    return lines


@pytest.mark.parametrize("workers", [1, 2])
def test_the_demos_tensorboard_line_runs_as_printed(tmp_path: Path, workers: int) -> None:
    typed = [os.path.relpath(SCRIPT, tmp_path)]  # e.g. ../../.venv/bin/mindwatch
    env = {**_env(_path_without_mindwatch()), "COLUMNS": "80"}
    args = ["demo", "--logdir", "runs", "--steps", "30", "--workers", str(workers)]
    done = subprocess.run(
        [*typed, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.rstrip().splitlines()
    assert lines[-2] == "View it in TensorBoard:"
    words = shlex.split(lines[-1])
    assert words == [*typed, "tensorboard", str(tmp_path / "runs")], lines[-1]
    _serves(words, tmp_path, env)
