"""The MindFormers venv: mindformers 1.9 with MindSpore 2.9, built once, reused.

mindformers 2.0 needs ``hyper-parallel``, which is not on PyPI, so it cannot be
installed here; 1.9 installs with MindSpore 2.9 into a venv of its own (3.4 GB), built
once in ``.venv-mindformers`` and reused. mindwatch goes in as an editable install
without its ``mindspore`` extra, so it runs on the MindSpore MindFormers brought.

uv (the ``dev`` extra) installs it: 16 s and 22 s of CPU from a cold cache, where pip
took 75 s and 74 s of CPU (pip resolves one package at a time; the 65 packages and their
versions are the same). uv reads PyPI, not pip's configuration: this venv holds no
package pip's local wheels or constraints are there for (torch).

Its modules are compiled to bytecode at install (``--compile-bytecode``, which pip does
by default and uv does not): without it, and with ``PYTHONDONTWRITEBYTECODE`` set (as on
this project's machines), every process compiled MindSpore and MindFormers from source
again, ``import mindformers`` taking 9.4 s of CPU instead of 3.4 s, in each of the
MindFormers tests' training processes. The stamp names the recipe, so a venv built by
an older one is built again.

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
STAMP = VENV / ".installed-mindformers-1.9.0-bytecode"
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
        pip = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--compile-bytecode"]
        pip += ["--python", str(PYTHON)]
        subprocess.run(
            [*pip, "mindformers==1.9.0", "mindspore==2.9.0"], check=True, timeout=BUILD_TIMEOUT
        )
        # no mindspore extra
        subprocess.run([*pip, "-e", str(ROOT)], check=True, timeout=BUILD_TIMEOUT)
        STAMP.touch()
