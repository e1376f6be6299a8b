"""Issue 20 ("also confusing"): ``mindwatch tensorboard`` on a folder whose event files
hold nothing to show says so, with the doctor hint, before it serves.

It still serves (a run that has just started writes its first values within its flush
interval, and TensorBoard reloads); a folder with no event files at all stays an error
(exit 2, tests/mindspore/test_tensorboard_command.py).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import mindwatch
from tests.hostile.promise import no_traceback

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))


def test_an_only_event_file_that_is_empty_is_said_before_serving(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)
    (path,) = (tmp_path / "run").glob("*tfevents*")
    path.write_bytes(b"")
    proc = subprocess.Popen(
        [MINDWATCH, "tensorboard", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        head = proc.stdout.readline()
        url = proc.stdout.readline().strip()
        assert "TensorBoard serves" in head, head
        with urllib.request.urlopen(url.split("?")[0].split("#")[0] + "data/runs", timeout=10):
            pass  # it serves
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    no_traceback(err)
    warning = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, err
    assert f"its only event file, run/{path.name}, is empty (0 bytes)" in warning[0]
    # the hint names mindwatch as it was started: by its path, unless PATH finds it
    hints = [f"`{shown} doctor {tmp_path}` says why" for shown in (MINDWATCH, "mindwatch")]
    assert any(hint in err for hint in hints), err


def test_header_only_files_are_said_and_one_file_with_data_is_enough(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    from mindwatch.tools.board import nothing_to_show

    for name in ("a", "b"):
        SummaryWriter(str(tmp_path / name)).close()  # opened, given nothing
    said = nothing_to_show(tmp_path, ["a", "b"])
    assert "its 2 event files (e.g. a/" in said
    assert "hold only their header" in said
    with mindwatch.Monitor(tmp_path / "c", {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)
    assert nothing_to_show(tmp_path, ["a", "b", "c"]) == ""
