"""The console progress: one line per report that fits the width, the last step always."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Optional

import pytest

import mindwatch
from mindwatch.config import MonitorConfig
from mindwatch.config.model import PRINT_SECS
from mindwatch.sinks import ProgressSink
from mindwatch.sinks.items import EvalValues, StepValues, TotalSteps

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

VALUES = {
    "train/loss": 0.0691,
    "train/grad_norm": 1.574,
    "train/lr": 4.849e-2,
    "perf/step_time_ms": 1.4,
    "perf/samples_per_s": 22857.0,
}


class Terminal(io.StringIO):
    """A stream that says it is a terminal (as a real one would to rich and to us)."""

    def isatty(self) -> bool:
        return True


def report(stream: io.StringIO, *, mode: str = "auto", steps: int = 300) -> None:
    sink = ProgressSink(every=60, mode=mode, total=steps, stream=stream)
    start = time.time()
    for step in range(1, steps + 1):
        sink.write(StepValues(step, list(VALUES.items()), start + step))
    sink.close()


def test_a_log_line_without_columns_is_whole_and_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    report(out)
    lines = out.getvalue().splitlines()
    assert lines[1] == (
        "[mindwatch] step 120/300 | loss 0.0691 | grad_norm 1.574 | lr 4.849e-02 | "
        "1.4 ms/step | samples/s 22857 | ETA 0:03:00"
    )
    assert "\x1b" not in out.getvalue()


@pytest.mark.parametrize("columns", [80, 120])
def test_log_lines_fit_columns_and_keep_the_step_and_eta(
    monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    out = io.StringIO()
    report(out)
    text = out.getvalue()
    assert "\x1b" not in text  # not a terminal: no escape codes, one line per report
    lines = text.splitlines()
    assert [ln.split(" | ")[0] for ln in lines] == [
        f"[mindwatch] step {s}/300" for s in (60, 120, 180, 240, 300)
    ]
    assert all(len(ln) <= columns for ln in lines), lines
    assert all(ln.endswith("ETA 0:03:00" if "120/" in ln else "") for ln in lines)
    assert "ETA" in lines[0]
    assert lines[-1].endswith("elapsed 0:04:59")
    if columns == 80:  # the least important fields went first
        assert lines[1] == "[mindwatch] step 120/300 | loss 0.0691 | grad_norm 1.574 | ETA 0:03:00"
    else:  # wide enough for everything
        assert "samples/s 22857" in lines[1]
        assert "lr 4.849e-02" in lines[1]


@pytest.mark.parametrize("columns", [80, 120])
def test_terminal_lines_fit_the_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))  # what rich reads as the terminal's width
    out = Terminal()
    report(out, mode="line")
    lines = ESCAPES.sub("", out.getvalue()).splitlines()
    assert len(lines) == 5
    assert all(len(ln) <= columns for ln in lines), lines
    assert all("ETA" in ln for ln in lines[:-1])
    assert "step 120/300" in lines[1]


@pytest.mark.parametrize("columns", [80, 120])
def test_the_bar_fits_the_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    out = Terminal()
    report(out)  # auto on a terminal: the bar
    shown = [s for s in re.split(r"[\r\n]", ESCAPES.sub("", out.getvalue())) if s.strip()]
    assert shown
    assert all(len(s) <= columns for s in shown), shown
    assert any("step 120/300" in s and "ETA 0:03:00" in s for s in shown), shown
    assert "step 300/300" in shown[-1]
    assert "━" in shown[-1]  # the bar itself
    assert ("samples/s" in shown[-1]) is (columns == 120)


def test_the_last_step_is_shown_when_it_is_not_a_multiple(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mindwatch.Monitor(tmp_path / "known", {"print_every": 25}, total_steps=60) as mon:
        for step in range(1, 61):
            mon.log_step(step, loss=0.5)
    with mindwatch.Monitor(tmp_path / "unknown", {"print_every": 25}) as mon:
        for step in range(1, 61):
            mon.log_step(step, loss=0.5)
    heads = [ln.split(" | ")[0] for ln in capsys.readouterr().out.splitlines()]
    assert heads == [
        "[mindwatch] step 25/60",
        "[mindwatch] step 50/60",
        "[mindwatch] step 60/60",
        "[mindwatch] step 25",
        "[mindwatch] step 50",
        "[mindwatch] step 60",  # with no total: when the monitor closes
    ]


def test_a_step_beyond_a_wrong_total_shows_no_total(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    sink = ProgressSink(every=10, mode="line", stream=out)
    sink.write(TotalSteps(1))
    sink.write(StepValues(120, [("train/loss", 0.5)], time.time()))
    sink.close()
    assert out.getvalue() == "[mindwatch] step 120 | loss 0.5000\n"


def test_an_evaluation_is_shown_after_its_step_when_steps_come_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under reduction the steps arrive in batches, after the evaluation at their end."""
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    sink = ProgressSink(every=50, mode="line", total=200, stream=out)
    now = time.time()
    sink.write(StepValues(90, [("train/loss", 0.5)], now))
    sink.write(EvalValues(100, [("eval/loss", 0.25)]))  # made at step 100's end
    sink.write(StepValues(100, [("train/loss", 0.4)], now + 1))  # reduced later
    sink.write(EvalValues(200, [("eval/loss", 0.125)]))  # the run ends before step 200's
    sink.close()
    assert [ln.split(" | ")[0] for ln in out.getvalue().splitlines()] == [
        "[mindwatch] step 90/200",
        "[mindwatch] step 100/200",
        "[mindwatch] eval at step 100",
        "[mindwatch] eval at step 200",
    ]


