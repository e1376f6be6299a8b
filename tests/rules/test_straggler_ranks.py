"""The straggler rule on a simulated job: 5 ranks (threads sharing
``mindwatch.testing.LocalGroup``) logging the interval medians the MindSpore adapter
logs, at fast steps, reduced across ranks as under msrun; rank 0's rules in the job and
``mindwatch watch`` replaying the event files afterwards name the same rank at the same
step with the same score."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.testing import LocalGroup

WORLD = 5
ONSET = 150  # the first slow interval ends at step 160


def _job(logdir: Path, slow: set[int]) -> None:
    """Healthy: every rank waits 0.1 ms for data (ties on every rank), steps of 4.1 ms.
    From step ONSET the ``slow`` ranks' pipelines are 3x slower: they wait 8.1 ms, and
    the all-reduce makes every rank's step 12.2 ms."""
    group = LocalGroup(WORLD)
    config = {"print_every": 0, "flush_secs": 0.2, "aggregate_every": 10}

    def rank_main(rank: int) -> None:
        with mindwatch.Monitor(logdir, config, collective=group.member(rank)) as mon:
            for step in range(1, 401):
                values: dict[str, Any] = {}
                if step % 10 == 0:
                    late = step > ONSET
                    values["straggler/input_wait_ms"] = 8.1 if late and rank in slow else 0.1
                    values["straggler/step_ms"] = 12.2 if late else 4.1
                mon.log_step(step, loss=1.0, **values)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(WORLD)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive()


def _straggler(alerts: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (a["step"], a["rank"], a["value"], a["intervals"], a["seconds"])
        for a in alerts
        if a["rule"] == "straggler"
    ]


def _in_job(logdir: Path) -> list[dict[str, Any]]:
    lines = (logdir / "alerts.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _watched(logdir: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["watch", str(logdir), "--once", "--json"])
    return [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]


def test_the_slow_rank_of_five_is_named_in_the_job_and_by_the_watcher(tmp_path: Path) -> None:
    """Intervals of 122 ms once slow: 17 of them span the 2 s of min_seconds (160, ...,
    320)."""
    _job(tmp_path / "job", {3})
    expected = [(320, 3, 0.0, 17, 2.074)]
    assert _straggler(_in_job(tmp_path / "job")) == expected
    assert _straggler(_watched(tmp_path / "job")) == expected


def test_two_equally_slow_ranks_name_one_of_them(tmp_path: Path) -> None:
    """Ranks 1 and 4 tie for the slowest: the alert names one of them (the reduction's
    tie rule decides which), never a healthy rank."""
    _job(tmp_path / "job", {1, 4})
    ((step, rank, value, intervals, _),) = _straggler(_in_job(tmp_path / "job"))
    assert (step, value, intervals) == (320, 0.0, 17)
    assert rank in (1, 4)


def test_a_healthy_job_with_every_rank_tied_is_quiet(tmp_path: Path) -> None:
    _job(tmp_path / "job", set())
    alerts = tmp_path / "job" / "alerts.jsonl"
    assert _straggler(_in_job(tmp_path / "job") if alerts.exists() else []) == []
