from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from mindwatch.hardware.npu_smi import NpuSmi, parse_info_table, parse_mapping

FIXTURES = Path(__file__).parent.parent / "fixtures" / "npu_smi"


def test_910b_table() -> None:
    rows = parse_info_table((FIXTURES / "910b-23.0.2.1-info.txt").read_text())
    assert [(r.npu, r.chip, r.name) for r in rows] == [(0, 0, "910B2C"), (1, 0, "910B2C")]
    assert rows[0].values == {
        "npu_health": 0.0,
        "npu_power_w": 88.6,
        "npu_temp_c": 51.0,
        "npu_aicore_pct": 0.0,
        "npu_hbm_used_mb": 20701.0,
        "npu_hbm_total_mb": 65536.0,
        "npu_hbm_used_pct": 31.59,
    }


def test_310p_table_has_no_power() -> None:
    rows = parse_info_table((FIXTURES / "310p-24.1.0.1-info.txt").read_text())
    assert [(r.npu, r.chip) for r in rows] == [(1, 0), (1, 1)]
    assert "npu_power_w" not in rows[1].values
    assert rows[1].values["npu_hbm_used_mb"] == 15543.0
    assert rows[1].values["npu_hbm_total_mb"] == 43693.0


def test_310b_alarm() -> None:
    (row,) = parse_info_table((FIXTURES / "310b-23.0.0-info.txt").read_text())
    assert row.values["npu_health"] == 2.0
    assert row.values["npu_temp_c"] == 65.0
    assert row.values["npu_hbm_total_mb"] == 15609.0


def test_a_table_without_the_hugepages_column_keeps_the_temperature() -> None:
    # The 910B recording with the top right cell cut to power and temperature, the
    # layout of npu-smi versions before the Hugepages-Usage column (not recorded here).
    text = (FIXTURES / "910b-23.0.2.1-info.txt").read_text()
    cut = "\n".join(
        line.replace("0    / 0             |", "                    |")
        if "910B2C" in line
        else line
        for line in text.splitlines()
    )
    assert cut != text
    rows = parse_info_table(cut)
    assert [(r.values["npu_power_w"], r.values["npu_temp_c"]) for r in rows] == [
        (88.6, 51.0),
        (99.6, 50.0),
    ]


def test_a_chip_row_that_reads_no_chip_id_hides_none_after_it() -> None:
    # The first chip's second row damaged ("-" for its chip id): it is skipped, and the
    # chips after it are still read.
    text = (FIXTURES / "910b-23.0.2.1-info.txt").read_text()
    damaged = text.replace(
        "| 0                         | 0000:5A", "| -                         | 0000:5A"
    )
    assert damaged != text
    rows = parse_info_table(damaged)
    assert [(r.npu, r.chip, r.values["npu_hbm_used_mb"]) for r in rows] == [(1, 0, 20687.0)]


def test_mapping_skips_mcu() -> None:
    text = (FIXTURES / "310p-25.5.2-mapping.txt").read_text()
    assert parse_mapping(text) == {0: (32896, 0, "Ascend 310P3")}


def _stand_in(tmp_path: Path, body: str) -> str:
    script = tmp_path / "npu-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_read_through_stand_in(tmp_path: Path) -> None:
    mapping = tmp_path / "m.txt"
    mapping.write_text(
        "NPU ID  Chip ID  Chip Logic ID  Chip Name\n1 0 0 Ascend 310P3\n1 1 1 Ascend 310P3\n"
    )
    table = FIXTURES / "310p-24.1.0.1-info.txt"
    exe = _stand_in(
        tmp_path,
        f'if [ "$2" = "-m" ]; then cat {mapping}; else cat {table}; fi\n',
    )
    reader = NpuSmi(1, executable=exe)
    values = reader.read()
    assert values["npu_hbm_used_mb"] == 15543.0
    assert reader.chip_name == "Ascend 310P3"
    assert reader.status == "ok"


def test_a_slow_npu_smi_is_killed_at_its_timeout_not_waited_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Waited for, it would end after 5 s with no output ("unparseable", not "timeout").
    exe = _stand_in(tmp_path, "exec sleep 5\n")
    reader = NpuSmi(0, executable=exe, timeout=0.3)
    with caplog.at_level(logging.WARNING):
        assert reader.read() == {}
    assert reader.status == "timeout"
    assert [r.getMessage() for r in caplog.records] == [
        f"{exe} info -m gave no answer in 0.3 s; killed"
    ]


def test_hang_is_killed_and_warned_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reader = NpuSmi(0, executable=_stand_in(tmp_path, "sleep 600\n"), timeout=0.5)
    with caplog.at_level(logging.WARNING):
        assert reader.read() == {}
        assert reader.read() == {}
    assert reader.status == "timeout"
    assert len(caplog.records) == 1


def test_garbage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reader = NpuSmi(0, executable=_stand_in(tmp_path, "echo hello garbage\n"))
    with caplog.at_level(logging.WARNING):
        assert reader.read() == {}
        assert reader.read() == {}
    assert reader.status == "unparseable"
    assert len(caplog.records) == 1
    assert "hello garbage" in caplog.records[0].getMessage()


def test_not_executable(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    exe = _stand_in(tmp_path, "exit 0\n")
    os.chmod(exe, 0o644)
    reader = NpuSmi(0, executable=exe)
    with caplog.at_level(logging.WARNING):
        assert reader.read() == {}
    assert reader.status == "permission"  # it is there, only not executable
    assert [r.getMessage() for r in caplog.records] == [
        f"{exe} info -m: permission denied; make it executable"
    ]
    assert reader.chip_name is None


def test_an_npu_smi_that_cannot_start_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Executable, but neither a program nor a script (no #!): exec fails, ENOEXEC.
    exe = tmp_path / "npu-smi"
    exe.write_bytes(b"\x00\x01\x02 not a program\n")
    exe.chmod(0o755)
    reader = NpuSmi(0, executable=str(exe))
    with caplog.at_level(logging.WARNING):
        assert reader.read() == {}
        assert reader.read() == {}
    assert reader.status == "error"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"{exe} info -m could not start: [Errno 8] "), messages


def test_absent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reader = NpuSmi(0, executable=str(tmp_path / "none" / "npu-smi"))
    with caplog.at_level(logging.WARNING):
        assert reader.read() == {}
        assert reader.read() == {}
    assert reader.status == "absent"
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path / 'none' / 'npu-smi'} not found: no NPU values"
    ]
    assert reader.chip_name is None  # no device found: no name, not an empty one
