"""One run per folder: a second run into a folder is a resume or a new folder next to it,
and the tools say so when a folder already mixes runs (older versions, other tools)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.events.mixing import mixed_runs
from mindwatch.tools.doctor import diagnose
from tests.tbread import scalars

CONFIG = {"print_every": 0, "alerts": {"enabled": False}}

# Each run is its own process, as a user re-running a script is.
SCRIPT = textwrap.dedent(
    """
    import sys
    import mindwatch
    resume = int(sys.argv[3]) if len(sys.argv) > 3 else None
    first = resume or 1
    with mindwatch.Monitor(sys.argv[1], {"print_every": 0}, resume_step=resume) as mon:
        for step in range(first, first + int(sys.argv[2])):
            mon.log_step(step, loss=1.0 / step)
    print(mon.logdir)
    """
)


def _script_run(folder: Path, steps: int, resume: int | None = None) -> tuple[Path, str]:
    args = [sys.executable, "-c", SCRIPT, str(folder), str(steps)]
    done = subprocess.run(
        [*args, *([str(resume)] if resume else [])], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip()), done.stderr


def _info(folder: Path) -> dict[str, object]:
    return json.loads((folder / "run.json").read_text())  # type: ignore[no-any-return]


def test_a_second_run_into_a_folder_goes_to_a_new_folder_next_to_it(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "custom"
    first, said = _script_run(folder, 30)
    assert first == folder
    assert said == ""
    second, said = _script_run(folder, 20)
    third, _ = _script_run(folder, 10)
    assert (second, third) == (folder.with_name("custom-2"), folder.with_name("custom-3"))
    # Printed: where the old run is, where this one goes, and how to resume instead.
    assert f"{folder} holds a finished run (last step 30)" in said
    assert f"this run writes to {second}" in said
    assert "resume_step" in said
    # TensorBoard's own reader: three clean runs, one point per step each.
    for run, steps in ((first, 30), (second, 20), (third, 10)):
        loss = scalars(run)["train/loss"]
        assert [s for s, _ in loss] == list(range(1, steps + 1)), run
        assert mixed_runs(run) is None
        assert _info(run)["status"] == "finished"
        assert _info(run)["last_step"] == steps
    assert _info(first)["next_runs"] == [str(second), str(third)]
    assert _info(second)["previous_run"] == str(first)
    assert _info(third)["previous_run"] == str(first)


def test_a_declared_resume_continues_the_run_in_the_same_folder(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    _script_run(folder, 30)
    again, said = _script_run(folder, 20, resume=21)  # resumed from a step-20 checkpoint
    assert again == folder
    assert "holds" not in said
    assert [s for s, _ in scalars(folder)["train/loss"]] == list(range(1, 41))
    attempts = _info(folder)["attempts"]
    assert [a["resumed_at"] for a in attempts] == [None, 21]  # type: ignore[union-attr,index]
    assert mixed_runs(folder) is None


def test_same_process_twice_and_crashed_and_live_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "run"
    for _ in range(2):  # a notebook training twice into one folder: two runs as well
        with mindwatch.Monitor(folder, CONFIG) as mon:
            mon.log_step(1, loss=1.0)
    assert mon.logdir == tmp_path / "run-2"
    # A crashed run (run.json still "running", its process gone) is an earlier run too.
    crashed = tmp_path / "crashed"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    crashed.mkdir()
    attempt = {"status": "running", "host": os.uname().nodename, "pid": dead.pid, "process": "x"}
    (crashed / "run.json").write_text(json.dumps({"status": "running", "attempts": [attempt]}))
    with caplog.at_level(logging.WARNING), mindwatch.Monitor(crashed, CONFIG) as mon:
        pass
    assert mon.logdir == tmp_path / "crashed-2"
    assert "holds a crashed run" in caplog.text
    # A run another live process is writing right now: never joined.
    live = tmp_path / "live"
    writer = mindwatch.Monitor(live, CONFIG)
    writer.log_step(1, loss=1.0)
    writer.flush()
    with mindwatch.Monitor(live, CONFIG) as mon:
        pass
    writer.close()
    assert mon.logdir == tmp_path / "live-2"
    assert _info(live)["next_runs"] == [str(tmp_path / "live-2")]  # kept by its final write


def test_a_folder_holding_other_files_or_another_tools_events_is_used_or_left(
    tmp_path: Path,
) -> None:
    ckpt = tmp_path / "with-checkpoints"
    ckpt.mkdir()
    (ckpt / "net-1_10.ckpt").write_bytes(b"x")
    with mindwatch.Monitor(ckpt, CONFIG) as mon:
        mon.log_step(1, loss=1.0)
    assert mon.logdir == ckpt  # nothing of a run in it: used
    from tensorboardX import SummaryWriter

    other = tmp_path / "tbx"
    writer = SummaryWriter(str(other))
    writer.add_scalar("loss", 1.0, 1)
    writer.close()
    with mindwatch.Monitor(other, CONFIG) as mon:
        mon.log_step(1, loss=1.0)
    assert mon.logdir == tmp_path / "tbx-2"  # another tool's run, without run.json


def test_no_room_for_a_new_folder_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / ("a" * 254)  # the longest name allowed; "-2" does not fit
    with mindwatch.Monitor(folder, CONFIG) as mon:
        mon.log_step(1, loss=1.0)
    with pytest.raises(mindwatch.LogDirError, match="holds an earlier run") as error:
        mindwatch.Monitor(folder, CONFIG)
    assert "resume_step" in str(error.value)


# ------------------------------------------------------------- folders that already mix


def tensorboardx_run(
    folder: Path, first: int, last: int, *, tag: str = "train/loss", purge: bool = False
) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(folder), purge_step=first if purge else None)
    for step in range(first, last + 1):
        writer.add_scalar(tag, 1.0 / step, step)
    writer.close()
    time.sleep(1.05)  # tensorboardX names its files by the second


def test_mixing_is_found_and_resumes_continuations_and_other_tags_are_not(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    tensorboardx_run(mixed, 1, 50)
    tensorboardx_run(mixed, 1, 40)
    found = mixed_runs(mixed)
    assert found is not None
    assert (
        found.describe() == "2 runs mixed in one folder: steps 1-50 (1 file), steps 1-40 (1 file)"
    )
    resumed = tmp_path / "resumed"
    tensorboardx_run(resumed, 1, 50)
    tensorboardx_run(resumed, 31, 60, purge=True)  # tensorboardX's purge_step: TensorBoard's marker
    continued = tmp_path / "continued"
    tensorboardx_run(continued, 1, 50)
    tensorboardx_run(continued, 51, 60)
    beside = tmp_path / "beside"  # MindFormers' own writer next to mindwatch's
    tensorboardx_run(beside, 1, 50)
    tensorboardx_run(beside, 1, 50, tag="loss")
    assert [mixed_runs(f) for f in (resumed, continued, beside)] == [None, None, None]


def test_doctor_report_and_compare_say_so_and_the_fix_splits_it(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "exp"
    tensorboardx_run(folder, 1, 50)
    tensorboardx_run(folder, 1, 50)
    problems = [f for f in diagnose(folder) if f.verdict == "problem"]
    assert len(problems) == 1
    assert "2 runs mixed in one folder" in problems[0].message
    fix = problems[0].fix.split(": ", 1)[1]
    compare = CliRunner().invoke(main, ["compare", str(folder), "--baseline", str(folder)])
    assert compare.exit_code == 2
    assert "2 runs mixed in one folder" in compare.output
    report = CliRunner().invoke(
        main,
        ["report", str(tmp_path / "runs"), "--out", str(tmp_path / "rep"), "--format", "md,json"],
    )
    assert report.exit_code == 0
    assert "warning: exp: 2 runs mixed in one folder" in report.output
    assert "**Warning** exp: 2 runs mixed" in (tmp_path / "rep" / "report.md").read_text()
    summary = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert "2 runs mixed" in json.dumps(summary)
    # Following the fix gives two clean runs that TensorBoard shows apart.
    subprocess.run(fix, shell=True, check=True)
    assert mixed_runs(folder) is None
    assert mixed_runs(tmp_path / "runs" / "exp-2") is None
    assert [f for f in diagnose(folder) if f.verdict == "problem"] == []
    assert (
        len(scalars(folder)["train/loss"])
        == len(scalars(tmp_path / "runs" / "exp-2")["train/loss"])
        == 50
    )
