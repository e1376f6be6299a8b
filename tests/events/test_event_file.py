"""EventFile: an event file or run folder that vanishes under the writer.

Before each write the file it holds open is compared with the one at its path; what
happened (the file deleted or replaced, the run folder deleted, moved or made again)
is one warning naming the file or the folder, and the records go on in a new file of
the run folder, created again if needed. The end-to-end cases through the writer's
thread and ``Monitor`` are in tests/hostile/test_event_files_vanished.py; here each
way of vanishing is driven on the file directly, so the warning and the bookkeeping
are checked exactly.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

from mindwatch.events.encoding import encode_scalar
from mindwatch.events.event_file import EventFile
from mindwatch.events.records import frame
from tests.tbread import scalars


def _unlink_file(logdir: Path, file: Path) -> None:
    file.unlink()  # a cleanup script, `rm runs/x/events*`


def _replace_file(logdir: Path, file: Path) -> None:
    other = logdir / "other"
    other.write_bytes(b"")
    os.replace(other, file)  # another file renamed over the path: same name, new inode


def _delete_folder(logdir: Path, file: Path) -> None:
    shutil.rmtree(logdir)  # and nobody makes it again before the next write


def _move_folder(logdir: Path, file: Path) -> None:
    logdir.rename(logdir.with_name("moved"))


def _folder_made_again(logdir: Path, file: Path) -> None:
    shutil.rmtree(logdir)
    logdir.mkdir()  # by another writer (run.json's) before the next write: a new inode


VANISHINGS: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "file deleted": (_unlink_file, "file"),
    "file replaced": (_replace_file, "file"),
    "folder deleted": (_delete_folder, "folder"),
    "folder moved": (_move_folder, "folder"),
    "folder made again": (_folder_made_again, "folder"),
}


def _records(steps: range) -> list[bytes]:
    return [frame(encode_scalar(1.0, step, "x", float(step))) for step in steps]


def _failed(exc: OSError) -> None:
    raise AssertionError(f"no write should fail here: {exc}")


@pytest.mark.parametrize("how", list(VANISHINGS))
def test_a_vanished_file_or_folder_is_one_warning_naming_it_and_a_new_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    vanish, what = VANISHINGS[how]
    logdir = tmp_path / "run"
    logdir.mkdir()
    events = EventFile(logdir, max_file_size=None, suffix="", failed=_failed)
    events.open()
    events.write(_records(range(1, 6)))
    (first,) = events.files
    caplog.set_level(logging.WARNING, logger="mindwatch")
    vanish(logdir, Path(first))
    events.write(_records(range(6, 11)))
    events.write(_records(range(11, 16)))  # the second write after it: no new warning
    events.close()
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    happened = (
        f"the run folder {logdir} was deleted or moved"
        if what == "folder"
        else f"the event file {first} was deleted or replaced"
    )
    assert warnings == [
        f"mindwatch: {happened} while training wrote to it; the points from now on go to "
        f"a new event file in {logdir} (created again), and those written before stay in "
        "the old file, wherever it went (counted as event_files_vanished in run.json)"
    ]
    assert events.files_vanished == 1
    (second,) = events.files  # the lost file left the run's list, and its size with it
    assert second != first
    files, sizes = events.sizes()
    assert (files, sizes) == ((second,), (Path(second).stat().st_size,))
    assert scalars(logdir)["x"] == [(s, float(s)) for s in range(6, 16)]


def test_a_folder_deleted_after_a_write_error_names_the_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A write failed (the file abandoned, none open); the folder is deleted meanwhile:
    # the next write makes it again and says the folder went, not a file.
    logdir = tmp_path / "run"
    logdir.mkdir()
    events = EventFile(logdir, max_file_size=None, suffix="", failed=_failed)
    events.open()
    events.write(_records(range(1, 3)))
    events.abandon()
    caplog.set_level(logging.WARNING, logger="mindwatch")
    shutil.rmtree(logdir)
    events.write(_records(range(3, 5)))
    events.close()
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"mindwatch: the run folder {logdir} was deleted or moved")
    assert events.files_vanished == 1
    assert scalars(logdir)["x"] == [(3, 3.0), (4, 4.0)]
