"""Issue 20, item 11: an event file or run folder that vanishes under the writer, and
what ``mindwatch watch`` says about a run that is gone.

The writer compares its open file with the one at its path before each write (on its
own thread); once the file or folder is gone or replaced it warns once, creates the
folder again and goes on in a new file. A watcher forgets a run whose folder vanished
(an info line, not a ``stall``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import pytest

import mindwatch
from mindwatch.events import EventFileWriter
from mindwatch.tools.watch import Watcher
from tests.hostile.promise import one_warning, reads_back
from tests.tbread import scalars

QUIET = {"print_every": 0, "flush_secs": 0.2, "alerts": {"enabled": False}}


def test_an_event_file_deleted_under_the_writer_is_begun_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = EventFileWriter(tmp_path, flush_secs=0.2)
    for step in range(1, 11):
        writer.add_scalar("x", float(step), step)
    assert writer.flush(30)
    (first,) = writer.stats.files
    caplog.set_level(logging.WARNING, logger="mindwatch")
    os.unlink(first)  # e.g. a cleanup script, or `rm runs/x/events*`
    for step in range(11, 21):
        writer.add_scalar("x", float(step), step)
    writer.close()
    warning = one_warning(caplog.records, first, "deleted or replaced", str(tmp_path))
    assert "\n" not in warning
    stats = writer.stats
    assert stats.files_vanished == 1
    assert stats.write_errors == 0
    assert stats.points_dropped == 0
    assert first not in stats.files
    assert [Path(f).exists() for f in stats.files] == [True]
    assert stats.file_bytes == (Path(stats.files[0]).stat().st_size,)
    reads_back(tmp_path, {"x": [(s, float(s)) for s in range(11, 21)]})


def test_an_event_file_replaced_under_the_writer_is_noticed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another file renamed over the writer's path: same name, another inode."""
    writer = EventFileWriter(tmp_path / "run", flush_secs=0.2)
    writer.add_scalar("x", 1.0, 1)
    assert writer.flush(30)
    (first,) = writer.stats.files
    caplog.set_level(logging.WARNING, logger="mindwatch")
    shutil.copy(first, tmp_path / "copy")
    os.replace(tmp_path / "copy", first)
    writer.add_scalar("x", 2.0, 2)
    writer.close()
    one_warning(caplog.records, first, "deleted or replaced")
    assert writer.stats.files_vanished == 1
    assert [s for s, _ in scalars(tmp_path / "run")["x"]] == [1, 2]  # the copy, then the new


def test_a_monitors_run_folder_deleted_mid_run_keeps_the_later_points_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    with mindwatch.Monitor(run, QUIET) as mon:
        for step in range(1, 21):
            mon.log_step(step, loss=1.0 / step)
        mon.flush()
        caplog.set_level(logging.WARNING, logger="mindwatch")
        shutil.rmtree(run)
        for step in range(21, 41):
            mon.log_step(step, loss=1.0 / step)
        mon.record(note="run.json is written again too")  # into the folder made again
    one_warning(caplog.records, str(run), "deleted or moved")
    reads_back(run, {"train/loss": [(s, 1.0 / s) for s in range(21, 41)]})
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "finished"
    assert info["event_files_vanished"] == 1
    assert info["note"] == "run.json is written again too"


def test_watch_forgets_a_run_whose_folder_vanished_instead_of_calling_it_stalled(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    for name in ("gone", "kept"):
        with mindwatch.Monitor(root / name, QUIET) as mon:
            mon.log_step(1, loss=1.0)
    running = mindwatch.Monitor(root / "running", QUIET)  # its folder vanishes mid-run
    running.log_step(1, loss=1.0)
    running.flush()
    infos: list[str] = []
    notices: list[str] = []
    watcher = Watcher(root, on_info=infos.append, on_notice=notices.append)
    assert watcher.poll() == []
    shutil.rmtree(root / "gone")  # a finished run, deleted
    (root / "running").rename(tmp_path / "elsewhere")  # a running run, moved away
    later = time.time() + 3600  # long past stall.seconds
    try:
        assert watcher.poll(now=later) == []  # neither is stalled: they are gone
    finally:
        running.close()
    assert sorted(line.split(":")[1].strip() for line in infos) == ["gone", "running"]
    assert all("no longer watched" in line and "\n" not in line for line in infos)
    assert notices == []
    infos.clear()
    assert watcher.poll(now=later + 1) == []
    assert infos == []
