"""``benchmarks/grad_norm.py``, the quickstart page's measurement of what the gradient
norm costs, runs on real MindSpore and prints what the page shows.

The page's ten rounds of 80 steps for three models take about two minutes of CPU, most
of it the large model's; here two rounds of 12 steps run (two is the fewest its
percentiles take), and the output must match the page's block as the docs' own test
compares output (numbers may differ, every word and row must be there). The numbers
are not asserted: a shared, noisy machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mindspore.test_docs_run import difference, matches
from tests.test_docs import fenced

pytestmark = [pytest.mark.slow, pytest.mark.mindspore]

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "python benchmarks/grad_norm.py --rounds 10 --steps 80"


def shown() -> list[str]:
    """The quickstart page's output under ``$ COMMAND``."""
    for block in fenced(ROOT / "docs" / "quickstart.md"):
        lines = block.text.splitlines()
        if block.lang == "console" and lines and lines[0] == f"$ {COMMAND}":
            return lines[1:]
    raise AssertionError(f"docs/quickstart.md shows no `$ {COMMAND}` block")


def test_the_benchmark_prints_the_pages_table() -> None:
    args = ["--rounds", "2", "--steps", "12"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "grad_norm.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GLOG_v": "3"},
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    real = done.stdout.splitlines()
    assert real[0] == "2 rounds x 12 steps, alternating; GRAPH mode, CPU, no callbacks"
    assert matches(shown(), real), difference(shown(), real)
    for row in real[2:]:
        model_ms, norm_ms, ratio = (float(row.split()[i]) for i in (-6, -4, -2))
        low, high = (float(v) for v in row.split()[-1].strip("()").split("-"))
        assert model_ms > 0
        assert norm_ms > 0
        assert 0 < low <= ratio <= high  # the quartiles of the ratios, never outside
