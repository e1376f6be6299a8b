"""``msrun`` with 2 CPU workers and the Prometheus exporter: one exporter, on rank 0,
serving the job's reduced values, their spread across ranks and the argmax rank.

The job (``scripts/dp_train.py --hold``) trains data-parallel; rank 1's labels are
corrupted on the last two steps, so rank 1 has the larger loss at the last step. After
training both ranks wait, before the monitor closes, until the test has read what a
real Prometheus scraped; the global run's event files and the ranks' own records are
the reference.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.mindspore.test_multicard import f32, local, msrun_command, msrun_env, worker_log
from tests.ports import free_ports
from tests.prometheus_server import PrometheusServer
from tests.tbread import same_float32, scalars

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

STEPS = 40
CORRUPT = (39, 40)


def start_msrun(out: Path, *args: str) -> subprocess.Popen[str]:
    """Like test_multicard's msrun, without waiting: the test scrapes while it trains."""
    return subprocess.Popen(
        msrun_command(out, *args),
        env=msrun_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_until_held(out: Path, job: subprocess.Popen[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all((out / f"held_rank{r}").exists() for r in (0, 1)):
            return
        if job.poll() is not None:
            raise AssertionError(f"msrun ended early: {worker_log(out, 0)[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"the job never finished training: {worker_log(out, 0)[-3000:]}")


def test_rank_0_serves_the_reduced_values_and_the_argmax_rank(
    prometheus_bin: str, tmp_path: Path
) -> None:
    port = free_ports(2)  # port + 1: where rank 1 would serve, and must not
    rank0, rank1 = f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"
    config = {
        "aggregate_every": 10,
        "flush_secs": 0.2,
        "prometheus": {"port": port, "labels": {"job": "ci-dp"}},
    }
    with PrometheusServer(prometheus_bin, tmp_path / "prometheus", [rank0, rank1]) as prom:
        job = start_msrun(
            tmp_path,
            "model",
            f"--steps={STEPS}",
            f"--corrupt={','.join(map(str, CORRUPT))}",
            f"--config={json.dumps(config)}",
            "--hold",
        )
        try:
            wait_until_held(tmp_path, job)
            prom.wait_for(f'mindwatch_step{{run="run"}} == {STEPS}')
            loss = prom.value('mindwatch_loss{run="run"}')
            spread = {
                labels["stat"]: value
                for labels, value in prom.query('mindwatch_rank_spread{run="run",metric="loss"}')
            }
            argmax = prom.value('mindwatch_rank_argmax{run="run",metric="loss"}')
            info = prom.query('mindwatch_info{run="run"}')
            ranks_seen = prom.query("count by (instance) (mindwatch_step)")
            rank1_up = prom.value(f'up{{instance="{rank1}"}}')
        finally:
            (tmp_path / "release").write_text("")
            out, _ = job.communicate(timeout=240)
    assert job.returncode == 0, out[-3000:] + worker_log(tmp_path, 0)[-3000:]

    # The values are the reduced ones the global run's event files hold.
    curves = scalars(tmp_path / "run")
    assert same_float32(loss, dict(curves["train/loss"])[STEPS])
    for stat in ("min", "max", "mean", "std"):
        assert same_float32(spread[stat], dict(curves[f"ranks/loss_{stat}"])[STEPS]), stat
    # ... which are the mean of what the ranks' networks returned, and the argmax is
    # rank 1, whose labels were corrupted.
    losses = [local(tmp_path, 0)[STEPS]["loss"], local(tmp_path, 1)[STEPS]["loss"]]
    assert loss == pytest.approx(f32(np.mean(losses)), rel=1e-6)
    assert spread["max"] == pytest.approx(f32(max(losses)), rel=1e-6)
    assert argmax == 1.0 == float(np.argmax(losses))
    assert info[0][0]["world_size"] == "2"
    assert info[0][0]["job"] == "ci-dp"
    # One exporter: rank 0's. Rank 1 serves nothing (per_rank is off).
    assert [labels["instance"] for labels, _ in ranks_seen] == [rank0]
    assert rank1_up == 0
