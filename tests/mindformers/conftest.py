"""The MindFormers venv: mindformers 1.9 with MindSpore 2.9, built once, reused.

mindformers 2.0 needs ``hyper-parallel``, which is not on PyPI, so it cannot be
installed here; 1.9 installs with MindSpore 2.9 into a venv of its own (3.4 GB), built
once in ``.venv-mindformers`` and reused. mindwatch goes in as an editable install
without its ``mindspore`` extra, so it runs on the MindSpore MindFormers brought.

uv (the ``dev`` extra) installs it: 16 s and 22 s of CPU from a cold cache, where pip
took 75 s and 74 s of CPU (pip resolves one package at a time; the 65 packages and their
versions are the same). uv reads PyPI, not pip's configuration: this venv holds no
package pip's local wheels or constraints are there for (torch).

Bytecode: uv does not compile at install (pip does), and this project's machines set
``PYTHONDONTWRITEBYTECODE``; then every process compiled MindSpore and MindFormers from
source again, ``import mindformers`` taking 9.4 s of CPU instead of 3.4 s, in each of
the MindFormers tests' training processes. ``make test`` lets Python write bytecode (the
Makefile's ``pytest`` target), so the first process compiles the modules it imports and
the others read them. Compiling the whole venv at install instead (uv's
``--compile-bytecode``, 12,000 modules) cost as much CPU as the suite's processes save.

Under pytest-xdist every worker has its own session, so several may reach the fixture at
once: the build holds a file lock (``.venv-mindformers.lock``), and a worker that finds
the venv being built waits for it and then uses it. The stamp is written last, so a build
that was killed half-way is started again, never used. ``conftest.py`` at the top keeps
the MindFormers tests on one worker (``--dist loadgroup``), so the others never wait.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).parents[2]
VENV = ROOT / ".venv-mindformers"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed-mindformers-1.9.0"
LOCK = ROOT / ".venv-mindformers.lock"
BUILD_TIMEOUT = 1800.0  # two installs, each up to that; a lock held longer is a hang


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/mindformers" in str(item.fspath):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def mindformers_python() -> Path:
    build()
    return PYTHON


def build() -> None:
    """Build the venv unless a finished one is there (at most one process at a time)."""
    if STAMP.exists():
        return
    with FileLock(str(LOCK), timeout=2 * BUILD_TIMEOUT):
        if STAMP.exists():  # another worker built it while this one waited
            return
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        pip = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", str(PYTHON)]
        subprocess.run(
            [*pip, "mindformers==1.9.0", "mindspore==2.9.0"], check=True, timeout=BUILD_TIMEOUT
        )
        # no mindspore extra
        subprocess.run([*pip, "-e", str(ROOT)], check=True, timeout=BUILD_TIMEOUT)
        STAMP.touch()
