"""``mindwatch watch``: the rules from outside, each alert exactly once, stalls found."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.testing import LocalGroup
from mindwatch.tools.watch import STATE_FILE, default_state_path

WRITER = textwrap.dedent(
    """
    import math, sys, time
    import numpy as np
    import mindwatch
    rng = np.random.default_rng(0)
    config = {"print_every": 0, "flush_secs": 0.1, "alerts": {"enabled": False}}
    with mindwatch.Monitor(sys.argv[1], config) as mon:
        for step in range(1, 401):
            loss = (0.1 + 2.0 / (1 + step / 50)) * rng.lognormal(0, 0.2)
            if step == 150:
                loss = math.nan
            if step == 300:
                loss *= 40
            mon.log_step(step, loss=loss, grad_norm=250.0 if step == 200 else 1.0)
            time.sleep(0.004)
    """
)


def watch(*args: str) -> tuple[int, list[dict[str, object]]]:
    result = CliRunner().invoke(main, ["watch", *args, "--once", "--json"])
    lines = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    return result.exit_code, lines


def test_once_while_training_reports_each_alert_exactly_once(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "exp"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(run)])
    seen: list[dict[str, object]] = []
    codes = []
    while writer.poll() is None:
        time.sleep(0.3)
        if run.exists():
            code, alerts = watch(str(tmp_path / "runs"))
            codes.append(code)
            seen += alerts
    assert writer.returncode == 0
    code, alerts = watch(str(tmp_path / "runs"))
    seen += alerts
    found = sorted((a["rule"], a["step"]) for a in seen)
    assert found == [("grad_explosion", 200), ("nonfinite", 150), ("spike", 300)]
    assert all(a["run"] == "exp" for a in seen)
    assert 1 in codes or code == 1  # new alerts -> 1
    assert watch(str(tmp_path / "runs")) == (0, [])  # nothing new -> 0
    assert len(codes) >= 3  # it really ran while the file was being written


def test_a_stalled_run_is_reported_once_until_it_moves_again(tmp_path: Path) -> None:
    run = tmp_path / "exp"
    mon = mindwatch.Monitor(run, {"print_every": 0})
    mon.log_step(1, loss=1.0)
    mon.flush()  # the process is alive but stops stepping: run.json says "running"
    time.sleep(1.2)
    code, alerts = watch(str(tmp_path), "--stall-secs", "1")
    assert code == 1
    assert [(a["rule"], a["step"], a["severity"]) for a in alerts] == [("stall", 1, "warning")]
    assert "no new step for" in str(alerts[0]["message"])
    assert alerts[0]["node"] == socket.gethostname()  # run.json's ranks: this process
    assert watch(str(tmp_path), "--stall-secs", "1") == (0, [])  # reported once
    mon.log_step(2, loss=1.0)
    mon.flush()
    time.sleep(1.2)
    code, alerts = watch(str(tmp_path), "--stall-secs", "1")
    assert [(a["rule"], a["step"]) for a in alerts] == [("stall", 2)]  # moved, stalled again
    mon.close()  # a finished run is not stalled
    time.sleep(1.2)
    assert watch(str(tmp_path), "--stall-secs", "1") == (0, [])


def test_the_rank_folders_of_a_finished_job_are_not_stalled(tmp_path: Path) -> None:
    """Under msrun a run holds rank_<r>/ folders without a run.json of their own: the
    run's status above them decides (they were reported as stalled once it finished)."""
    from mindwatch.events.writer import EventFileWriter

    job = tmp_path / "job"
    with mindwatch.Monitor(job, {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)
    with EventFileWriter(job / "rank_1") as writer:
        writer.add_scalar("train/loss", 1.0, 1)
    time.sleep(1.2)
    assert watch(str(tmp_path), "--stall-secs", "1") == (0, [])


def test_runs_appearing_later_and_bad_input(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    assert watch(str(tmp_path / "runs")) == (0, [])
    with mindwatch.Monitor(
        tmp_path / "runs" / "late", {"print_every": 0, "alerts": {"enabled": False}}
    ) as mon:
        mon.log_step(1, loss=math.inf)
    code, alerts = watch(str(tmp_path / "runs"))
    assert (code, [(a["rule"], a["run"]) for a in alerts]) == (1, [("nonfinite", "late")])
    missing = CliRunner().invoke(main, ["watch", str(tmp_path / "nope"), "--once"])
    assert missing.exit_code == 2
    state = default_state_path(tmp_path / "runs")
    state.write_text("{not json")
    broken = CliRunner().invoke(main, ["watch", str(tmp_path / "runs"), "--once"])
    assert broken.exit_code == 2
    assert "cannot read the watch state" in broken.output


def test_state_is_kept_outside_the_watched_folder(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path / "runs" / "a", {"print_every": 0}) as mon:
        mon.log_step(1, loss=math.inf)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "runs").rglob("*"))
    assert watch(str(tmp_path / "runs"))[0] == 1
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "runs").rglob("*")) == before
    state = default_state_path(tmp_path / "runs")
    assert state.is_file()
    assert state.is_relative_to(Path(os.environ["XDG_STATE_HOME"]))
    assert default_state_path(tmp_path / "other") != state
    assert watch(str(tmp_path / "runs")) == (0, [])  # the state is found again


