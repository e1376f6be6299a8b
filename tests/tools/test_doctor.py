"""``mindwatch doctor``: deliberately broken set-ups, each named with its fix."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.common.invocation import mindwatch_command, python_command
from mindwatch.tools.doctor import checks as doctor


def run_doctor(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["doctor", *args])
    return result.exit_code, result.output


def healthy_run(folder: Path, **config: object) -> Path:
    with mindwatch.Monitor(folder, {"print_every": 0, **config}) as mon:
        for step in range(1, 21):
            mon.log_step(step, loss=1.0 / step)
    return folder


def test_a_healthy_run_is_healthy(tmp_path: Path) -> None:
    healthy_run(tmp_path / "runs" / "exp")
    code, out = run_doctor(str(tmp_path / "runs"))
    assert code == 0, out
    assert out.strip().endswith("healthy")
    assert "1 run with TensorBoard event files" in out
    code, chinese = run_doctor("--lang", "zh", str(tmp_path / "runs"))
    assert code == 0, chinese
    assert chinese.strip().endswith("一切正常")
    assert not untranslated(chinese), chinese


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("missing", "does not exist"),
        ("empty", "no TensorBoard event files (*tfevents*) below"),
        ("mindspore_summary", "1 MindSpore summary file (*_MS"),
        ("worker_logs", "mindwatch convert"),
        ("too_deep", "LOGDIR is too deep"),
        ("a_file", "is a file; TensorBoard's --logdir takes a folder"),
        ("crashed", "its process is gone but the run was never closed"),
        ("stale", "marked running, but nothing was written for"),
        ("collect_freq", "collect_freq 50 skipped every step the run took"),
        ("non_ascii", "non-ASCII characters"),
        ("chdir", "changed its working directory"),
    ],
)
def test_a_broken_setup_is_named_with_its_fix(
    tmp_path: Path, setup: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "runs"
    if setup == "missing":
        target = tmp_path / "rnus"
        (tmp_path / "runs").mkdir()
    elif setup == "empty":
        target.mkdir()
    elif setup == "mindspore_summary":
        (target / "summary").mkdir(parents=True)
        (target / "summary" / "events.out.events.summary.1700000000.0.vm_MS").write_bytes(b"x")
    elif setup == "worker_logs":
        (target / "msrun_log").mkdir(parents=True)
        (target / "msrun_log" / "worker_0.log").write_text("epoch: 1 step: 1, loss is 2.3\n")
    elif setup == "too_deep":
        healthy_run(target)
        (target / "sub").mkdir()
        target = target / "sub"
    elif setup == "a_file":
        healthy_run(target)
        target = next(target.glob("events.out.tfevents.*"))
    elif setup in ("crashed", "stale"):
        healthy_run(target)
        info = json.loads((target / "run.json").read_text())
        info["status"] = "running"
        if setup == "crashed":
            info["pid"] = 2**22 + 12345  # no such process
        else:
            info["pid"] = os.getpid()  # alive, but silent for hours
            old = time.time() - 3 * 3600
            for f in target.glob("events.out.tfevents.*"):
                os.utime(f, (old, old))
        (target / "run.json").write_text(json.dumps(info))
    elif setup == "collect_freq":
        healthy_run(target, collect_freq=50)
    elif setup == "chdir":
        # The script did os.chdir("job") before creating its writer for "runs".
        healthy_run(tmp_path / "job" / "runs")
        monkeypatch.chdir(tmp_path)
    elif setup == "non_ascii":
        target = tmp_path / "运行"
        healthy_run(target)
    code, out = run_doctor(str(target))
    assert code == 1, out
    assert expected in out
    assert "fix:" in out
    code, chinese = run_doctor("--lang", "zh", str(target))
    assert code == 1, chinese
    assert not untranslated(chinese), chinese
    if not expected.startswith("mindwatch "):  # a command stays a command
        assert expected not in chinese


CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def untranslated(out: str) -> list[str]:
    """The lines of Chinese doctor output whose own text (after the verdict and the
    check's name, or after the fix label) has no Chinese in it: English left over. A fix
    that is only a command to run (mindwatch ..., python -m pip ...) needs none."""
    commands = (mindwatch_command(), python_command())
    left = []
    for line in out.splitlines():
        text = line.strip()
        if text.startswith("["):
            text = text.split("] ", 1)[1].split("：", 1)[-1]
        elif text.startswith("修复："):
            text = text.removeprefix("修复：")
            if text.startswith(commands):
                continue
        if not CJK.search(text):
            left.append(line)
    return left


def _broken_runs(root: Path) -> Path:
    """A run whose event file was cut after it ended, and one whose process is gone."""
    healthy_run(root / "cut")
    (file,) = (root / "cut").glob("events.out.tfevents.*")
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    healthy_run(root / "crashed")
    info = json.loads((root / "crashed" / "run.json").read_text())
    info.update(status="running", pid=2**22 + 12345)  # no such process
    (root / "crashed" / "run.json").write_text(json.dumps(info))
    return root


def _doctor_process(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The real command, in the locale ``env`` sets (LANGUAGE left out: it would win)."""
    names = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")
    clean = {k: v for k, v in os.environ.items() if k not in names}
    return subprocess.run(
        [sys.executable, "-m", "mindwatch", "doctor", str(root)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_doctor_speaks_the_locales_language(tmp_path: Path) -> None:
    """Under LANG=zh_CN.UTF-8 every verdict, check, message, fix and the summary are
    Chinese, and none of the English text is left; English without a Chinese locale."""
    root = _broken_runs(tmp_path / "runs")
    english = _doctor_process(root, LANG="C.UTF-8")
    chinese = _doctor_process(root, LANG="zh_CN.UTF-8")
    assert (english.returncode, chinese.returncode) == (1, 1), english.stderr + chinese.stderr
    assert english.stdout.splitlines()[-1] == "4 problems found"
    assert chinese.stdout.splitlines()[-1] == "发现 4 个问题"
    assert "[问题] 运行 crashed：其进程已不在" in chinese.stdout
    assert "被截断为" in chinese.stdout
    assert not untranslated(chinese.stdout), chinese.stdout
    for line in english.stdout.splitlines():  # no English message in the Chinese output
        message = line.strip().split(": ", 1)[-1]
        if not message.startswith(mindwatch_command()):
            assert message not in chinese.stdout, message
    assert len(english.stdout.splitlines()) == len(chinese.stdout.splitlines())


def test_a_bad_config_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "monitor.yaml"
    bad.write_text("collect_freq: 0\nflush_sec: 2\n")
    code, out = run_doctor("--config", str(bad))
    assert code == 1
    assert "collect_freq = 0" in out
    assert "did you mean 'flush_secs'" in out


def test_low_disk_and_network_file_systems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    healthy_run(tmp_path)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda _: usage(100 << 30, 99 << 30, 1 << 28))
    monkeypatch.setattr(doctor, "_mounts", lambda: [(str(tmp_path.resolve()), "nfs4")])
    findings = {f.check: f for f in doctor.diagnose(tmp_path)}
    assert findings["disk"].verdict == "warning"
    assert "0.2 GiB free" in findings["disk"].message
    assert findings["file system"].verdict == "info"
    assert "network file system (nfs4" in findings["file system"].message


def test_mode_and_sink_consequences_are_explained(tmp_path: Path) -> None:
    healthy_run(tmp_path, hparams={"mode": "PYNATIVE", "dataset_sink_mode": True})
    code, out = run_doctor(str(tmp_path))
    assert code == 0  # information, not a problem
    assert "PyNative mode" in out
    assert "dataset sink mode" in out
