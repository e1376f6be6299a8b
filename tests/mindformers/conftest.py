"""The MindFormers venv: mindformers 1.9 with MindSpore 2.9, built once, reused.

mindformers 2.0 needs ``hyper-parallel``, which is not on PyPI, so it cannot be
installed here; 1.9 installs with MindSpore 2.9 into a venv of its own (3.4 GB, about a
minute from the package registry), built once in ``.venv-mindformers`` and reused.
mindwatch goes in as an editable install without its ``mindspore`` extra, so it runs on
the MindSpore MindFormers brought.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
VENV = ROOT / ".venv-mindformers"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed-mindformers-1.9.0"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/mindformers" in str(item.fspath):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def mindformers_python() -> Path:
    if not STAMP.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        pip = [str(PYTHON), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "mindformers==1.9.0", "mindspore==2.9.0"], check=True, timeout=1800)
        subprocess.run([*pip, "-e", str(ROOT)], check=True, timeout=1800)  # no mindspore extra
        STAMP.touch()
    return PYTHON
