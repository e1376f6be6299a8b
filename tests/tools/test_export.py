"""``mindwatch export``: every point, readable back, NaN and infinities kept."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    for name in ("a", "b"):
        with mindwatch.Monitor(tmp_path / "runs" / name, {"print_every": 0}) as mon:
            for step in range(1, 11):
                loss = math.nan if step == 3 else (math.inf if step == 4 else 1.0 / step)
                mon.log_step(step, loss=loss, lr=0.1)
    return tmp_path / "runs"


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(
        a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False
    )


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_every_point_round_trips(logdir: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"out.{fmt}"
    result = CliRunner().invoke(main, ["export", str(logdir), "--format", fmt, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"to {out}" in result.output
    expected = mindwatch.read_scalars(logdir)
    assert f"wrote {len(expected)} points (2 runs, 3 tags)" in result.output
    if fmt == "csv":
        got = pd.read_csv(out)
    elif fmt == "parquet":
        got = pd.read_parquet(out)
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert {r["value"] for r in rows if isinstance(r["value"], str)} == {"NaN", "Infinity"}
        got = pd.DataFrame(rows)
        got["value"] = got["value"].map(float)
    _same(got, expected)


def test_filters_and_bad_input(logdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "only.csv"
    args = ["export", str(logdir), "--run", "b", "--tag", "train/loss", "--out", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    got = pd.read_csv(out)
    assert set(got["run"]) == {"b"}
    assert set(got["tag"]) == {"train/loss"}
    missing = CliRunner().invoke(main, ["export", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert "is not a folder" in missing.output
    (tmp_path / "empty").mkdir()
    empty = CliRunner().invoke(main, ["export", str(tmp_path / "empty")])
    assert empty.exit_code == 2
    assert "no scalars found" in empty.output


def test_the_summary_is_chinese_under_a_chinese_locale(
    logdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGUAGE", "zh_CN")
    out = tmp_path / "scalars.csv"
    result = CliRunner().invoke(main, ["export", str(logdir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("已将 ")
    assert f"写入 {out}" in result.output
