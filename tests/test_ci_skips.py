"""Under CI a skipped test fails the run, naming what is missing (tests/ci_skips.py).

Each case is a small test file run by a real pytest in a subprocess with the plugin:
a module that ``importorskip``s a package that is not installed (what a broken
MindSpore install does to tests/mindspore), a fixture that skips for a missing program
(the Chromium, PDF and Prometheus fixtures), and a test that skips in its body.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "module": """
import pytest
pytest.importorskip("mindwatch_no_such_package")

def test_never_runs():
    pass
""",
    "fixture": """
import shutil
import pytest

@pytest.fixture
def program():
    if shutil.which("mindwatch-no-such-program") is None:
        pytest.skip("mindwatch-no-such-program is not installed: apt-get install it")

def test_needs_it(program):
    pass
""",
    "body": """
import pytest

def test_skips():
    pytest.skip("needs something this machine lacks")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_expected_to_fail():
    assert False
""",
}


def run_pytest(
    tmp_path: Path, source: str, ci: str | None, *options: str
) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_case.py"
    test.write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.ci_skips",
            "-ra",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            *options,
            str(test),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# `make test` runs the suite on pytest-xdist workers (tests/schedule.py): a skip on a
# worker must fail the run as it does in one process.
@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadgroup"]], ids=["1", "xdist"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_skip_fails_under_ci_and_names_its_reason(
    tmp_path: Path, case: str, workers: list[str]
) -> None:
    result = run_pytest(tmp_path, CASES[case], "true", *workers)
    # 1: a failed test; 2: a collection error, which stops the whole run (under xdist
    # a worker's collection error is an error of the run: 1)
    code = 2 if case == "module" and not workers else 1
    assert result.returncode == code, result.stdout + result.stderr
    assert "skipped under CI='true'" in result.stdout, result.stdout
    reason = {
        "module": "mindwatch_no_such_package",
        "fixture": "apt-get install it",
        "body": "needs something this machine lacks",
    }[case]
    assert reason in result.stdout, result.stdout
    if case == "body":  # an xfail stays an xfail
        assert "1 xfailed" in result.stdout, result.stdout


@pytest.mark.parametrize("ci", [None, "false"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_outside_ci_a_skip_is_reported_as_skipped(
    tmp_path: Path, case: str, ci: str | None
) -> None:
    result = run_pytest(tmp_path, CASES[case], ci=ci)
    # 5: pytest's "no tests collected", when the module itself is skipped
    assert result.returncode == (5 if case == "module" else 0), result.stdout + result.stderr
    assert "SKIPPED" in result.stdout, result.stdout
