"""A follow-up command mindwatch prints works as printed, from the shell that ran it:
the real ``mindwatch`` run from a folder whose PATH has no ``mindwatch`` (a venv not
activated), typed as a path, as ``python -m mindwatch``, or found on PATH; then the
printed line is run as printed (shell-split), from the same folder with the same PATH."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mindwatch.common import invocation

SCRIPT = Path(sys.executable).with_name("mindwatch")
# A command in backticks, as the hints print it: `<mindwatch> doctor <dir>`.
QUOTED = re.compile(r"`([^`]*(?:doctor|demo|explain)[^`]*)`")


def _path_without_mindwatch() -> str:
    """The test's PATH without any folder holding a mindwatch or this Python."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    keep = [
        d
        for d in dirs
        if d and not (Path(d, "mindwatch").exists() or Path(d) == Path(sys.executable).parent)
    ]
    return os.pathsep.join(keep or ["/usr/bin", "/bin"])


def _env(path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != invocation.ENVIRONMENT}
    return {**env, "PATH": path, "GLOG_v": "3"}


def _run(words: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _hint(output: str, verb: str) -> str:
    found = [m for m in QUOTED.findall(output) if f" {verb}" in m]
    assert found, output
    return found[0]


def _ways(tmp_path: Path) -> list[tuple[str, list[str], str]]:
    """(name, the words typed, PATH) of each way a user starts mindwatch."""
    bare = _path_without_mindwatch()
    return [
        ("relative path", [os.path.relpath(SCRIPT, tmp_path)], bare),
        ("absolute path", [str(SCRIPT)], bare),
        ("python -m", [os.path.relpath(sys.executable, tmp_path), "-m", "mindwatch"], bare),
        ("on PATH", ["mindwatch"], os.pathsep.join([str(SCRIPT.parent), bare])),
    ]


@pytest.mark.parametrize("way", range(4), ids=["relative", "absolute", "python-m", "on-path"])
def test_the_doctor_hint_of_tensorboard_runs_as_printed(tmp_path: Path, way: int) -> None:
    name, typed, path = _ways(tmp_path)[way]
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _env(path)
    shown = _run([*typed, "tensorboard", "empty"], tmp_path, env)
    assert shown.returncode == 2, shown.stderr
    line = _hint(shown.stderr, "doctor")
    words = shlex.split(line)
    expected = typed if name != "on PATH" else ["mindwatch"]
    assert words == [*expected, "doctor", "empty"], (name, line)
    ran = _run(words, tmp_path, env)  # as printed: exit 1, problems found, with their fixes
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "no TensorBoard event files" in ran.stdout


def test_the_demo_hint_of_a_missing_folder_runs_as_printed(tmp_path: Path) -> None:
    typed = [os.path.relpath(SCRIPT, tmp_path)]
    env = _env(_path_without_mindwatch())
    shown = _run([*typed, "tensorboard", "no-such-folder"], tmp_path, env)
    words = shlex.split(_hint(shown.stderr, "demo"))
    assert words == [*typed, "demo"]
    helped = _run([*words, "--help"], tmp_path, env)  # the demo itself trains for minutes
    assert helped.returncode == 0, helped.stderr
    assert "Train a small MindSpore model" in helped.stdout


def test_processes_mindwatch_starts_print_the_parents_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(invocation.ENVIRONMENT, ".venv/bin/mindwatch")
    assert invocation.command_line("tensorboard", "/runs/a b") == (
        ".venv/bin/mindwatch tensorboard '/runs/a b'"
    )


def test_a_script_in_the_current_folder_is_named_with_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mindwatch`` alone would be looked up on PATH: the one here is ``./mindwatch``."""
    script = tmp_path / "mindwatch"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", _path_without_mindwatch())
    monkeypatch.setattr(sys, "argv", ["mindwatch", "demo"])
    assert invocation.mindwatch_command() == "./mindwatch"
    monkeypatch.setenv("PATH", str(tmp_path))
    assert invocation.mindwatch_command() == "mindwatch"
