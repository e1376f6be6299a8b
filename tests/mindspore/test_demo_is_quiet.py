"""A clean `mindwatch demo` raises no alert: seeds whose noisy small-batch loss once made
the divergence rule (and, before, the throughput rule on a busy machine) fire.

Its runs have the machine to themselves (``machine_to_itself``): with this suite's msrun
jobs beside it, a demo's compute once went from 1.7 to 40 ms a step for 60 steps, and
``throughput_drop`` rightly said so; what is judged here is that a clean run's own
numbers raise nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))

pytestmark = pytest.mark.usefixtures("machine_to_itself")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 11])
def test_a_clean_demo_raises_no_alert(tmp_path: Path, seed: int) -> None:
    done = subprocess.run(
        [MINDWATCH, "demo", "--seed", str(seed), "--logdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "alerts: none" in done.stdout, done.stdout
    assert not list(tmp_path.glob("*/alerts.jsonl")) or all(
        p.read_text() == "" for p in tmp_path.glob("*/alerts.jsonl")
    )
