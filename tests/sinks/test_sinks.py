"""Sinks: a failing one warns once and never stops the others, the files or the run."""

from __future__ import annotations

import json
import logging
import math
import threading
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


class Hanging:
    """A sink whose writes hang from the second step on (a stuck network share)."""

    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()

    def write(self, item: Any) -> None:
        if isinstance(item, StepValues) and item.step >= 2:
            self.release.wait(60)

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self, timeout: Optional[float] = None) -> None:
        pass


def test_a_hanging_sink_never_stalls_a_loop_that_stops_on_alerts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With alerts.stop_on, log_step waits for the rules' verdict on its step; a sink
    that hangs bounds that wait once (a warning), not on every step."""
    monkeypatch.setattr("mindwatch.monitor.route.VERDICT_WAIT", 0.5)
    hanging = Hanging()
    config = {"print_every": 0, "max_block_secs": 0, "alerts": {"stop_on": ["nonfinite"]}}
    waits: list[float] = []
    real_wait = threading.Event.wait

    def wait(self: threading.Event, timeout: Optional[float] = None) -> bool:
        if threading.current_thread() is threading.main_thread():
            waits.append(timeout if timeout is not None else math.inf)
        return real_wait(self, timeout)

    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        mon = mindwatch.Monitor(tmp_path, config)
        mon.add_sink(hanging)
        monkeypatch.setattr(threading.Event, "wait", wait)
        for step in range(1, 201):
            mon.log_step(step, loss=1.0 / step)
        monkeypatch.setattr(threading.Event, "wait", real_wait)
        late = [r.getMessage() for r in caplog.records if "had not judged" in r.getMessage()]
        hanging.release.set()
        mon.close()
    assert len(late) == 1, late
    assert "step 2 after" in late[0]
    assert max(waits) == pytest.approx(0.5)  # never an unbounded wait
    assert len([w for w in waits if w == pytest.approx(0.5)]) == 2  # steps 1 and 2 only
    assert mon.last_step == 200
    # Nothing was lost: once the sink came back, every step reached the files.
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == list(range(1, 201))
