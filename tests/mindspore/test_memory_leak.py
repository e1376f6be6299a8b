"""A planted host-memory leak under ``msrun`` with 2 CPU workers: rank 1 keeps 0.5 MB of
NumPy arrays more at every step (``scripts/leak_train.py``). Rank 0's alerts must name
rank 1 with ``memory_growth``; the same job without the leak raises no hardware rule.

The sampling and the rule's spans are shortened through the job's config (0.5 s
samples, a 4 s growth window, 4 s of persistence after 3 s skipped: the start-up rise
leaves the window 4 s after it ends, so a healthy job's statistic stays above the
threshold for at most 4 - 3 s of the 4 needed). The defaults are minutes
(``MemoryGrowthSettings``).

The leaking job runs until the alert, not for a fixed number of steps: it stops on it
(``alerts.stop_on``, every rank at the same step), at the latest after ``LEAK_STEPS_MAX``
steps. A fixed 400 steps left the rule about 9 s of leaking training to see 4 s of a
rising window; on a busy machine a rank that stalls for a second makes a few samples
flat, which ends the episode (as it should: memory that stops growing is not a leak),
and the next one then had too little of the job left. The healthy job's fixed length is
what its promise needs: well past the skipped start-up and the persistence it would
need to alert.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mindspore.test_multicard import msrun_command, msrun_env
from tests.tbread import scalars

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

SCRIPT = Path(__file__).with_name("scripts") / "leak_train.py"
STEPS, LEAK_FROM, LEAK_MB = 400, 100, 0.5
LEAK_STEPS_MAX = 2000  # the alert came at step 215 on a busy machine (load 14 on 2 cores)
HARDWARE_RULES = {"npu_temperature", "hbm_full", "npu_health", "memory_growth"}
CONFIG: dict[str, Any] = {
    "aggregate_every": 5,
    "hardware": {"period_s": 0.5, "growth_window_s": 4},
    "alerts": {"memory_growth": {"samples": 4, "seconds": 4, "skip_seconds": 3}},
}
UNTIL_THE_ALERT = {**CONFIG, "alerts": {**CONFIG["alerts"], "stop_on": ["memory_growth"]}}


def train(out: Path, *options: str, steps: int = STEPS, config: Any = None) -> None:
    settings = (f"--steps={steps}", f"--config={json.dumps(config or CONFIG)}")
    command = msrun_command(out, *settings, *options, script=SCRIPT)
    done = subprocess.run(command, env=msrun_env(), capture_output=True, text=True, timeout=240)
    logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in (out / "log").glob("*.log"))
    assert done.returncode == 0, logs


def alerts(out: Path) -> list[dict[str, Any]]:
    path = out / "run" / "alerts.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def last_step(out: Path, rank: int) -> int:
    """The last step the rank trained, from its own record."""
    return max(step for step, _ in json.loads((out / f"rss_rank{rank}.json").read_text()))


def rss_growth(out: Path, rank: int) -> float:
    """MB of RSS the rank gained from the leak's first step to its last, by psutil."""
    trail = dict(json.loads((out / f"rss_rank{rank}.json").read_text()))
    return float(trail[last_step(out, rank)] - trail[LEAK_FROM])


def test_a_leaking_rank_is_named_and_a_healthy_job_is_quiet(tmp_path: Path) -> None:
    leaky, healthy = tmp_path / "leaky", tmp_path / "healthy"
    leak = (f"--leak-mb={LEAK_MB}", f"--leak-from={LEAK_FROM}")
    train(leaky, *leak, steps=LEAK_STEPS_MAX, config=UNTIL_THE_ALERT)
    train(healthy)

    # The leak is real (psutil in the job, not mindwatch): rank 1 grew, rank 0 did not.
    stopped = last_step(leaky, 0)
    assert last_step(leaky, 1) == stopped  # both ranks stopped at the alert's step
    planted = LEAK_MB * (stopped - LEAK_FROM)
    assert planted >= 10 * LEAK_MB  # it leaked for some steps before it was named
    assert rss_growth(leaky, 1) >= 0.8 * planted
    assert rss_growth(leaky, 0) < 0.2 * planted

    found = [a for a in alerts(leaky) if a["rule"] == "memory_growth"]
    assert found, alerts(leaky)
    first = found[0]
    assert first["rank"] == 1
    assert first["step"] > LEAK_FROM
    assert first["metric"] == "hw/rss_growth_mb_per_min"
    assert first["value"] > 10 * first["baseline"]  # the threshold, 10 MB/min
    assert first["rising_share"] >= 0.75
    assert first["samples"] >= 4
    assert first["seconds"] >= 4
    assert {a["rank"] for a in found} == {1}
    assert stopped < LEAK_STEPS_MAX  # named while it leaked, not after the job's end

    # The healthy job had the same statistics on its timeline, and no hardware alert.
    curves = scalars(healthy / "run")
    assert len(curves["hw/rss_growth_mb_per_min"]) >= 4
    assert len(curves["ranks/rss_growth_mb_per_min_argmax"]) >= 4
    assert [a for a in alerts(healthy) if a["rule"] in HARDWARE_RULES] == []
