"""HostProbe against psutil read independently in the test."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import psutil
import pytest

from mindwatch.hardware.host import MB, HostProbe

RATES = (
    "hw/cpu_percent",
    "hw/disk_read_mb_s",
    "hw/disk_write_mb_s",
    "hw/net_recv_mb_s",
    "hw/net_sent_mb_s",
)


def test_the_first_read_gives_levels_and_no_rates(tmp_path: Path) -> None:
    first = HostProbe(tmp_path)()
    assert {"hw/rss_mb", "hw/host_mem_available_mb"} <= set(first)
    assert not set(RATES) & set(first)


def test_rss_and_available_memory_match_psutil(tmp_path: Path) -> None:
    values = HostProbe(tmp_path)()
    rss = psutil.Process().memory_info().rss / 2**20
    available = psutil.virtual_memory().available / 2**20
    assert MB == 2**20
    assert values["hw/rss_mb"] == pytest.approx(rss, abs=32)
    # other processes share the machine: their memory moves between the two reads
    assert values["hw/host_mem_available_mb"] == pytest.approx(available, abs=512, rel=0.1)


def test_the_second_read_gives_every_rate(tmp_path: Path) -> None:
    probe = HostProbe(tmp_path)
    probe()
    (tmp_path / "f").write_bytes(os.urandom(1 << 20))
    time.sleep(0.05)
    values = probe()
    assert set(RATES) <= set(values)
    assert all(values[tag] >= 0 for tag in RATES)


def test_cpu_percent_after_a_busy_loop_is_positive(tmp_path: Path) -> None:
    probe = HostProbe(tmp_path)
    probe()
    spent = time.process_time()
    n = 0
    while time.process_time() - spent < 0.2:  # CPU time, not wall time
        n += 1
    values = probe()
    assert values["hw/cpu_percent"] > 0
    # 100 is one core: one busy Python thread cannot use more than the cores there are
    assert values["hw/cpu_percent"] <= 100 * (psutil.cpu_count() or 1) + 50


def test_the_network_is_every_interface(tmp_path: Path) -> None:
    # The disk holding the path: tests/hardware/test_host_values.py, pinned per disk.
    assert HostProbe(tmp_path).sources["net"] == "all interfaces"


def test_a_path_on_no_disk_falls_back_to_the_host_totals() -> None:
    shm = Path("/dev/shm")
    mounts = {p.mountpoint: p.fstype for p in psutil.disk_partitions(all=True)}
    if mounts.get(str(shm)) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm on this host")
    probe = HostProbe(shm)
    assert probe.sources["disk"] == "all disks"
    probe()
    assert "hw/disk_read_mb_s" in probe()


def test_a_counter_psutil_refuses_is_left_out_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise psutil.AccessDenied(os.getpid())

    monkeypatch.setattr(psutil, "net_io_counters", refused)
    probe = HostProbe(tmp_path)
    with caplog.at_level(logging.WARNING, logger="mindwatch.hardware.host"):
        readings = [probe() for _ in range(3)]
    warned = [r for r in caplog.records if "net_io" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert "AccessDenied" in warned[0].getMessage()
    for values in readings:
        assert "hw/net_recv_mb_s" not in values
        assert "hw/rss_mb" in values
    assert "hw/disk_read_mb_s" in readings[-1]
