"""docs/hostile-inputs.md shows what mindwatch really does with each hostile input: the
generator runs every case (asserting its promise as it goes) and must reproduce the page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_hostile_inputs_page_is_what_the_code_does() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_hostile_inputs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
