"""The examples in examples/ run as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.tbread import scalars

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow
def test_custom_loop_example(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "custom_loop.py"),
            "--logdir",
            str(tmp_path),
            "--steps",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "[mindwatch] step 50/100 | loss" in result.stdout
    assert "eval at step 100" in result.stdout
    read = scalars(tmp_path)
    assert [s for s, _ in read["train/loss"]] == list(range(1, 101))
    assert [s for s, _ in read["eval/loss"]] == [100]
    assert all(v > 0 for _, v in read["train/grad_norm"])
