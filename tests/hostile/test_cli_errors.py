"""What the checking commands do with bad files and with their own crashes (issue 20,
item 6): exit status 2 with the file and the reason, never 1 (which they define as
"alerts" / "regression" / "problems") and never a traceback."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch import cli
from mindwatch.cli import main
from tests.hostile.promise import exit_2, no_traceback

GBK_BROKEN = "print_every: 7\nrun_name: café\n".encode("latin-1")  # neither UTF-8 nor GBK
CHINESE = "# 告警规则（中文注释）\nalerts:\n  stall:\n    seconds: 1200\n"


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), env=env)


def _run_folder(folder: Path, losses: list[float]) -> Path:
    with mindwatch.Monitor(folder, {"print_every": 0, "alerts": {"enabled": False}}) as mon:
        for step, loss in enumerate(losses, start=1):
            mon.log_step(step, loss=loss)
    return folder


def test_watch_with_an_undecodable_config_exits_2_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "latin.yaml"
    config.write_bytes(GBK_BROKEN)
    result = run("watch", str(tmp_path), "--once", "--config", str(config))
    exit_2(result, str(config), "UTF-8", "line 2")  # it was a UnicodeDecodeError, exit 1


@pytest.mark.parametrize("encoding", ["utf-16", "gbk", "utf-8-sig"])
def test_watch_reads_a_config_saved_by_a_windows_editor(tmp_path: Path, encoding: str) -> None:
    config = tmp_path / "rules.yaml"
    config.write_bytes(CHINESE.encode(encoding))
    (tmp_path / "runs").mkdir()
    result = run("watch", str(tmp_path / "runs"), "--once", "--config", str(config))
    assert result.exit_code == 0, result.output
    no_traceback(result.output)


def test_compare_with_undecodable_tolerances_exits_2_naming_the_file(tmp_path: Path) -> None:
    base = _run_folder(tmp_path / "base", [1.0, 0.8, 0.6])
    tolerances = tmp_path / "tol.yaml"
    tolerances.write_bytes("loss_rtol: 0.1  # café\n".encode("latin-1"))  # é, then a newline
    result = run("compare", str(base), "--baseline", str(base), "--tolerances", str(tolerances))
    exit_2(result, str(tolerances), "UTF-8")  # it exited 1: "regression"


def test_compare_reads_utf16_tolerances_and_refuses_nonsense_numbers(tmp_path: Path) -> None:
    base = _run_folder(tmp_path / "base", [1.0, 0.8, 0.6])
    tolerances = tmp_path / "tol.yaml"
    tolerances.write_bytes("# 容差\nloss_rtol: 0.1\n".encode("utf-16"))
    ok = run("compare", str(base), "--baseline", str(base), "--tolerances", str(tolerances))
    assert ok.exit_code == 0, ok.output
    for bad in ("loss_rtol: .nan\n", "checkpoints: 1000000000000000000000000000000\n", "1: 2\n"):
        tolerances.write_text(bad, encoding="utf-8")
        result = run("compare", str(base), "--baseline", str(base), "--tolerances", str(tolerances))
        exit_2(result, "tolerances")


@pytest.mark.parametrize(
    "args",
    [
        ["watch", ".", "--interval", "nan"],
        ["watch", ".", "--interval", "inf"],
        ["watch", ".", "--once", "--stall-secs", "nan"],
        ["watch", ".", "--once", "--stall-secs", "1e400"],
        ["runs", ".", "--active-secs", "nan"],
        ["convert", "a", "b", "--interval", "inf"],
    ],
)
def test_non_finite_seconds_on_the_command_line_are_usage_errors(
    tmp_path: Path, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(*args)
    exit_2(result, args[-2])  # click's usage error, naming the option


# ------------------------------------------------------------------ the last line


def _crash(*_: Any, **__: Any) -> Any:
    raise RuntimeError("an input no check foresaw")


# Each checking command with something it calls made to fail as a bug would.
CRASHES = {
    "watch": ("mindwatch.tools.watch.watch", ["watch", "{d}", "--once"]),
    "report": ("mindwatch.tools.report.summarize", ["report", "{d}", "--out", "{o}"]),
    "compare": ("mindwatch.tools.compare.compare_runs", ["compare", "{d}", "--baseline", "{d}"]),
    "export": ("mindwatch.tools.tables.read_scalars", ["export", "{d}", "--out", "{o}.csv"]),
    "doctor": ("mindwatch.tools.doctor.diagnose", ["doctor", "{d}"]),
    "convert": ("mindwatch.tools.convert.plan_conversion", ["convert", "{d}", "{o}"]),
    "runs": ("mindwatch.tools.runs.prune", ["runs", "{d}"]),
    "tensorboard": ("mindwatch.tools.board.check_logdir", ["tensorboard", "{d}"]),
    "board": ("mindwatch.tools.board.check_logdir", ["board", "{d}"]),
    "explain": ("mindwatch.tools.explain.read_incidents", ["explain", "{d}"]),
}


def test_every_checking_command_is_covered() -> None:
    assert set(CRASHES) == set(cli.CHECKING_COMMANDS)


@pytest.mark.parametrize("command", sorted(CRASHES))
def test_a_crash_in_a_checking_command_exits_2_with_one_line(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, args = CRASHES[command]
    module, name = target.rsplit(".", 1)
    __import__(module)
    monkeypatch.setattr(sys.modules[module], name, _crash)
    folder = _run_folder(tmp_path / "run", [1.0, 0.5])
    argv = [a.format(d=folder, o=tmp_path / "out") for a in args]
    result = run(*argv)
    output = exit_2(result, f"mindwatch {command} failed", "RuntimeError", "no check foresaw")
    assert "MINDWATCH_DEBUG=1" in output
    assert len([line for line in output.splitlines() if "RuntimeError" in line]) == 1


def test_the_crash_line_never_shows_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception's text may quote a webhook URL with its token: the line is redacted."""
    import mindwatch.tools.doctor

    def leak(*_: Any, **__: Any) -> Any:
        raise RuntimeError(
            "POST https://oapi.dingtalk.com/robot/send?access_token=s3cr3tT0ken failed"
        )

    monkeypatch.setattr(mindwatch.tools.doctor, "diagnose", leak)
    output = exit_2(run("doctor", str(tmp_path)), "mindwatch doctor failed", "oapi.dingtalk.com")
    assert "s3cr3tT0ken" not in output


def test_mindwatch_debug_shows_the_traceback_and_still_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mindwatch.tools.doctor

    monkeypatch.setattr(mindwatch.tools.doctor, "diagnose", _crash)
    result = run("doctor", str(tmp_path), env={"MINDWATCH_DEBUG": "1"})
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.output
    assert "mindwatch doctor failed: RuntimeError" in result.output


def test_exit_1_still_means_findings_and_usage_errors_stay_2(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        mon.log_step(1, loss=math.nan)  # an alert for watch
    assert run("watch", str(tmp_path / "run"), "--once").exit_code == 1
    assert run("watch", "--no-such-option").exit_code == 2
    assert run("watch", str(tmp_path / "missing"), "--once").exit_code == 2


def test_the_installed_command_exits_2_on_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "latin.yaml"
    config.write_bytes(GBK_BROKEN)
    command = ["watch", str(tmp_path), "--once", "--config", str(config)]
    result = subprocess.run(
        [sys.executable, "-m", "mindwatch", *command],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    exit_2(result, str(config), "UTF-8")
