"""Issue 20, item 10: what run.json says against what the event files really hold, and
steps that go back or repeat.

``doctor`` compares a finished run's ``run.json`` (status, last step, steps logged, the
files and their sizes) with the files (records read, steps held, torn tails, damage,
empty and header-only files) and reports the gap naming the file, what is missing and
why; ``report``, ``compare`` and ``watch`` warn once. A tag whose steps go back or
repeat in one file is said once by ``Monitor.log_step`` (writing), and by ``doctor``
and ``read_scalars`` (reading files from any tool).
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.tools.watch import Watcher
from tests.hostile.promise import mindwatch_warnings, one_warning, reads_back
from tests.tbread import scalars

QUIET = {"print_every": 0, "alerts": {"enabled": False}}
STEPS = 50


def finished_run(folder: Path) -> Path:
    """A finished run of 50 steps; its only event file."""
    with mindwatch.Monitor(folder, QUIET) as mon:
        for step in range(1, STEPS + 1):
            mon.log_step(step, loss=1.0 / step, lr=0.1)
    (path,) = folder.glob("*tfevents*")
    return path


def record_ends(data: bytes) -> list[int]:
    ends, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 16 + length
        ends.append(pos)
    return ends


def cut_to_steps(path: Path, steps: int) -> None:
    """Cut the file in the middle of the record after the one holding ``steps``."""
    data = path.read_bytes()
    ends = record_ends(data)
    kept = next(i for i in range(len(ends)) if _has_step(data, ends, i, steps))
    path.write_bytes(data[: ends[kept] + 7])


def _has_step(data: bytes, ends: list[int], i: int, step: int) -> bool:
    from tensorboard.compat.proto.event_pb2 import Event

    start = ends[i - 1] if i else 0
    event = Event.FromString(data[start + 12 : ends[i] - 4])
    return event.step == step and event.WhichOneof("what") == "summary"


def doctor(folder: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["doctor", str(folder)])
    return result.exit_code, result.output


def test_a_finished_runs_only_event_file_of_0_bytes_is_a_problem(tmp_path: Path) -> None:
    path = finished_run(tmp_path / "run")
    path.write_bytes(b"")
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert f"{path.name} is empty (0 bytes)" in out
    assert "run.json says the run finished at step 50 after logging 50 steps" in out
    assert "its event files hold no step" in out
    assert "healthy" not in out


def test_a_file_cut_mid_record_so_12_of_50_steps_read_is_a_problem(tmp_path: Path) -> None:
    path = finished_run(tmp_path / "run")
    cut_to_steps(path, 12)
    assert [s for s, _ in scalars(path.parent)["train/loss"]] == list(range(1, 13))
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert "hold 12 steps, up to step 12: 38 steps are missing" in out
    # The likely cause, named: the size run.json recorded, against the file.
    assert f"likely because {path.name} was cut to {path.stat().st_size:,} of" in out
    assert f"{path.name} is {path.stat().st_size:,} bytes, but its writer wrote" in out
    assert out.count("PROBLEM") == 2, out  # the torn end is the cut's: said once


def test_a_torn_last_record_without_run_json_sizes_is_named(tmp_path: Path) -> None:
    """A run.json without the files' sizes (an older mindwatch, or another writer's
    run): the torn end itself is the evidence."""
    path = finished_run(tmp_path / "run")
    cut_to_steps(path, 12)
    info_path = tmp_path / "run" / "run.json"
    info = json.loads(info_path.read_text())
    del info["event_file_bytes"]
    info_path.write_text(json.dumps(info))
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert f"{path.name} ends in an incomplete record" in out
    assert f"likely because {path.name} ends in an incomplete record" in out


def test_a_file_cut_at_a_record_boundary_is_told_by_the_size_run_json_recorded(
    tmp_path: Path,
) -> None:
    """The last step lost with nothing torn: only the bytes the writer wrote tell."""
    with mindwatch.Monitor(tmp_path / "run", QUIET) as mon:
        for step in range(1, 11):
            mon.log_step(step, loss=1.0)
        mon.log_eval(10, loss=2.0)  # the last record: an evaluation at the last step
    (path,) = (tmp_path / "run").glob("*tfevents*")
    data = path.read_bytes()
    path.write_bytes(data[: record_ends(data)[-2]])
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert f"{path.name} is {len(data) - (len(data) - record_ends(data)[-2]):,} bytes" in out
    assert "cut after the run" in out


def test_zero_filled_and_damaged_regions_are_named_with_what_tensorboard_loses(
    tmp_path: Path,
) -> None:
    path = finished_run(tmp_path / "run")
    data = path.read_bytes()
    ends = record_ends(data)
    path.write_bytes(data[: ends[10]] + bytes(ends[20] - ends[10]) + data[ends[20] :])
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert f"{path.name}: {ends[20] - ends[10]:,} bytes zero-filled at byte {ends[10]}" in out
    assert "power loss" in out
    shown = f"so {len(ends) - 21} of its {len(ends) - 10} records do not show in TensorBoard"
    assert shown in out


def test_a_zero_filled_tail_is_named_with_its_whole_length(tmp_path: Path) -> None:
    """Power loss: 1 MiB of zeros after the last record. The finding counts every byte
    of it (the reader keeps its last 11 bytes apart, as a record being written might
    start there; doctor used to say 1,048,565)."""
    path = finished_run(tmp_path / "run")
    size = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(bytes(1 << 20))
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert f"{path.name}: its last 1,048,576 bytes, from byte {size}, are zero-filled" in out


def test_a_header_only_file_of_another_tool_is_a_warning_once_settled(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    SummaryWriter(str(tmp_path / "run")).close()  # opened, given nothing
    (path,) = (tmp_path / "run").glob("*tfevents*")
    code, out = doctor(tmp_path / "run")
    assert code == 0, out  # just written: it may be about to get its first values
    assert "holds only its header" in out
    old = time.time() - 3600
    os.utime(path, (old, old))
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert f"{path.name} holds only its header: nothing was logged to it, so TensorBoard" in out


def test_ordinary_runs_are_healthy_and_silent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No false alarm: several events at one step (a step and an evaluation, histograms,
    log_scalars), MindFormers' samples axes, and a resume whose marker hides the
    crashed attempt's steps."""
    caplog.set_level(logging.WARNING, logger="mindwatch")
    run = tmp_path / "runs" / "exp"
    config = {**QUIET, "tag_style": "mindformers"}
    with mindwatch.Monitor(run, config) as mon:
        for step in range(1, 31):
            mon.log_step(step, loss=1.0 / step, lr=0.1, samples=0)
            if step % 10 == 0:
                mon.log_eval(step, loss=2.0 / step)
                mon.log_histogram("weights", np.arange(10.0), step)
                mon.log_scalars(step, {"layers/param_norm/w": 1.0})
    with mindwatch.Monitor(run, config, resume_step=21) as mon:  # resumed at 21
        for step in range(21, 41):
            mon.log_step(step, loss=1.0 / step, lr=0.1, samples=0)
    code, out = doctor(tmp_path / "runs")
    assert code == 0, out
    assert out.strip().endswith("healthy")
    mindwatch.read_scalars(tmp_path / "runs")
    assert mindwatch_warnings(caplog.records) == []


