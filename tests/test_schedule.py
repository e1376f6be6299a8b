"""The suite's spread over pytest-xdist workers (tests/schedule.py): tests that share a
module-scoped job run on one worker, so the job runs once; the longest start first.

Each case runs a real pytest with ``-n 2`` in a subprocess on a small test folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHARED = """
import json, os
from pathlib import Path
import pytest

LOG = Path(__file__).with_name("log.jsonl")

def record(what):
    with LOG.open("a") as out:
        out.write(json.dumps([what, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")

@pytest.fixture(scope="module")
def job():
    record("job")
    return 1

@pytest.mark.parametrize("i", range(4))
def test_reads_the_job(job, i):
    record(f"shared {i}")

@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    record(f"alone {i}")

@pytest.mark.distributed
def test_long():
    record("long")
"""


def run(tmp_path: Path, *options: str) -> list[tuple[str, str]]:
    (tmp_path / "test_shared.py").write_text(SHARED, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    distributed: msrun\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pytest", "-p", "tests.schedule", "-q", "-p"]
    command += ["no:cacheprovider", "--rootdir", str(tmp_path), *options, "test_shared.py"]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    return [tuple(json.loads(line)) for line in lines]  # type: ignore[misc]


def test_tests_sharing_a_module_job_run_on_one_worker_and_the_job_once(tmp_path: Path) -> None:
    log = run(tmp_path, "-n", "2")
    assert [what for what, _ in log].count("job") == 1
    workers = {worker for what, worker in log if what.startswith(("job", "shared"))}
    assert len(workers) == 1, log
    assert len({worker for _, worker in log}) == 2, log  # the other tests went elsewhere


def test_the_longest_test_starts_first(tmp_path: Path) -> None:
    log = run(tmp_path, "-n", "2")
    first = {}
    for what, worker in log:
        first.setdefault(worker, what)
    assert "long" in first.values(), log  # collected last, guessed 30 s: queued first


def test_plain_xdist_load_and_loadgroup_are_both_grouped(tmp_path: Path) -> None:
    log = run(tmp_path, "-n", "2", "--dist", "loadgroup")
    assert [what for what, _ in log].count("job") == 1


TRAINS = """
import json, os, time
from pathlib import Path
import pytest

LOG = Path(__file__).parents[2] / "spans.jsonl"  # the folder holds no package

def span(name, *, hold=0.5):
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process here
    time.sleep(hold)
    with LOG.open("a") as out:
        out.write(json.dumps([name, start, time.monotonic()]) + "\\n")
"""

MEASURES = (
    TRAINS
    + """

pytestmark = pytest.mark.usefixtures("machine_to_itself")

@pytest.mark.parametrize("i", range(3))
def test_measures(i):
    (LOG.parent / "measuring").touch()
    span(f"measures {i}")
"""
)

OTHERS = (
    TRAINS
    + """

@pytest.mark.parametrize("i", range(8))
def test_trains(i):
    span(f"trains {i}", hold=0.2)
"""
)


MARKED = (
    TRAINS
    + """

pytestmark = pytest.mark.mindspore

def test_trains_too():
    # Waits (up to 5 s) for the measuring module to begin: it may not while this test
    # runs, so the wait times out and the span follows it.
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and not (LOG.parent / "measuring").exists():
        time.sleep(0.05)
    span("trains elsewhere", hold=0.3)
"""
)


def test_a_test_that_measures_speed_never_overlaps_one_that_trains(tmp_path: Path) -> None:
    """Spans are compared, not timed: no test under tests/mindspore/, nor one marked
    ``mindspore`` in another folder, runs while the module that has the machine to
    itself runs its tests."""
    folder = tmp_path / "tests" / "mindspore"
    folder.mkdir(parents=True)
    (folder / "test_measures.py").write_text(MEASURES)
    (folder / "test_others.py").write_text(OTHERS)
    (tmp_path / "tests" / "rules").mkdir()
    (tmp_path / "tests" / "rules" / "test_marked.py").write_text(MARKED)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "pytest", "-p", "tests.schedule", "-q", "-p"]
    command += ["no:cacheprovider", "--rootdir", str(tmp_path), "-n", "3", "tests"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    spans = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()]
    measuring = [(a, b) for name, a, b in spans if name.startswith("measures")]
    training = [(a, b) for name, a, b in spans if name.startswith("trains")]
    assert len(measuring) == 3
    assert len(training) == 9
    first, last = min(a for a, _ in measuring), max(b for _, b in measuring)
    assert all(b <= first or a >= last for a, b in training), (measuring, training)
