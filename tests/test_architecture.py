"""The import contracts of pyproject.toml hold, and each one fails when broken.

Each case copies the package, adds one import that breaks one contract, and runs
import-linter on the copy: a contract that cannot fail would guard nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(src: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=src.parent,
        env={**os.environ, "PYTHONPATH": str(src)},
    )


def test_the_contracts_hold() -> None:
    done = lint(ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("monitor/front.py", "import mindspore", "Only the adapter package imports MindSpore"),
        ("common/warn.py", "import mindwatch.cli", "Layers point one way"),
        ("run/layout.py", "import mindwatch.monitor", "Layers point one way"),
        ("rules/base.py", "import mindwatch.config", "Layers point one way"),
        ("tools/export.py", "import mindwatch.mindspore.cells", "do not import each other"),
        ("config/errors.py", "import mindwatch.config.model", "No import cycles"),
        ("tools/export.py", "from mindwatch import Monitor", "imports the package root"),
    ],
)
def test_each_contract_fails_when_broken(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "mindwatch", src / "mindwatch", ignore=shutil.ignore_patterns("__pycache__")
    )
    target = src / "mindwatch" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}  # noqa\n", "utf-8")
    done = lint(src)
    assert done.returncode != 0, done.stdout
    summary = " ".join(done.stdout.split())  # a long contract name wraps
    assert re.search(re.escape(contract) + r"(?:(?!KEPT|BROKEN).)*BROKEN", summary), summary


def test_large_modules_are_the_documented_ones() -> None:
    """A module over ~400 lines is one concept named in docs/dev/architecture.md."""
    doc = (ROOT / "docs" / "dev" / "architecture.md").read_text(encoding="utf-8")
    items = [line for line in doc.split("## Size", 1)[1].splitlines() if line.startswith("* ")]
    named = {name for line in items for name in re.findall(r"`([\w/]+\.py)`", line)}
    package = ROOT / "src" / "mindwatch"
    large = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if len(path.read_text(encoding="utf-8").splitlines()) > 420
    }
    assert large <= named, f"over ~400 lines, not in architecture.md: {sorted(large - named)}"
    assert named <= {p.relative_to(package).as_posix() for p in package.rglob("*.py")}, named
