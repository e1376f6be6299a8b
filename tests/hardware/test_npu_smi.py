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
    assert reader.status in ("permission", "absent")
    assert len(caplog.records) == 1


def test_absent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reader = NpuSmi(0, executable=str(tmp_path / "none" / "npu-smi"))
    with caplog.at_level(logging.WARNING):
        assert reader.read() == {}
        assert reader.read() == {}
    assert reader.status == "absent"
    assert len(caplog.records) == 1
