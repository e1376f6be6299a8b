"""Hardware telemetry from a real Model.train on CPU, read back with TensorBoard's reader
and checked against psutil read independently here."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import mindspore as ms
import psutil
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor
from mindwatch.mindspore.demo import make_dataset
from tests.mindspore.test_training_monitor import BATCH, QUIET, _train_cell
from tests.tbread import scalars

_MB = 1024.0 * 1024.0


class _Pace(ms.train.Callback):  # type: ignore[misc]
    """Steps of about 4 ms, so the run spans several sampling periods."""

    def on_train_step_end(self, run_context: Any) -> None:
        time.sleep(0.004)


def test_host_telemetry_of_a_real_training_run_matches_psutil(tmp_path: Path) -> None:
    config = {**QUIET, "hardware": {"period_s": 0.5}}
    monitor = TrainingMonitor(logdir=tmp_path, config=config)
    dataset = make_dataset(400 * BATCH, BATCH, 0)
    Model(_train_cell()).train(1, dataset, callbacks=[monitor, _Pace()])
    rss_now = psutil.Process(os.getpid()).memory_info().rss / _MB
    available_now = psutil.virtual_memory().available / _MB

    curves = scalars(tmp_path)
    rss = curves["hw/rss_mb"]
    assert len(rss) >= 3  # > 3 s of training at 0.5 s per sample
    steps = [s for s, _ in rss]
    assert steps == sorted(steps)
    assert len(set(steps)) == len(steps)
    assert abs(rss[-1][1] - rss_now) <= 0.25 * rss_now
    available = curves["hw/host_mem_available_mb"][-1][1]
    assert abs(available - available_now) <= max(1024.0, 0.2 * available_now)
    cpu = [v for _, v in curves["hw/cpu_percent"]]
    assert max(cpu) > 0
    assert all(0 <= v <= 100 * (os.cpu_count() or 1) * 1.5 for v in cpu)
    for tag in ("hw/disk_read_mb_s", "hw/disk_write_mb_s", "hw/net_recv_mb_s", "hw/net_sent_mb_s"):
        assert all(v >= 0 for _, v in curves[tag]), tag
    assert not [tag for tag in curves if tag.startswith("hw/device_mem")]  # CPU: none
    assert not [tag for tag in curves if tag.startswith("hw/npu_")]  # no npu-smi here

    facts = json.loads((tmp_path / "run.json").read_text())["hardware"]
    assert facts["node"] == socket.gethostname()
    assert facts["sources"]["host"] == "psutil"
    assert facts["sources"]["device"] == "CPU"
    assert facts["sources"]["npu_smi"].startswith("not found")


def test_hardware_off_writes_no_hw_curves(tmp_path: Path) -> None:
    config = {**QUIET, "hardware": {"enabled": False}}
    monitor = TrainingMonitor(logdir=tmp_path, config=config)
    Model(_train_cell()).train(1, make_dataset(200 * BATCH, BATCH, 0), callbacks=[monitor, _Pace()])
    assert not [tag for tag in scalars(tmp_path) if tag.startswith("hw/")]
    assert "hardware" not in json.loads((tmp_path / "run.json").read_text())
