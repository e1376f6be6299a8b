"""``doctor`` and ``watch`` name the rank of a data-parallel run that stopped reporting.

The run is written as a job writes it: rank 0's monitor keeps the run open
(``run.json`` says running), and each rank's own folder holds event files from
mindwatch's writer and the ``rank.json`` a rank writes under reduction. Rank 1's last
point is 95 s old (the writer's wall times), the others' are fresh.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.common.i18n import set_language
from mindwatch.events.writer import EventFileWriter
from mindwatch.run.rank_file import write_rank_file


def write_rank(folder: Path, rank: int, last_step: int, last_wall: float) -> None:
    with EventFileWriter(folder) as writer:
        for step in range(1, last_step + 1):
            wall = last_wall - (last_step - step) * 0.1
            writer.add_scalar("train/loss", 1.0 / step, step, wall_time=wall)
    write_rank_file(folder, rank=rank, hardware={"node": f"node-{'ab'[rank]}", "device_id": rank})


@contextlib.contextmanager
def running_job(root: Path, lag: float) -> Iterator[Path]:
    """A running job whose rank 1 stopped at step 120, ``lag`` seconds before rank 0's
    newest point at step 400."""
    run = root / "job"
    monitor = mindwatch.Monitor(run, {"print_every": 0, "alerts": {"enabled": False}})
    for step in range(1, 401):
        monitor.log_step(step, loss=1.0 / step)
    monitor.flush()
    now = time.time()
    write_rank(run / "rank_0", 0, 400, now - 1)
    write_rank(run / "rank_1", 1, 120, now - 1 - lag)
    try:
        yield run
    finally:
        monitor.close()


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Path]:
    with running_job(tmp_path, 94) as run:
        yield run


def test_doctor_names_the_rank_that_stopped_reporting(job: Path) -> None:
    result = CliRunner().invoke(main, ["doctor", str(job)])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if "stopped reporting" in line]
    assert len(lines) == 1, result.output
    assert "rank 1 (node-b, device 1) last wrote step 120, 9" in lines[0]
    assert "s ago; the other ranks are at step 400" in lines[0]
    assert "worker_1.log" in result.output


def test_doctor_in_chinese(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGUAGE", "zh_CN")
    set_language(None)
    result = CliRunner().invoke(main, ["doctor", str(job)])
    assert "有 rank 停止上报：rank 1（node-b，设备 1）最后一次写入是第 120 步" in result.output
    assert "其他 rank 已到第 400 步" in result.output


def test_doctor_says_a_rank_is_behind_before_calling_it_stopped(tmp_path: Path) -> None:
    with running_job(tmp_path, 30) as run:
        result = CliRunner().invoke(main, ["doctor", str(run)])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if "last wrote" in line)
    assert line.startswith("[   info] run .: rank 1 (node-b, device 1) last wrote step 120, 3")
    assert line.endswith("the other ranks are at step 400 (called stopped after 60 s)")


def test_doctor_on_ranks_that_all_go_on(tmp_path: Path) -> None:
    run = tmp_path / "job"
    with mindwatch.Monitor(run, {"print_every": 0}) as monitor:
        monitor.log_step(1, loss=1.0)
    write_rank(run / "rank_0", 0, 50, time.time())
    write_rank(run / "rank_1", 1, 50, time.time())
    result = CliRunner().invoke(main, ["doctor", str(run)])
    assert "all 2 ranks report (last step 50)" in result.output
    assert "stopped reporting" not in result.output


def test_watch_names_the_stalled_rank_while_the_others_go_on(job: Path) -> None:
    result = CliRunner().invoke(main, ["watch", str(job), "--once", "--json", "--stall-secs", "60"])
    alerts = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    stalls = [a for a in alerts if a["rule"] == "stall"]
    assert [(a["rank"], a["step"]) for a in stalls] == [(1, 120)], result.output
    assert "rank 1 (node-b, device 1) last wrote step 120, 9" in stalls[0]["message"]
    assert "the other ranks are at step 400" in stalls[0]["message"]


def test_watch_keeps_the_plain_stall_message_when_every_rank_stopped(tmp_path: Path) -> None:
    run = tmp_path / "job"
    monitor = mindwatch.Monitor(run, {"print_every": 0, "alerts": {"enabled": False}})
    monitor.log_step(1, loss=1.0)
    monitor.flush()
    write_rank(run / "rank_0", 0, 5, time.time() - 95)
    write_rank(run / "rank_1", 1, 5, time.time() - 95)
    time.sleep(1.2)
    try:
        result = CliRunner().invoke(
            main, ["watch", str(run), "--once", "--json", "--stall-secs", "1"]
        )
    finally:
        monitor.close()
    alerts = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    messages = [a["message"] for a in alerts if a["rule"] == "stall"]
    assert len(messages) == 3, result.output  # the run's folder and both ranks'
    assert all("no new step for" in m for m in messages), messages


@pytest.mark.parametrize(
    "damage",
    ["bytes", "folder", "list", "wrong types", "fifo"],
)
def test_a_damaged_rank_file_leaves_the_node_from_the_event_file_name(
    job: Path, damage: str
) -> None:
    """rank.json garbled, a folder, a list, wrong types or a FIFO in its place: the rank
    is still named, with the host its event files were written on."""
    import os
    import socket

    path = job / "rank_1" / "rank.json"
    path.unlink()
    if damage == "bytes":
        path.write_bytes(b"\xff\x00{not json")
    elif damage == "folder":
        path.mkdir()
    elif damage == "list":
        path.write_text("[1, 2]")
    elif damage == "wrong types":
        path.write_text(json.dumps({"hardware": {"node": 7, "device_id": "one"}}))
    else:
        os.mkfifo(path)
    result = CliRunner().invoke(main, ["doctor", str(job)])
    assert result.exit_code == 1, result.output
    assert f"rank 1 ({socket.gethostname()}) last wrote step 120" in result.output
