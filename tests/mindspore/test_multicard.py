"""Multi-card: real ``msrun`` jobs with 2 CPU workers, MindSpore's own collectives.

Each job trains data-parallel on rank-specific data (``scripts/dp_train.py``); every
rank also records, without mindwatch, what its network returned at each step. The
global run must hold the mean of those local losses at every step, the spread across
ranks, and the outlier rank when rank 1 is fed corrupted labels.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.ports import free_port
from tests.tbread import accumulator, scalars

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

SCRIPT = Path(__file__).with_name("scripts") / "dp_train.py"
BIN = Path(sys.executable).parent
STEPS = 40
CORRUPT = (35, 36)  # after the spike rule's 30-point warmup


def msrun_command(out: Path, *args: str, script: Path = SCRIPT, workers: int = 2) -> list[str]:
    """``script`` (dp_train.py) under msrun with ``workers`` CPU workers on a fresh port,
    ``out`` its first argument; logs in ``out/log``."""
    return [
        str(BIN / "msrun"),
        f"--worker_num={workers}",
        f"--local_worker_num={workers}",
        f"--master_port={free_port()}",
        f"--log_dir={out / 'log'}",
        "--join=True",
        str(script),
        str(out),
        *args,
    ]


def msrun_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """msrun starts the workers as `python` from PATH: it must be this environment's."""
    path = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "GLOG_v": "3", **(env or {})}


