"""Sinks: a failing one warns once and never stops the others, the files or the run."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

import pytest

import mindwatch
from mindwatch.sinks import SinkGroup
from mindwatch.sinks.items import EvalValues, StepValues
from mindwatch.testing import MemorySink
from tests.tbread import scalars


class Exploding:
    """A sink whose every call fails (a bug, a dead endpoint)."""

    name = "exploding"

    def __init__(self) -> None:
        self.calls = 0

    def write(self, item: Any) -> None:
        self.calls += 1
        raise RuntimeError("boom")

    def flush(self, timeout: Optional[float] = None) -> bool:
        raise RuntimeError("boom")

    def close(self, timeout: Optional[float] = None) -> None:
        raise RuntimeError("boom")


def test_a_failing_sink_warns_once_and_the_others_get_everything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad, good = Exploding(), MemorySink()
    group = SinkGroup([bad, good])
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        for step in range(1, 101):
            group.write(StepValues(step, [("train/loss", 1.0)], 0.0))
        assert group.flush() is False
        group.close()
    assert len(good.of(StepValues)) == 100
    assert good.closed
    assert bad.calls == 100  # tried again every time: a full disk may come back
    warnings = [r.getMessage() for r in caplog.records if "exploding" in r.getMessage()]
    assert len(warnings) == 1
    assert "the other outputs go on" in warnings[0]
    assert group.failures == {"exploding": 102}  # 100 writes, a flush, a close


def test_a_failing_sink_in_a_monitor_costs_nothing_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemorySink()
    config = {"print_every": 0}
    with (
        caplog.at_level(logging.WARNING, logger="mindwatch"),
        mindwatch.Monitor(tmp_path, config) as mon,
    ):
        mon.add_sink(Exploding())
        mon.add_sink(memory)
        for step in range(1, 51):
            mon.log_step(step, loss=1.0 / step)
        mon.log_eval(50, loss=0.5)
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == list(range(1, 51))
    assert [item.step for item in memory.of(StepValues)] == list(range(1, 51))
    assert memory.of(EvalValues)[0].values == [("eval/loss", 0.5)]
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "finished"
    assert sum("exploding" in r.getMessage() for r in caplog.records) == 1
