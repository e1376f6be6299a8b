"""What survives when the training process is killed, or the disk fills up."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.tbread import accumulator, scalars

FLUSH_SECS = 0.5

# A "training loop" that logs a step, then reports the step and the time on stdout,
# so the parent knows exactly what had been logged (and when) before it kills it.
CHILD = textwrap.dedent(
    """
    import sys, time
    import mindwatch
    mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0, "flush_secs": FLUSH_SECS})
    step = 0
    while True:
        step += 1
        mon.log_step(step, loss=1.0 / step, lr=0.1)
        print(step, time.time(), flush=True)
        time.sleep(0.005)
    """
).replace("FLUSH_SECS", str(FLUSH_SECS))


def _run_until(logdir: Path, steps: int) -> tuple[subprocess.Popen[str], list[tuple[int, float]]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(logdir)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    logged = []
    for line in proc.stdout:
        step, wall = line.split()
        logged.append((int(step), float(wall)))
        if len(logged) >= steps:
            break
    return proc, logged


def test_sigkill_keeps_everything_logged_up_to_flush_secs_before(tmp_path: Path) -> None:
    proc, logged = _run_until(tmp_path, 300)
    killed_at = time.time()
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.stdout is not None
    proc.stdout.close()
    read = scalars(tmp_path)["train/loss"]  # loads: a torn last record is tolerated
    on_disk = {step for step, _ in read}
    # The writer promises "in the OS within flush_secs"; allow scheduling jitter on a
    # shared 2-core machine on top of that.
    must_have = [s for s, wall in logged if wall <= killed_at - FLUSH_SECS - 0.5]
    assert must_have, "the child logged too little before the kill"
    assert set(must_have) <= on_disk
    assert sorted(on_disk) == list(range(1, len(on_disk) + 1))  # no gaps, no duplicates
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "running"


def test_sigterm_loses_nothing(tmp_path: Path) -> None:
    proc, logged = _run_until(tmp_path, 200)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    for line in proc.stdout:  # steps logged between our read and the signal
        logged.append((int(line.split()[0]), float(line.split()[1])))
    assert proc.wait(30) == -signal.SIGTERM  # still dies by SIGTERM, as it would without us
    on_disk = [step for step, _ in scalars(tmp_path)["train/loss"]]
    printed = [step for step, _ in logged]
    # The signal may land between log_step and the print: one step more on disk is fine.
    assert on_disk in (printed, [*printed, printed[-1] + 1])
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "terminated"
    assert info["last_step"] == on_disk[-1]


def test_a_second_sigterm_does_not_cut_the_first_close_short(tmp_path: Path) -> None:
    child = textwrap.dedent(
        """
        import os, signal, sys, time
        import mindwatch
        from mindwatch.events import worker as w
        mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0, "flush_secs": 60})
        for step in range(1, 2001):
            mon.log_step(step, loss=float(step))
        real = w.EventWorker._commit
        def slow_commit(self, records, points):  # a slow disk, and a second SIGTERM
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            real(self, records, points)
        w.EventWorker._commit = slow_commit
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == list(range(1, 2001))
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "terminated"


def test_a_forked_child_does_not_touch_the_parents_run(tmp_path: Path) -> None:
    child = textwrap.dedent(
        """
        import multiprocessing as mp, os, signal, sys, time
        import mindwatch

        def worker():
            time.sleep(30)

        mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0})
        mon.log_step(1, loss=1.0)
        proc = mp.get_context("fork").Process(target=worker)
        proc.start()
        time.sleep(0.5)
        proc.terminate()  # SIGTERM to the forked child
        proc.join()
        mon.log_step(2, loss=2.0)
        import json
        print(json.load(open(os.path.join(sys.argv[1], "run.json")))["status"])
        mon.close()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "running"  # the child's SIGTERM left run.json alone
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == [1, 2]


def test_sigterm_chains_to_the_programs_own_handler(tmp_path: Path) -> None:
    child = textwrap.dedent(
        """
        import os, signal, sys
        signal.signal(signal.SIGTERM, lambda *a: (print("own handler", flush=True), sys.exit(3)))
        import mindwatch
        mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0, "flush_secs": 60})
        for step in range(1, 101):
            mon.log_step(step, loss=float(step))
        os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3
    assert "own handler" in result.stdout
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == list(range(1, 101))


def test_interpreter_exit_without_close_flushes(tmp_path: Path) -> None:
    child = textwrap.dedent(
        """
        import sys, mindwatch
        mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0, "flush_secs": 3600})
        for step in range(1, 1001):
            mon.log_step(step, loss=float(step))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)],
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert len(scalars(tmp_path)["train/loss"]) == 1000
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "finished"
    # The config TEXT too: its encoder's imports must not run during interpreter exit.
    assert "could not encode" not in result.stderr
    assert "mindwatch/config" in accumulator(tmp_path).Tags()["tensors"]


@pytest.mark.slow
def test_full_disk_leaves_training_running_with_one_warning(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes writes past 64 KiB fail with EFBIG, as a full disk fails with
    # ENOSPC. (SIGXFSZ is ignored so the write fails instead of killing the process.)
    child = textwrap.dedent(
        """
        import resource, signal, sys, time
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        import mindwatch
        mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0, "flush_secs": 0.05})
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
        for step in range(1, 4001):
            mon.log_step(step, loss=1.0 / step, lr=0.1, grad_norm=0.5, samples=32)
            if step % 200 == 0:
                time.sleep(0.06)  # let the writer hit the limit while we go on
        mon.close()
        print("training finished", mon.last_step, mon.stats.points_dropped > 0)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "training finished 4000 True" in result.stdout
    failures = [ln for ln in result.stderr.splitlines() if "writing events to" in ln]
    assert len(failures) == 1, result.stderr
    assert "File too large" in failures[0]
    assert "Training continues" in failures[0]
    # What was written before the disk filled up is intact and readable; the points of
    # the failed batches are missing (counted), nothing is duplicated or reordered.
    steps = [s for s, _ in scalars(tmp_path)["train/loss"]]
    assert steps[:100] == list(range(1, 101))
    assert steps == sorted(set(steps))
    assert len(steps) < 4000


def test_core_and_cli_do_not_import_mindspore() -> None:
    code = textwrap.dedent(
        """
        import sys
        import mindwatch, mindwatch.cli, mindwatch.monitor, mindwatch.events
        import mindwatch.mindspore  # the adapter package itself imports MindSpore lazily
        mindwatch.Monitor
        bad = sorted(m for m in sys.modules if m == "mindspore" or m.startswith("mindspore."))
        print(bad)
        sys.exit(1 if bad else 0)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