def msrun(
    out: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run dp_train.py under msrun with 2 CPU workers; logs in ``out/log``."""
    return subprocess.run(
        msrun_command(out, *args), env=msrun_env(env), capture_output=True, text=True, timeout=240
    )


def worker_log(out: Path, rank: int) -> str:
    return (out / "log" / f"worker_{rank}.log").read_text(errors="replace")


def local(out: Path, rank: int) -> dict[int, dict[str, float]]:
    data = json.loads((out / f"local_rank{rank}.json").read_text())
    return {int(step): values for step, values in data.items()}


def f32(value: float) -> float:
    return float(np.float32(value))


def check_global_view(out: Path, steps: int) -> dict[str, list[tuple[int, float]]]:
    """The global run against the ranks' own records, step by step."""
    curves = scalars(out / "run")
    mine = [local(out, 0), local(out, 1)]
    assert [s for s, _ in curves["train/loss"]] == list(range(1, steps + 1))
    spread = {name: dict(curves[f"ranks/loss_{name}"]) for name in ("max", "min", "argmax")}
    for step, value in curves["train/loss"]:
        losses = [mine[0][step]["loss"], mine[1][step]["loss"]]
        assert value == pytest.approx(f32(np.mean(losses)), rel=1e-6), step
        assert spread["max"][step] == pytest.approx(f32(max(losses)), rel=1e-6)
        assert spread["min"][step] == pytest.approx(f32(min(losses)), rel=1e-6)
        assert spread["argmax"][step] == float(np.argmax(losses))
    # The grad norm after the gradient all-reduce is the same on both ranks: written once.
    for step, value in curves["train/grad_norm"]:
        assert mine[0][step]["grad_norm"] == pytest.approx(mine[1][step]["grad_norm"], rel=1e-6)
        assert value == pytest.approx(f32(mine[0][step]["grad_norm"]), rel=1e-6)
    for tag, points in curves.items():  # one point per step: nothing written twice
        assert len({s for s, _ in points}) == len(points), tag
    return curves


def test_model_train_writes_one_reduced_run_and_names_the_bad_rank(tmp_path: Path) -> None:
    config = {"per_rank": True, "aggregate_every": 10, "flush_secs": 0.2, "memory_every": 10}
    done = msrun(
        tmp_path,
        "model",
        f"--steps={STEPS}",
        f"--corrupt={','.join(map(str, CORRUPT))}",
        f"--config={json.dumps(config)}",
    )
    assert done.returncode == 0, worker_log(tmp_path, 0)[-3000:]
    curves = check_global_view(tmp_path, STEPS)
    argmax = dict(curves["ranks/loss_argmax"])
    assert all(argmax[s] == 1.0 for s in CORRUPT)
    # The alert on the global loss names the rank whose batch caused it.
    alerts = [
        json.loads(line) for line in (tmp_path / "run" / "alerts.jsonl").read_text().splitlines()
    ]
    spikes = [a for a in alerts if a["rule"] == "spike"]
    assert (spikes[0]["step"], spikes[0]["rank"]) == (CORRUPT[0], 1)
    # ... and where rank 1 runs, from the map the ranks exchanged at start (run.json).
    host = socket.gethostname()
    assert (spikes[0]["node"], spikes[0]["device"]) == (host, "CPU")
    ranks = json.loads((tmp_path / "run" / "run.json").read_text())["ranks"]
    assert [(r["rank"], r["node"], r["device"]) for r in ranks] == [
        (0, host, "CPU"),
        (1, host, "CPU"),
    ]
    assert f"spike at step {CORRUPT[0]}, rank 1 ({host}, CPU)" in worker_log(tmp_path, 0)
    loss = dict(curves["train/loss"])
    assert min(loss[s] for s in CORRUPT) > 5 * max(loss[s] for s in range(11, 21))
    # Exactly one global run (rank 0's) plus the two per-rank folders, and the spike's
    # forensics (docs/forensics.md), gathered from both ranks.
    run = tmp_path / "run"
    assert {p.name for p in run.iterdir() if p.is_dir()} == {"rank_0", "rank_1", "forensics"}
    assert spikes[0]["forensics"]["ranks"] == [0, 1]
    assert len(list(run.glob("events.out.tfevents.*"))) == 1
    for rank in (0, 1):
        own = scalars(run / f"rank_{rank}")
        assert [v for _, v in own["train/loss"]] == pytest.approx(
            [f32(local(tmp_path, rank)[s]["loss"]) for s in range(1, STEPS + 1)], rel=1e-6
        )
        assert "train/lr" not in own  # global values are not repeated per rank
        assert "perf/step_time_ms" in own
        assert [s for s, _ in own["perf/host_peak_rss_mb"]] == [10, 20, 30, 40]
    assert "perf/host_peak_rss_mb" not in curves  # per rank: only its spread is global
    assert [s for s, _ in curves["ranks/host_peak_rss_mb_max"]] == [10, 20, 30, 40]
    info = json.loads((run / "run.json").read_text())
    assert (info["world_size"], info["status"]) == (2, "finished")
    assert info["aggregation"]["last_reduced_step"] == STEPS
    assert info["hparams"]["world_size"] == 2
    assert accumulator(run).Tags()["histograms"] == []  # rank 1 wrote nothing here


def test_a_custom_loop_with_monitor_and_the_auto_interval(tmp_path: Path) -> None:
    config = {"flush_secs": 0.2}  # per_rank off: only the global run is written
    done = msrun(tmp_path, "loop", f"--steps={STEPS}", f"--config={json.dumps(config)}")
    assert done.returncode == 0, worker_log(tmp_path, 0)[-3000:]
    check_global_view(tmp_path, STEPS)
    run = tmp_path / "run"
    assert not [p for p in run.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["aggregation"]["interval"] >= 1
    assert "rank 1 of 2 done" in worker_log(tmp_path, 1)


def test_a_dead_worker_costs_one_timeout_and_the_survivor_trains_on(tmp_path: Path) -> None:
    """No gradient all-reduce here, so the survivor can go on: mindwatch's own
    collective is the only thing waiting for the dead rank, and it gives up."""
    config = {"aggregate_every": 5, "aggregate_timeout": 3, "flush_secs": 0.2}
    msrun(  # msrun's status is 1 here: its scheduler reports the vanished worker
        tmp_path,
        "loop",
        "--no-dp",
        "--die-at=13",
        f"--steps={STEPS}",
        f"--config={json.dumps(config)}",
        env={"MS_NODE_TIMEOUT": "10"},
    )
    log0 = worker_log(tmp_path, 0)
    assert "rank 0 of 2 done" in log0  # the survivor finished all 40 steps
    assert log0.count("the cross-rank reduction at step 15 failed: no answer") == 1
    values = dict(scalars(tmp_path / "run")["train/loss"])
    assert sorted(values) == list(range(1, STEPS + 1))
    mine = [local(tmp_path, 0), local(tmp_path, 1)]
    for step in range(1, 11):  # reduced while rank 1 was alive
        mean = (mine[0][step]["loss"] + mine[1][step]["loss"]) / 2
        assert values[step] == pytest.approx(f32(mean), rel=1e-6)
    for step in range(16, STEPS + 1):  # then rank 0's own values
        assert values[step] == pytest.approx(f32(mine[0][step]["loss"]), rel=1e-6)
    info: dict[str, Any] = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["aggregation"]["failed_at_step"] == 15
    assert info["aggregation"]["last_reduced_step"] == 10


def test_a_dead_worker_under_model_train_ends_the_run_as_failed_with_its_data(
    tmp_path: Path,
) -> None:
    """Data parallelism cannot go on without the peer: the next gradient all-reduce
    fails (after MS_CPU_COMM_OP_TIMEOUT; 30 s by default on CPU) and Model.train
    raises. The monitor closes the run as failed with everything it had. (MindSpore
    2.7/2.8, and 2.10 on a loaded machine, SIGTERM the survivor instead, so no `finally`
    runs: the run is then 'terminated', with the same data; both are documented
    outcomes. dp_train.py saves its own record at every step for this.)"""
    config = {"aggregate_every": 5, "flush_secs": 0.2}
    msrun(
        tmp_path,
        "model",
        "--die-at=13",
        f"--steps={STEPS}",
        f"--config={json.dumps(config)}",
        env={"MS_CPU_COMM_OP_TIMEOUT": "5", "MS_NODE_TIMEOUT": "30"},
    )
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] in ("failed", "terminated")
    if info["status"] == "failed":
        assert "AllReduce" in info["error"]
    assert info["aggregation"]["last_reduced_step"] == 10
    values = dict(scalars(tmp_path / "run")["train/loss"])
    assert sorted(values) == list(range(1, 13))  # 11 and 12: rank 0's own, unreduced
    assert values[12] == pytest.approx(f32(local(tmp_path, 0)[12]["loss"]), rel=1e-6)


def test_demo_with_two_workers_in_a_live_tensorboard(tmp_path: Path) -> None:
    """`mindwatch demo --workers 2` starts itself under msrun; TensorBoard then shows the
    global run and each rank's folder as sub-runs."""
    from tests.mindspore.test_demo_in_tensorboard import MINDWATCH
    from tests.tbserver import live_tensorboard, wait_for_tags

    env = {**os.environ, "GLOG_v": "3"}
    command = [MINDWATCH, "demo", "--workers", "2", "--logdir", str(tmp_path), "--steps", "60"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert "2 CPU workers (msrun, data parallel)" in done.stdout
    assert "[mindwatch] step 25/60 | loss" in done.stdout
    assert f"Run folder: {run}\n" in done.stdout
    assert "values reduced across 2 ranks" in done.stdout
    assert "rank_0/, rank_1/" in done.stdout
    own = [dict(scalars(run / f"rank_{r}")["train/loss"]) for r in (0, 1)]
    for step, value in scalars(run)["train/loss"]:
        assert value == pytest.approx(f32((own[0][step] + own[1][step]) / 2), rel=1e-6)

    name = run.name
    with live_tensorboard(tmp_path) as url:
        tags = wait_for_tags(url, {"train/loss", "ranks/loss_argmax"})
        deadline = time.monotonic() + 60
        while not {f"{name}/rank_0", f"{name}/rank_1"} <= set(tags):
            assert time.monotonic() < deadline, f"TensorBoard lists only {sorted(tags)}"
            time.sleep(0.5)
            tags = wait_for_tags(url, {"train/loss"})
    assert name in tags
    assert "ranks/loss_argmax" not in tags[f"{name}/rank_1"]
    assert "train/loss" in tags[f"{name}/rank_1"]


def test_an_alert_stops_every_rank_at_the_same_step(tmp_path: Path) -> None:
    config = {"aggregate_every": 5, "flush_secs": 0.2, "alerts": {"stop_on": ["spike"]}}
    done = msrun(tmp_path, "model", "--steps=80", "--corrupt=35", f"--config={json.dumps(config)}")
    assert done.returncode == 0, worker_log(tmp_path, 0)[-3000:]
    # The spike is seen in the reduction at step 35 (rank 0's rules); every rank learns
    # of the request in the next one, at step 40, and Model.train ends there on both.
    assert max(local(tmp_path, 0)) == max(local(tmp_path, 1)) == 40
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (info["status"], info["last_step"]) == ("finished", 40)
    alerts = [json.loads(x) for x in (tmp_path / "run" / "alerts.jsonl").read_text().splitlines()]
    assert (alerts[0]["rule"], alerts[0]["step"], alerts[0]["rank"]) == ("spike", 35, 1)
    assert alerts[0]["action"] == "stop training"