def test_a_short_run_says_how_long_it_took_in_seconds() -> None:
    out = io.StringIO()
    sink = ProgressSink(every=60, mode="auto", total=3, stream=out)
    start = time.time()
    for step in (1, 2, 3):
        sink.write(StepValues(step, list(VALUES.items()), start + 0.75 * (step - 1)))
    sink.close()
    assert out.getvalue().splitlines()[-1].endswith("elapsed 1.5 s")


def _shown_steps(text: str) -> list[int]:
    return [int(ln.split(" | ")[0].split()[2].split("/")[0]) for ln in text.splitlines()]


@pytest.mark.parametrize("total", [None, 500])
def test_lines_are_paced_by_the_steps_times_and_the_last_step_is_shown(
    monkeypatch: pytest.MonkeyPatch, total: Optional[int]
) -> None:
    """Steps 1/128 s apart (exact in binary), a line every 10 steps at least 1 s apart:
    the first round step after each second, then the last step (the total, or at close)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    sink = ProgressSink(every=10, secs=1.0, mode="line", total=total, stream=out)
    for step in range(1, 501):
        sink.write(StepValues(step, [("train/loss", 0.5)], 1000.0 + step / 128))
    sink.close()
    assert _shown_steps(out.getvalue()) == [10, 140, 270, 400, 500]


def test_slow_steps_still_print_every_print_every_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    sink = ProgressSink(every=10, secs=1.0, mode="line", stream=out)
    for step in range(1, 36):
        sink.write(StepValues(step, [("train/loss", 0.5)], 1000.0 + 0.5 * step))
    sink.close()
    assert _shown_steps(out.getvalue()) == [10, 20, 30, 35]


def test_print_secs_is_the_pacing_only_when_print_every_is_left_alone(tmp_path: Path) -> None:
    assert PRINT_SECS == MonitorConfig().print_secs > 0
    assert MonitorConfig.from_any({"print_every": 50}).print_secs == 0  # every 50 exactly
    assert MonitorConfig.from_any({"print_every": 50, "print_secs": 2}).print_secs == 2
    assert MonitorConfig.from_any({"print_secs": 5}).print_secs == 5
    mindformers = tmp_path / "finetune.yaml"  # MFLossMonitor's per_print_times is print_every
    mindformers.write_text("callbacks:\n  - type: MFLossMonitor\n    per_print_times: 5\n")
    assert MonitorConfig.from_any(mindformers).print_secs == 0


def test_a_tight_loop_of_fast_steps_prints_a_few_lines_and_the_last_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """5,000 steps as fast as log_step takes them, the default config: a line a second
    at most (the loop's own duration bounds the count), not one every 10 steps."""
    started = time.monotonic()
    with mindwatch.Monitor(tmp_path) as mon:
        for step in range(1, 5001):
            mon.log_step(step, loss=1.0 / step)
        took = time.monotonic() - started
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[mindwatch]")]
    assert 2 <= len(lines) <= took / PRINT_SECS + 3, (took, lines)
    assert lines[0].startswith("[mindwatch] step 10 |")  # the first report comes at once
    assert lines[-1].startswith("[mindwatch] step 5000 | loss 0.0002")