def test_an_older_versions_state_in_the_folder_is_read_not_written(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path / "runs" / "a", {"print_every": 0}) as mon:
        mon.log_step(1, loss=math.inf)
    assert watch(str(tmp_path / "runs"))[0] == 1
    legacy = tmp_path / "runs" / STATE_FILE
    default_state_path(tmp_path / "runs").rename(legacy)
    assert watch(str(tmp_path / "runs")) == (0, [])  # nothing reported twice
    assert default_state_path(tmp_path / "runs").is_file()


def _tbx_run(folder: Path, losses: list[float]) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step, loss in enumerate(losses, start=1):
        writer.add_scalar("train/loss", loss, step)
    writer.close()
    time.sleep(1.05)  # tensorboardX names files by the second: one file per run


def test_a_folder_mixing_runs_is_said_and_only_its_newest_run_judged(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "exp"
    falling = [2.0 / (1 + s / 20) for s in range(200)]
    _tbx_run(folder, falling)
    _tbx_run(folder, falling)  # the same script run again into the same folder
    result = CliRunner().invoke(main, ["watch", str(tmp_path / "runs"), "--once", "--json"])
    assert "2 runs mixed in one folder: steps 1-200 (1 file), steps 1-200 (1 file)" in (
        result.output
    )
    assert "mkdir" in result.output  # how to split it
    assert result.exit_code == 0  # one healthy run, then another: no divergence, no spike
    _tbx_run(folder, falling[:100])  # a third run appears while watching
    result = CliRunner().invoke(main, ["watch", str(tmp_path / "runs"), "--once", "--json"])
    assert "3 runs mixed in one folder" in result.output
    assert result.exit_code == 0


def test_alerts_name_the_node_and_device_run_json_lists_for_their_rank(tmp_path: Path) -> None:
    """Two ranks (threads sharing a LocalGroup) with the in-process rules off: the
    watcher finds rank 1's NaN through ranks/loss_argmax, and run.json's ranks say
    where rank 1 ran."""
    group = LocalGroup(2)
    config = {"print_every": 0, "aggregate_every": 5, "alerts": {"enabled": False}}

    def rank_main(rank: int) -> None:
        collective = group.member(rank)
        with mindwatch.Monitor(
            tmp_path / "job", config, collective=collective, device="Ascend", device_id=4 + rank
        ) as mon:
            for step in range(1, 11):
                mon.log_step(step, loss=math.nan if (rank, step) == (1, 7) else 1.0)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    code, alerts = watch(str(tmp_path))
    assert code == 1
    (alert,) = alerts
    assert (alert["rule"], alert["step"], alert["rank"]) == ("nonfinite", 7, 1)
    assert (alert["node"], alert["device"], alert["device_id"]) == (
        socket.gethostname(),
        "Ascend",
        5,
    )
