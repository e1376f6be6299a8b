"""The sampler's values on the training timeline: one point per period on one process,
the interval's last step on every rank under reduction (spread and outlier rank)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from mindwatch import Monitor
from mindwatch.sinks.items import StepValues
from mindwatch.testing import MemorySink
from tests.aggregate.test_multirank import run_ranks
from tests.tbread import scalars

QUIET = {"print_every": 0, "flush_secs": 0.2}
DEADLINE_S = 120.0  # only a sampler that never publishes gets near it


def test_one_process_gets_one_point_per_period(tmp_path: Path) -> None:
    """Steps are logged until three have got a sample (counted in a sink, not guessed
    from a fixed time: on a busy machine the sampler's first read can come late), so
    the run spans at least two periods; the upper bound is from the time it really took."""
    memory = MemorySink()
    with Monitor(tmp_path, {**QUIET, "hardware": {"period_s": 0.5}}) as mon:
        telemetry = mon.telemetry
        assert telemetry is not None
        mon.add_sink(memory)
        start = time.monotonic()
        deadline = start + DEADLINE_S
        step = 0
        while len(_sampled(memory)) < 3:
            assert time.monotonic() < deadline, f"{len(_sampled(memory))} points in {step} steps"
            step += 1
            mon.log_step(step, loss=1.0)
            time.sleep(0.002)
        elapsed = time.monotonic() - start
    curves = scalars(tmp_path)
    rss = curves["hw/rss_mb"]
    # Published from one period after the start, then one point per period at most.
    assert [s for s, _ in rss] == _sampled(memory)
    assert 3 <= len(rss) <= elapsed / 0.5 + 1
    # Each point is a published sample: the latest one when the point was due (on a
    # busy machine a late sampler makes two points of the same sample, never a new one).
    assert len({tuple(item.values) for item in _points(memory)}) <= telemetry.published
    assert rss[0][0] > 1  # not the first step: the first sample comes a period later
    walls = [e.wall_time for e in _events(tmp_path, "hw/rss_mb")]
    assert all(b - a >= 0.45 for a, b in zip(walls, walls[1:]))
    facts = json.loads((tmp_path / "run.json").read_text())["hardware"]
    assert facts["period_s"] == 0.5
    assert facts["sources"]["host"] == "psutil"


def _points(memory: MemorySink) -> list[StepValues]:
    """The hardware values of the steps that carried a sample, as the pipeline handed
    them on."""
    found = []
    for item in list(memory.of(StepValues)):
        values = tuple((tag, value) for tag, value in item.values if tag.startswith("hw/"))
        if any(tag == "hw/rss_mb" for tag, _ in values):
            found.append(StepValues(item.step, values, item.wall))
    return found


def _sampled(memory: MemorySink) -> list[int]:
    """The steps that carried a hardware sample."""
    return [item.step for item in _points(memory)]


def test_ranks_report_at_the_interval_end_with_the_spread_and_the_outlier(tmp_path: Path) -> None:
    def body(mon: Monitor, rank: int) -> None:
        assert mon.telemetry is not None
        # A probe of this rank's own (the simulated ranks share one process's counters).
        mon.telemetry.add_probe("card", lambda: {"hw/npu_temp_c": 40.0 + 25.0 * rank}, "test")
        with mon:
            for step in range(1, 121):
                mon.log_step(step, loss=1.0, samples=8)
                time.sleep(0.01)

    config = {"aggregate_every": 20, "per_rank": True, "hardware": {"period_s": 0.5}}
    run_ranks(2, tmp_path, body, config=config)
    curves = scalars(tmp_path)
    temps = curves["hw/npu_temp_c"]
    assert temps
    assert all(step % 20 == 0 for step, _ in temps)
    assert {v for _, v in temps} == {65.0}  # the hottest rank
    assert {v for _, v in curves["ranks/npu_temp_c_argmax"]} == {1.0}
    assert {v for _, v in curves["ranks/npu_temp_c_min"]} == {40.0}
    own = scalars(tmp_path / "rank_1")["hw/npu_temp_c"]
    assert {v for _, v in own} == {65.0}


def test_hardware_off_starts_no_sampler(tmp_path: Path) -> None:
    with Monitor(tmp_path, {**QUIET, "hardware": {"enabled": False}}) as mon:
        assert mon.telemetry is None
        mon.log_step(1, loss=1.0)
    assert "hardware" not in json.loads((tmp_path / "run.json").read_text())


def _events(logdir: Path, tag: str) -> list:  # type: ignore[type-arg]
    from tests.tbread import accumulator

    return list(accumulator(logdir).Scalars(tag))


def _npu_smi(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "bin" / "npu-smi"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return str(exe)


def test_npu_values_from_npu_smi_reach_tensorboard(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    table = Path(__file__).parent.parent / "fixtures" / "npu_smi" / "310p-24.1.0.1-info.txt"
    # The recorded table's NPU 1; logical device 1 is its chip 0 (as `npu-smi info -m`
    # prints it on a two-card host).
    mapping = tmp_path / "mapping.txt"
    mapping.write_text("NPU ID  Chip ID  Chip Logic ID  Chip Name\n1 0 1 Ascend 310P3\n")
    exe = _npu_smi(tmp_path, f'if [ "$2" = "-m" ]; then cat {mapping}; else cat {table}; fi\n')
    monkeypatch.setenv("DEVICE_ID", "1")  # what msrun exports to this rank
    config = {**QUIET, "hardware": {"period_s": 0.5, "npu_smi_path": exe}}
    with Monitor(tmp_path / "run", config) as mon:
        for step in range(1, 150):
            mon.log_step(step, loss=1.0)
            time.sleep(0.01)
    curves = scalars(tmp_path / "run")
    assert {v for _, v in curves["hw/npu_hbm_used_mb"]} == {16302.0}  # NPU 1, chip 0
    assert {v for _, v in curves["hw/npu_temp_c"]} == {62.0}
    facts = json.loads((tmp_path / "run" / "run.json").read_text())["hardware"]
    assert facts["sources"]["npu_smi"] == "npu-smi, device 1"
    assert facts["device_id"] == 1


def test_a_hanging_npu_smi_costs_a_warning_and_never_stalls_logging(
    tmp_path: Path,
    caplog,  # type: ignore[no-untyped-def]
) -> None:
    exe = _npu_smi(tmp_path, "sleep 600\n")
    config = {**QUIET, "hardware": {"period_s": 0.5, "npu_smi_path": exe, "npu_smi_timeout_s": 1}}
    with Monitor(tmp_path / "run", config) as mon:
        for step in range(1, 150):
            mon.log_step(step, loss=1.0)
            time.sleep(0.01)
    curves = scalars(tmp_path / "run")
    assert len(curves["train/loss"]) == 149
    assert curves["hw/rss_mb"]  # the host probe went on
    assert not [tag for tag in curves if tag.startswith("hw/npu_")]
    slow = [r.getMessage() for r in caplog.records if "npu" in r.getMessage()]
    assert 1 <= len(slow) <= 2  # the probe past its budget, and npu-smi killed
    # The probe is named as the sources name it, so its warnings can be matched to them.
    assert (
        "mindwatch: hardware probe 'npu_smi' took longer than its 0.5 s budget; it is "
        "skipped until it returns (raise hardware.period_s if it is always this slow)"
    ) in slow


def test_run_json_names_the_disk_holding_the_run_folder(tmp_path: Path) -> None:
    from tests.hardware.test_host_values import _kernel_disk

    expected = _kernel_disk(tmp_path)
    keys = set(psutil.disk_io_counters(perdisk=True) or {})
    if expected is None or expected not in keys:
        pytest.skip(f"{tmp_path} is on no block device psutil counts here (overlay, tmpfs)")
    with Monitor(tmp_path / "run", {**QUIET, "hardware": {"period_s": 60}}) as mon:
        mon.log_step(1, loss=1.0)
    sources = json.loads((tmp_path / "run" / "run.json").read_text())["hardware"]["sources"]
    assert (sources["disk"], sources["net"]) == (expected, "all interfaces")


def test_a_run_folder_on_no_disk_says_its_rates_are_all_disks() -> None:
    shm = Path("/dev/shm")
    mounts = {p.mountpoint: p.fstype for p in psutil.disk_partitions(all=True)}
    if mounts.get(str(shm)) != "tmpfs" or not os.access(shm, os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm on this host")
    with tempfile.TemporaryDirectory(dir=shm) as folder:
        with Monitor(Path(folder) / "run", {**QUIET, "hardware": {"period_s": 60}}) as mon:
            mon.log_step(1, loss=1.0)
        facts = json.loads((Path(folder) / "run" / "run.json").read_text())["hardware"]
    # Not the disk of the working directory, which holds no part of this run.
    assert facts["sources"]["disk"] == "all disks"


def test_on_four_ranks_a_tie_for_the_hottest_names_the_lowest(tmp_path: Path) -> None:
    temps = [40.0, 65.0, 50.0, 65.0]  # ranks 1 and 3 share the maximum

    def body(mon: Monitor, rank: int) -> None:
        assert mon.telemetry is not None
        mon.telemetry.add_probe("card", lambda: {"hw/npu_temp_c": temps[rank]}, "test")
        with mon:
            for step in range(1, 121):
                mon.log_step(step, loss=1.0, samples=8)
                time.sleep(0.01)

    run_ranks(4, tmp_path, body, config={"aggregate_every": 20, "hardware": {"period_s": 0.5}})
    curves = scalars(tmp_path)
    assert curves["hw/npu_temp_c"]
    assert {v for _, v in curves["hw/npu_temp_c"]} == {65.0}
    assert {v for _, v in curves["ranks/npu_temp_c_argmax"]} == {1.0}
    assert {v for _, v in curves["ranks/npu_temp_c_min"]} == {40.0}
    assert {v for _, v in curves["ranks/npu_temp_c_mean"]} == {55.0}


def test_a_telemetry_that_cannot_start_is_off_with_a_warning_that_says_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import mindwatch.hardware.telemetry as telemetry
    from mindwatch.config.hardware import HardwareSettings

    def broken(path: object) -> None:
        raise RuntimeError("no psutil here")

    monkeypatch.setattr(telemetry, "HostProbe", broken)
    with caplog.at_level(logging.WARNING, logger="mindwatch.hardware.telemetry"):
        assert telemetry.open_telemetry(HardwareSettings(), tmp_path, rank=0) is None
    assert [r.getMessage() for r in caplog.records] == [
        "mindwatch: hardware telemetry is off: it could not start (RuntimeError('no psutil here'))"
    ]


def test_run_json_says_npu_smi_was_not_found(tmp_path: Path) -> None:
    from mindwatch.config.hardware import HardwareSettings
    from mindwatch.hardware.telemetry import open_telemetry

    facts: list[dict[str, object]] = []
    settings = HardwareSettings(period_s=60, npu_smi_path=str(tmp_path / "no" / "npu-smi"))
    found = open_telemetry(settings, tmp_path, rank=0, record=lambda **kw: facts.append(kw))
    assert found is not None
    found.close()
    sources = facts[-1]["hardware"]["sources"]  # type: ignore[index]
    assert sources["npu_smi"] == "not found (no Ascend NPU telemetry)"
    assert sources["host"] == "psutil"
    assert sources["net"] == "all interfaces"
