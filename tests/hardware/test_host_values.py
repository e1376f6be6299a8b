"""HostProbe's values, not just their presence: each rate from the counter it names
(recorded psutil readings and a clock the test holds, then real I/O of known size),
and the disk it reads matched to the one holding the path (the kernel's own answer as
the reference, then recorded mount tables for the cases this host does not have)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Optional

import psutil
import pytest

import mindwatch.hardware.host as host
from mindwatch.hardware.host import MB, HostProbe

# psutil's own result types (psutil._ntuples since 7.0, psutil._common before).
_types = getattr(psutil, "_ntuples", None) or psutil._common
DiskIO = _types.sdiskio
NetIO = _types.snetio
Partition = _types.sdiskpart


def disk(read_bytes: int, write_bytes: int, **rest: int) -> Any:
    fields = dict.fromkeys(DiskIO._fields, 0)
    fields.update(rest, read_bytes=read_bytes, write_bytes=write_bytes)
    return DiskIO(**fields)


def part(device: str, mountpoint: str, fstype: str = "ext4") -> Any:
    fields = dict.fromkeys(Partition._fields, 0)
    fields.update(device=device, mountpoint=mountpoint, fstype=fstype, opts="rw")
    return Partition(**fields)


# vda's counters read on the test VM around real I/O: 37.8 MiB read and 1.5 MiB written
# in the first interval, 24.2 MiB read and 24.0 MiB written in the second.
VDA = [
    DiskIO(105934, 73820, 8006157312, 24234557440, 81782, 281025, 20814, 331289, 41992),
    DiskIO(106420, 74109, 8045814784, 24236138496, 82139, 281050, 20846, 331320, 42100),
    DiskIO(106439, 74121, 8071181312, 24261324800, 82184, 281080, 20846, 331320, 42124),
]
# Another disk of the host (busy: its numbers must not leak into vda's) and the totals.
OTHER = [disk(10**9 * k, 3 * 10**9 * k) for k in (1, 2, 3)]
TOTAL = [
    disk(a.read_bytes + b.read_bytes, a.write_bytes + b.write_bytes) for a, b in zip(VDA, OTHER)
]
# The host's network: received 7.2 GB and sent 2.3 GB when recorded; then a download.
NET = [
    NetIO(2318405410, 7200293204, 716398, 757768, 0, 0, 0, 0),
    NetIO(2318905410, 7264293204, 716900, 760000, 0, 0, 0, 0),
    NetIO(2319105410, 7264493204, 717000, 760100, 0, 0, 0, 0),
]
TIMES = [100.0, 102.0, 102.5]  # monotonic seconds at each call: intervals of 2 s and 0.5 s


class Replay:
    """psutil's counters and the probe's clock, one recorded reading per call."""

    def __init__(
        self, partitions: list[Any], monkeypatch: pytest.MonkeyPatch, vda: list[Any] = VDA
    ) -> None:
        self.i = 0
        self.partitions = partitions
        self.vda = vda
        monkeypatch.setattr(psutil, "disk_partitions", lambda all=False: self.partitions)
        monkeypatch.setattr(psutil, "disk_io_counters", self.disk)
        monkeypatch.setattr(
            psutil, "net_io_counters", lambda pernic=False, nowrap=True: NET[self.i]
        )
        monkeypatch.setattr(host, "time", self)  # the probe's module only

    def disk(self, perdisk: bool = False, nowrap: bool = True) -> Any:
        if perdisk:
            return {"vda": self.vda[self.i], "sdb": OTHER[self.i], "loop0": disk(0, 0)}
        return TOTAL[self.i]

    def monotonic(self) -> float:
        return TIMES[self.i]

    def readings(self, probe: HostProbe) -> list[dict[str, float]]:
        out = []
        for i in range(len(TIMES)):
            self.i = i
            out.append(probe())
        return out


def rate(series: list[Any], field: str, i: int) -> float:
    return (
        (getattr(series[i], field) - getattr(series[i - 1], field)) / MB / (TIMES[i] - TIMES[i - 1])
    )


def test_each_rate_is_its_own_counters_over_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay = Replay([part("/dev/vda", "/")], monkeypatch)
    probe = HostProbe(tmp_path)
    assert probe.sources["disk"] == "vda"
    first, second, third = replay.readings(probe)
    assert "hw/disk_read_mb_s" not in first  # the first call only primes
    for i, got in ((1, second), (2, third)):
        assert got["hw/disk_read_mb_s"] == rate(VDA, "read_bytes", i)
        assert got["hw/disk_write_mb_s"] == rate(VDA, "write_bytes", i)
        assert got["hw/net_recv_mb_s"] == rate(NET, "bytes_recv", i)
        assert got["hw/net_sent_mb_s"] == rate(NET, "bytes_sent", i)
    # The numbers themselves: MiB per second over 2 s, then over 0.5 s.
    assert second["hw/disk_read_mb_s"] == pytest.approx(39657472 / 2**20 / 2)  # 18.9
    assert second["hw/disk_write_mb_s"] == pytest.approx(1581056 / 2**20 / 2)  # 0.75
    assert second["hw/net_recv_mb_s"] == pytest.approx(64e6 / 2**20 / 2)  # 30.5
    assert second["hw/net_sent_mb_s"] == pytest.approx(5e5 / 2**20 / 2)  # 0.24
    assert third["hw/disk_read_mb_s"] == pytest.approx(25366528 / 2**20 / 0.5)
    assert third["hw/disk_write_mb_s"] == pytest.approx(25186304 / 2**20 / 0.5)


def test_a_path_on_no_known_disk_reads_the_host_totals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay = Replay([part("overlay", "/", "overlay")], monkeypatch)
    probe = HostProbe(tmp_path)
    assert probe.sources["disk"] == "all disks"
    _, second, third = replay.readings(probe)
    assert second["hw/disk_read_mb_s"] == rate(TOTAL, "read_bytes", 1)
    assert third["hw/disk_write_mb_s"] == rate(TOTAL, "write_bytes", 2)


def test_a_counter_that_went_back_reads_zero_for_that_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The disk was reset (or a 32-bit counter wrapped) between the first two reads.
    reset = [VDA[1], disk(4096, 8192), disk(4096 + 2 * 2**20, 8192 + 2**20)]
    replay = Replay([part("/dev/vda", "/")], monkeypatch, vda=reset)
    _, second, third = replay.readings(HostProbe(tmp_path))
    assert (second["hw/disk_read_mb_s"], second["hw/disk_write_mb_s"]) == (0.0, 0.0)
    assert (third["hw/disk_read_mb_s"], third["hw/disk_write_mb_s"]) == (4.0, 2.0)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/data/run", "nvme0n1p1"),  # the longest mount holding the path
        ("/data", "nvme0n1p1"),  # the mount point itself
        ("/database/run", "sda1"),  # /data is a prefix of the name, not a parent
        ("/srv/run", "sdc1"),  # a trailing separator in the table
        ("/srv2/run", "sda1"),
        ("/mnt/nfs/run", None),  # a network file system: no disk of ours
        ("/dev/shm/run", None),  # tmpfs
    ],
)
def test_the_disk_holding_the_path_from_a_mount_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, expected: Optional[str]
) -> None:
    table = [
        part("/dev/sda1", "/"),
        part("/dev/nvme0n1p1", "/data"),
        part("/dev/sdc1", "/srv/"),
        part("server:/export", "/mnt/nfs", "nfs4"),
        part("tmpfs", "/dev/shm", "tmpfs"),
    ]
    keys = {"sda", "sda1", "nvme0n1", "nvme0n1p1", "sdc1", "dm-0"}
    monkeypatch.setattr(psutil, "disk_partitions", lambda all=False: table)
    monkeypatch.setattr(
        psutil, "disk_io_counters", lambda perdisk=False, nowrap=True: dict.fromkeys(keys)
    )
    monkeypatch.setattr(os.path, "realpath", lambda p, **kw: p)  # the paths are not on this host
    assert HostProbe(path).sources["disk"] == (expected or "all disks")


def test_a_device_mapper_name_is_matched_through_its_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /dev/mapper/vg-root is a link to /dev/dm-0, and psutil's key is dm-0.
    (tmp_path / "dm-0").write_bytes(b"")
    (tmp_path / "mapper").mkdir()
    (tmp_path / "mapper" / "vg-root").symlink_to(tmp_path / "dm-0")
    table = [part(str(tmp_path / "mapper" / "vg-root"), "/")]
    monkeypatch.setattr(psutil, "disk_partitions", lambda all=False: table)
    monkeypatch.setattr(
        psutil, "disk_io_counters", lambda perdisk=False, nowrap=True: {"dm-0": disk(0, 0)}
    )
    assert HostProbe(tmp_path).sources["disk"] == "dm-0"


def _refused(*args: object, **kwargs: object) -> Any:
    raise psutil.AccessDenied(os.getpid())


def test_a_mount_table_that_cannot_be_read_falls_back_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(psutil, "disk_partitions", _refused)
    with caplog.at_level(logging.WARNING, logger="mindwatch.hardware.host"):
        probe = HostProbe(tmp_path)
    assert probe.sources["disk"] == "all disks"
    assert [r.getMessage() for r in caplog.records] == [
        f"mindwatch: hardware: cannot map {os.path.realpath(tmp_path)} to a disk "
        f"(AccessDenied: {psutil.AccessDenied(os.getpid())}); disk rates are the whole host's"
    ]


# ------------------------------------------------------------------ this host, for real


def _kernel_disk(path: Path) -> Optional[str]:
    """The block device holding ``path`` as the kernel names it (its device number's
    entry in /sys/dev/block), independently of the mount table the probe reads."""
    dev = os.stat(path).st_dev
    entry = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    return entry.resolve().name if entry.exists() else None


def test_the_disk_is_the_one_holding_the_path(tmp_path: Path) -> None:
    expected = _kernel_disk(tmp_path)
    keys = set(psutil.disk_io_counters(perdisk=True) or {})
    if expected is None or expected not in keys:
        pytest.skip(f"{tmp_path} is on no block device psutil counts here (overlay, tmpfs)")
    assert HostProbe(tmp_path).sources["disk"] == expected  # not the "all disks" fallback


class _Clock:
    """The probe's clock: one second per call, so a rate reads as the MiB moved."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_real_writes_raise_the_write_rate_and_real_reads_the_read_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = 32  # MiB; other processes may add traffic, never take ours away
    monkeypatch.setattr(host, "time", _Clock())
    probe = HostProbe(tmp_path)
    if probe.sources["disk"] == "all disks" and _kernel_disk(tmp_path) is None:
        pytest.skip(f"{tmp_path} is on no block device: its I/O is on no disk counter")
    data = tmp_path / "data.bin"
    probe()
    with data.open("wb") as f:
        for _ in range(size):
            f.write(os.urandom(2**20))
        f.flush()
        os.fsync(f.fileno())  # on the disk now, not only in the page cache
    wrote = probe()
    fd = os.open(data, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # out of the cache: read from disk
        while os.read(fd, 2**20):
            pass
    finally:
        os.close(fd)
    read = probe()
    assert wrote["hw/disk_write_mb_s"] >= size
    assert read["hw/disk_read_mb_s"] >= size
    # Rates swapped would need another process to read 32 MiB while we wrote and write
    # 32 MiB while we read; the recorded test above pins the fields exactly.


# ------------------------------------------------------------------ what a failure says


@pytest.mark.parametrize(
    "case",
    [
        ("cpu_percent", psutil.Process, "cpu_percent"),
        ("rss_mb", psutil.Process, "memory_info"),
        ("host_mem_available_mb", psutil, "virtual_memory"),
    ],
    ids=lambda case: str(case[0]) if isinstance(case, tuple) else "",
)
def test_a_refused_counter_is_named_in_its_one_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    case: tuple[str, Any, str],
) -> None:
    counter, owner, attribute = case
    tag = f"hw/{counter}"
    replay = Replay([part("/dev/vda", "/")], monkeypatch)
    monkeypatch.setattr(owner, attribute, _refused)
    with caplog.at_level(logging.WARNING, logger="mindwatch.hardware.host"):
        readings = replay.readings(HostProbe(tmp_path))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert messages[0].startswith(
        f"mindwatch: hardware: {counter} is not available here (AccessDenied: "
    ), messages
    assert messages[0].endswith("; it is left out")
    for values in readings:
        assert tag not in values
    assert readings[-1]["hw/disk_read_mb_s"] == rate(VDA, "read_bytes", 2)  # the others go on


def test_a_host_with_no_disk_counters_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    replay = Replay([part("overlay", "/", "overlay")], monkeypatch)
    monkeypatch.setattr(
        psutil,
        "disk_io_counters",
        lambda perdisk=False, nowrap=True: {} if perdisk else None,  # psutil's "none here"
    )
    with caplog.at_level(logging.WARNING, logger="mindwatch.hardware.host"):
        probe = HostProbe(tmp_path)
        readings = replay.readings(probe)
    assert probe.sources["disk"] == "all disks"
    assert [r.getMessage() for r in caplog.records] == [
        "mindwatch: hardware: disk_io is not available here (NotImplementedError: psutil "
        "found no disk counters); it is left out"
    ]
    assert not [tag for values in readings for tag in values if tag.startswith("hw/disk_")]
    assert readings[-1]["hw/net_recv_mb_s"] == rate(NET, "bytes_recv", 2)
