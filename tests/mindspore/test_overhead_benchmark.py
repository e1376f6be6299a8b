"""A smoke run of ``benchmarks/overhead.py --hardware``: the script runs on real
MindSpore and prints the telemetry pair (on, off, and a bare run of the same round
length) in the table of its peers, the paired line and the sampler's own cost. Its
numbers are not asserted (a shared, noisy machine); rounds of 0.6 s hold no sample
(the first comes one 5 s period after the start): only the real run measures that."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "overhead.py"


def test_the_overhead_benchmark_prints_telemetry_on_and_off_side_by_side() -> None:
    args = ["--sizes", "small", "--rounds", "1", "--steps", "12"]
    args += ["--hardware", "--hardware-round-s", "0.6"]
    env = {**os.environ, "GLOG_v": "3"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    rows = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    names = [row.split("  ")[0] for row in rows]
    for name in ("bare, 0.6 s rounds", "TrainingMonitor(), 0.6 s rounds"):
        assert name in names, out
    assert "same, hardware.enabled: false" in names, out
    assert "mindwatch TrainingMonitor()" in names, out  # the peers, in the same table
    paired = [row for row in rows if row.startswith("hardware telemetry on vs off")]
    assert len(paired) == 1, out
    assert "mean step" in paired[0]
    assert "median step" in paired[0]
    assert "hardware sampler thread, CPU time per sample" in out


def test_the_overhead_benchmark_prints_the_flight_recorder_on_and_off() -> None:
    args = ["--sizes", "small", "--rounds", "2", "--steps", "12", "--forensics"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GLOG_v": "3"},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    rows = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    names = [row.split("  ")[0] for row in rows]
    assert "layers cell + TrainingMonitor()" in names, out
    assert "same, alerts.forensics off" in names, out
    paired = [row for row in rows if row.startswith("flight recorder on vs off")]
    assert len(paired) == 1, out
    assert "(2 x 12 steps)" in paired[0]
    (calls,) = [row for row in rows if row.startswith("the recorder's own calls")]
    # both calls were timed: the recorder really got the norms and the scalars
    assert "add_layers" in calls
    assert "add_scalars" in calls


def test_the_layer_norms_benchmark_prints_off_on_and_plain_side_by_side() -> None:
    """``benchmarks/layer_norms.py`` in both modes: its three tables hold one row per mode
    and model with the three settings side by side (MindSpore's ``TrainOneStepCell``,
    ``layer_norms=False``, the default), and the script itself checks that the cells
    returned 1, 2 and 3 outputs (it exits non-zero otherwise)."""
    script = SCRIPT.with_name("layer_norms.py")
    args = ["--models", "mlp", "--rounds", "2", "--steps", "6", "--processes", "1"]
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GLOG_v": "3"},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("mode ")]
    assert len(heads) == 3, done.stdout  # step, first step, peak RSS
    for head in heads:
        rows = [line.split()[:2] for line in lines[head + 1 : head + 3]]
        assert rows == [["graph", "mlp:"], ["pynative", "mlp:"]], done.stdout
    assert "wall on/off (p25-p75)" in lines[heads[0]]
    assert "CPU on/off (p25-p75)" in lines[heads[0]]
    assert "wall on/plain (p25-p75)" in lines[heads[0]]
    for head in heads:  # the three settings' columns, in one table
        assert lines[head].split()[3:6] == ["plain", "off", "on"], lines[head]
    assert "on/plain" in lines[heads[1]]
    assert "on-plain" in lines[heads[2]]
