"""Issue 20 ("also confusing"): the points a burst drops, said in one unit and one total.

With ``max_block_secs: 0`` both the pipeline's queue and the writer's drop; the warning
when dropping starts gives no count, and the one at close gives the total ``run.json``
records as ``points_dropped``, in points (values), whichever queue dropped them.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

import mindwatch
from tests.hostile.promise import mindwatch_warnings
from tests.tbread import scalars


def test_the_close_summary_gives_the_total_run_json_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"max_block_secs": 0, "max_queue": 10, "print_every": 0, "alerts": {"enabled": False}}
    caplog.set_level(logging.WARNING, logger="mindwatch")
    with mindwatch.Monitor(tmp_path / "run", config) as mon:
        for step in range(1, 20_001):  # a burst far faster than the background threads
            mon.log_step(step, loss=1.0, lr=0.1, grad_norm=1.0)
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    dropped = info["points_dropped"]
    assert dropped > 0
    warnings = mindwatch_warnings(caplog.records)
    totals = [w for w in warnings if re.search(r"\d+ points", w)]
    assert len(totals) == 1, warnings  # one total, at close
    assert f"{dropped} points were dropped in all" in totals[0]
    assert "points_dropped in run.json" in totals[0]
    assert str(tmp_path / "run") in totals[0]
    started = [w for w in warnings if w not in totals]
    assert started
    assert all("dropp" in w for w in started)
    assert all(str(dropped) not in w for w in started)
    assert mon.stats.points_dropped == dropped
    # Points: the values logged (3 a step) and those written (with step_time_ms, 4 a
    # step) add up to no more than what was logged and derived.
    written = sum(len(points) for points in scalars(tmp_path / "run").values())
    assert 20_000 * 3 <= written + dropped <= 20_000 * 4