def test_log_step_going_back_or_repeating_is_one_warning_and_nothing_is_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")
    with mindwatch.Monitor(tmp_path / "run", QUIET) as mon:
        for step in (10, 10, 3, -5):
            mon.log_step(step, loss=float(step))
    warning = one_warning(caplog.records, "log_step(10) again", "step 10", "resume_step=10")
    assert "two points at that step" in warning  # what TensorBoard will show
    assert "\n" not in warning
    got = scalars(tmp_path / "run")["train/loss"]
    assert got == [(10, 10.0), (10, 10.0), (3, 3.0), (-5, -5.0)]  # written as given
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["steps_out_of_order"] == 3
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert "train/loss repeats step 10 (3 points at steps it had already passed)" in out
    assert "steps are missing" not in out  # the repeats are not a gap


def test_log_step_going_back_names_both_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")
    with mindwatch.Monitor(tmp_path / "run", QUIET) as mon:
        for step in (*range(1, 6), 3, 4, 6):
            mon.log_step(step, loss=float(step))
    warning = one_warning(caplog.records, "log_step(3) after step 5", "folding back")
    assert "mark_resume(3)" in warning
    reads_back(tmp_path / "run", {"train/loss": [(s, float(s)) for s in range(1, 7)]})


def test_another_tools_file_with_steps_going_back_is_a_finding_and_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path / "run")) as writer:  # steps 1-50, then 20-40
        for step in [*range(1, 51), *range(20, 41)]:
            writer.add_scalar("loss", 1.0 / step, step)
            writer.add_scalar("lr", 0.1, step)
    (path,) = (tmp_path / "run").glob("*tfevents*")
    code, out = doctor(tmp_path / "run")
    assert code == 1, out
    assert f"{path.name}: loss goes back from step 50 to step 20 (21 points" in out
    assert "also 1 more tag" in out
    assert "purge_step=20" in out
    caplog.set_level(logging.WARNING, logger="mindwatch")
    frame = mindwatch.read_scalars(tmp_path)
    assert len(frame) == 2 * 71  # nothing dropped: every point, as TensorBoard shows them
    warning = one_warning(caplog.records, str(path), "loss goes back from step 50 to step 20")
    assert "mindwatch doctor" in warning


def test_report_compare_and_watch_warn_once_when_a_finished_run_lacks_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mindwatch.tools.compare import load_run

    path = finished_run(tmp_path / "runs" / "cut")
    cut_to_steps(path, 12)
    said = "run.json says the run finished at step 50 after logging 50 steps, but its event files"
    result = CliRunner().invoke(
        main, ["report", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.count(f"{said} hold 12 steps, up to step 12") == 1, result.output
    facts = json.loads((tmp_path / "out" / "report.json").read_text())
    assert any("hold 12 steps" in str(run.get("missing_steps")) for run in facts["runs"])
    caplog.set_level(logging.WARNING, logger="mindwatch")
    load_run(tmp_path / "runs" / "cut")
    one_warning(caplog.records, said, "the comparison uses what they hold")
    notices: list[str] = []
    watcher = Watcher(tmp_path / "runs", on_notice=notices.append)
    watcher.poll()
    watcher.poll()
    assert len(notices) == 1, notices
    assert f"{said} hold steps up to step 12" in notices[0]
