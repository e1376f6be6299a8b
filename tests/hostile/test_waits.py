"""Waits and background threads at the library edge (issue 20, items 1 and 2).

The config refuses unbounded durations (tests/hostile/test_config_inputs.py); here the
public classes are used directly, as the Python API allows: a non-finite duration is a
ValueError naming the parameter, a finite but huge one never reaches ``threading`` as an
``OverflowError`` (on the training thread or a worker), and a worker that dies of an
unexpected error is one warning and counted, not a silent loss.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import deque
from pathlib import Path
from typing import Any, Optional

import pytest

import mindwatch
from mindwatch.events.writer import EventFileWriter
from mindwatch.metrics.derived import StepRates
from mindwatch.metrics.steps import LocalSteps
from mindwatch.metrics.values import NonFiniteCounter
from mindwatch.pipeline.pipeline import Pipeline
from mindwatch.sinks import SinkGroup
from mindwatch.sinks.items import Item, StepValues
from tests.hostile.promise import mindwatch_warnings, one_warning, reads_back


class Boom(BaseException):
    """What no ``except Exception`` catches (as a C extension or a signal may raise)."""


@pytest.mark.parametrize("name", ["flush_secs", "max_block_secs"])
@pytest.mark.parametrize("value", [math.inf, math.nan, -math.inf])
def test_the_writer_refuses_a_non_finite_duration_naming_it(
    tmp_path: Path, name: str, value: float
) -> None:
    if name == "max_block_secs" and value == -math.inf:
        value = math.nan  # a negative wait means "do not wait" (kept as it was)
    with pytest.raises(ValueError, match=name):
        EventFileWriter(tmp_path, **{name: value})


@pytest.mark.parametrize("name", ["max_block_secs", "period"])
def test_the_pipeline_refuses_a_non_finite_duration_naming_it(name: str) -> None:
    local = LocalSteps(StepRates(), NonFiniteCounter())
    with pytest.raises(ValueError, match=name):
        Pipeline(main=SinkGroup(), rank=SinkGroup(), local=local, **{name: math.inf})


def test_a_huge_flush_delay_through_the_api_keeps_the_worker_alive(tmp_path: Path) -> None:
    # Beyond threading.TIMEOUT_MAX: the worker's wait is clamped (it used to die in
    # Event.wait with OverflowError, and the file held only its header).
    writer = EventFileWriter(tmp_path, flush_secs=1e10)
    writer.add_scalar("train/loss", 0.5, 1)
    assert writer.flush(timeout=1e300)  # a huge barrier timeout is clamped too
    writer.add_scalar("train/loss", 0.25, 2)
    writer.close(timeout=math.inf)
    assert (writer.stats.write_errors, writer.stats.points_dropped) == (0, 0)
    reads_back(tmp_path, {"train/loss": [(1, 0.5), (2, 0.25)]})


def test_a_huge_wait_for_room_on_the_training_thread_never_overflows(tmp_path: Path) -> None:
    # A burst into a tiny queue makes the caller wait for room: with 1e10 s that wait
    # raised OverflowError on the training thread (pipeline.py _wait_for_room).
    writer = EventFileWriter(tmp_path, max_queue=10, max_block_secs=1e10)
    for step in range(1, 5001):
        writer.add_scalar("train/loss", 1.0 / step, step)
    writer.close()
    reads_back(tmp_path, {"train/loss": [(s, 1.0 / s) for s in (1, 2500, 5000)]})


class Recording:
    """A sink that keeps what it is given."""

    name = "recording"

    def __init__(self) -> None:
        self.steps: list[int] = []

    def write(self, item: Item) -> None:
        if isinstance(item, StepValues):
            self.steps.append(item.step)

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self, timeout: Optional[float] = None) -> None:
        pass


def test_a_pipeline_burst_with_a_huge_wait_never_overflows() -> None:
    sink = Recording()
    local = LocalSteps(StepRates(), NonFiniteCounter())
    pipeline = Pipeline(
        main=SinkGroup([sink]), rank=SinkGroup(), local=local, max_queue=10, max_block_secs=1e10
    )
    for step in range(1, 3001):
        pipeline.step(0, step, (("train/loss", 1.0),), 0.0, None)
    pipeline.close()
    assert sink.steps == list(range(1, 3001))  # it waited for room, never dropped


# ------------------------------------------------------------------ dead workers


def _run_json(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "run.json").read_text()))


def test_a_writer_whose_worker_dies_says_so_once_and_counts_the_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def explode() -> list[bytes]:
        raise Boom("the encoder blew up")

    caplog.set_level(logging.WARNING)
    mon = mindwatch.Monitor(tmp_path, {"print_every": 0, "alerts": {"enabled": False}})
    for step in range(1, 11):
        mon.log_step(step, loss=1.0 / step)
    mon.flush()
    mon.writer.add_values_later(11, explode)  # runs on the worker, and kills it
    for step in range(11, 6000):  # more than the hot path's limit (4096)
        mon.log_step(step, loss=1.0 / step)
    mon.flush()
    assert len(mon.writer._queue) == 0  # later adds are dropped at once, not piled up
    message = one_warning(caplog.records, "Boom", "the encoder blew up", str(tmp_path))
    assert "dropped and counted" in message
    mon.close()
    info = _run_json(tmp_path)
    assert info["status"] == "finished"
    assert info["write_errors"] == 1  # it said 0
    assert info["points_dropped"] >= 5989  # every step from 11 on; it said 0
    reads_back(tmp_path, {"train/loss": [(s, 1.0 / s) for s in range(1, 11)]})


class Exploding(Recording):
    """A sink whose write raises what ``SinkGroup`` does not catch, at one step."""

    name = "exploding"

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def write(self, item: Item) -> None:
        if isinstance(item, StepValues) and item.step == self.at:
            raise Boom(f"sink blew up at step {self.at}")


def test_a_pipeline_whose_thread_dies_says_so_once_counts_and_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    mon = mindwatch.Monitor(tmp_path, {"print_every": 0, "alerts": {"enabled": False}})
    mon.add_sink(Exploding(at=6))
    for step in range(1, 6):
        mon.log_step(step, loss=1.0 / step)
    mon.flush()
    for step in range(6, 3000):
        mon.log_step(step, loss=1.0 / step)
    done = threading.Event()

    def close() -> None:
        mon.close()
        done.set()

    threading.Thread(target=close, daemon=True).start()
    assert done.wait(60), "close() hung on a dead pipeline"  # a hang detector
    warnings = mindwatch_warnings(caplog.records)
    assert sum("pipeline's thread stopped" in w for w in warnings) == 1, warnings
    assert any("sink blew up at step 6" in w for w in warnings)
    info = _run_json(tmp_path)
    assert info["status"] == "finished"
    assert info["write_errors"] >= 1
    assert info["points_dropped"] >= 2990
    reads_back(tmp_path, {"train/loss": [(s, 1.0 / s) for s in range(1, 7)]})


def test_waits_on_a_closed_or_dead_writer_return(tmp_path: Path) -> None:
    writer = EventFileWriter(tmp_path)
    writer.add_values_later(1, lambda: (_ for _ in ()).throw(Boom("dead")))
    writer.flush(timeout=5)
    results: deque[bool] = deque()
    thread = threading.Thread(target=lambda: results.append(writer.flush()), daemon=True)
    thread.start()
    thread.join(30)  # flush() with no limit must not wait for a dead worker
    assert list(results) == [True]
    writer.add_scalar("train/loss", 1.0, 2)
    writer.close()
    assert writer.stats.write_errors == 1
    assert writer.stats.points_dropped >= 2  # the item that killed it, and the later one
