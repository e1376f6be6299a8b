"""``mindwatch.SummaryWriter`` under real ``msrun`` with 2 CPU workers (data parallel), as a
PyTorch user's per-rank writer code runs: without a collective, rank 0 writes the run and
rank 1 its own ``rank_1/`` run, each with its own losses; with ``MindSporeCollective``,
rank 0 writes the mean of the two ranks' losses at every step and rank 1 writes no run
of its own there (scripts/summarywriter_dp.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mindwatch.tools.tables import read_scalars
from tests.mindspore.test_multicard import msrun_command, msrun_env, worker_log

SCRIPT = Path(__file__).with_name("scripts") / "summarywriter_dp.py"
STEPS = 20

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def losses(frame, run: str) -> dict[int, float]:
    points = frame[(frame["run"] == run) & (frame["tag"] == "loss")]
    return dict(zip(points["step"].astype(int), points["value"].astype(float)))


def test_per_rank_writers_and_the_reduced_one(tmp_path: Path) -> None:
    command = msrun_command(tmp_path, f"--steps={STEPS}", script=SCRIPT)
    done = subprocess.run(command, env=msrun_env(), capture_output=True, text=True, timeout=300)
    logs = worker_log(tmp_path, 0)[-3000:] + worker_log(tmp_path, 1)[-3000:]
    assert done.returncode == 0, done.stdout[-2000:] + logs
    local = [
        {int(k): v for k, v in json.loads((tmp_path / f"local_rank{r}.json").read_text()).items()}
        for r in (0, 1)
    ]
    assert local[0] != local[1]  # the ranks really saw different data

    plain = read_scalars(tmp_path / "plain")
    assert set(plain["run"]) == {".", "rank_1"}
    for run, rank in ((".", 0), ("rank_1", 1)):
        got = losses(plain, run)
        assert sorted(got) == list(range(1, STEPS + 1))
        want = {s: float(np.float32(v)) for s, v in local[rank].items()}
        assert got == pytest.approx(want, rel=1e-6)

    reduced = read_scalars(tmp_path / "reduced")
    assert set(reduced["run"]) == {"."}
    got = losses(reduced, ".")
    assert sorted(got) == list(range(1, STEPS + 1))
    mean = {s: (local[0][s] + local[1][s]) / 2 for s in got}
    assert got == pytest.approx(mean, rel=1e-5)
