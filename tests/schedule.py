"""How the suite is spread over pytest-xdist workers (a pytest plugin; tests/conftest.py
loads it). ``make test`` runs ``pytest -n 4 --dist loadgroup``.

Two things decide the run's length on a 2-core machine: that the work shared by several
tests is done once, and that the longest tests do not start last.

* **Shared work stays on one worker.** Under xdist each worker has its own session, so a
  module- or session-scoped fixture runs once per worker that runs one of its tests.
  Tests that use a module-scoped fixture of their own module (a demo run, a real
  training job several tests read) form one unit per module, so the job runs once; the
  MindFormers tests form one unit, so only one worker waits for their venv
  (tests/mindformers/conftest.py builds it once, under a file lock). Every other test is
  a unit of its own, free to go to any worker.
* **Longest first.** The units are queued by their expected length, longest first (the
  classic longest-processing-time rule: with a 120 s msrun job queued last, the run's
  tail is that job alone on one core). A unit's length is the sum of its tests'
  seconds in ``tests/durations.json`` (measured; refreshed with ``python -m
  tests.schedule JUNIT_XML``), and for a test not listed there a guess from its
  markers. Only the order depends on these numbers: a stale or missing entry makes the
  run a little longer, never wrong.

The units are xdist's scope scheduling with this plugin's scopes (``--dist load`` or
``loadgroup``, which ``-n`` alone implies as ``load``). Without xdist (a plain
``pytest``), nothing is reordered or grouped.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
# A test not in durations.json: the mean measured length of its kind (the baseline run
# of 1436 tests, docs/install.md): msrun jobs, other slow ones, MindSpore ones, the rest.
GUESS = {"distributed": 30.0, "slow": 9.0, "mindspore": 2.0}
DEFAULT = 0.2
LISTED_FROM = 2.0  # seconds: shorter tests are guessed well enough by their markers
MINDFORMERS_BUILD = 120.0  # building .venv-mindformers when it is not there yet


def _measured() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def expected_seconds(item: pytest.Item, measured: dict[str, float]) -> float:
    """How long ``item`` is expected to take: measured, or guessed from its markers."""
    nodeid = item.nodeid.split("@", 1)[0]  # without the group xdist appends
    if nodeid in measured:
        return measured[nodeid]
    for marker, seconds in GUESS.items():
        if item.get_closest_marker(marker) is not None:
            return seconds
    return DEFAULT


def group_of(item: pytest.Item) -> str | None:
    """The xdist group ``item`` must share a worker with, or None (any worker)."""
    path = item.nodeid.split("::", 1)[0]
    if path.startswith("tests/mindformers/"):
        return "mindformers"
    module = getattr(item, "module", None)
    info = getattr(item, "_fixtureinfo", None)
    if module is None or info is None:
        return None
    if "machine_to_itself" in info.names_closure:  # held for the module: one worker
        return path
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            func = getattr(fixturedef, "func", None)
            shared = fixturedef.scope in ("module", "package", "class")
            if shared and getattr(func, "__module__", None) == module.__name__:
                return path
    return None


def _units(items: list[pytest.Item]) -> dict[str, list[pytest.Item]]:
    units: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        units[group_of(item) or item.nodeid].append(item)
    return units


class _Worker:
    """On an xdist worker: queue the units longest first, and tell the controller's
    scheduler which tests share a unit (a file: xdist passes nothing else from a
    worker's collection to it but the node ids)."""

    def __init__(self, folder: Path, worker: str) -> None:
        self.path = folder / f"{worker}.json"

    @pytest.hookimpl(trylast=True)  # after the conftests that add the markers guessed on
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        measured = _measured()
        units = _units(items)

        def length(key: str) -> float:
            seconds = sum(expected_seconds(item, measured) for item in units[key])
            if key == "mindformers":
                from tests.mindformers.conftest import STAMP

                seconds += 0.0 if STAMP.exists() else MINDFORMERS_BUILD
            return seconds

        order = sorted(units, key=lambda key: (-length(key), key))  # the same on every worker
        # A unit that has the machine to itself goes after the last unit that trains a
        # model: started earlier, it would idle the other workers (their next tests
        # wait for it); there, the light tests left keep them busy meanwhile.
        alone = [key for key in order if "machine_to_itself" in units[key][0].fixturenames]
        heavy = [i for i, key in enumerate(order) if key not in alone and _heavy(units[key][0])]
        if alone and heavy:
            rest = [key for key in order if key not in alone]
            at = rest.index(order[heavy[-1]]) + 1
            order = rest[:at] + alone + rest[at:]
        items[:] = [item for key in order for item in units[key]]
        groups = {item.nodeid: key for key in order for item in units[key] if key != item.nodeid}
        self.path.write_text(json.dumps(groups))


class _Controller:
    """On the xdist controller: a folder for the workers' groups, handed to each worker,
    and the scheduler that reads them."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="mindwatch-xdist-"))

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[FOLDER_KEY] = str(self.folder)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getoption("dist") not in ("load", "loadgroup"):
            return None  # each, loadfile, worksteal...: as asked
        return _grouped_scheduling(config, log, self.folder)

    def pytest_unconfigure(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _grouped_scheduling(config: pytest.Config, log: Any, folder: Path) -> Any:
    """xdist's scope scheduling, a unit being a group of tests.py's (or one test), in
    the order the workers collected them (longest first).

    Not ``--dist loadgroup`` with ``xdist_group`` marks: with pytest 9.2 that mode
    groups nothing (it renames the tests' node ids, which pytest no longer lets a plugin
    do; pytest-xdist issue 1386), silently."""
    from xdist.scheduler.loadscope import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(config, log)
            self.groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every worker has collected (and written) by now
                found = sorted(folder.glob("*.json"))
                self.groups = json.loads(found[0].read_text()) if found else {}
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False  # keep the longest-first order
    return GroupScheduling()


FOLDER_KEY = "mindwatch_schedule"

# -- tests that measure speed have the suite's heavy jobs paused ----------------------
#
# ``mindwatch compare`` judges a run's throughput against the spread of five baseline
# runs. On four workers, a baseline recorded while another worker's msrun job compiled
# ran several times slower than the others, and the spread then hid a tenfold slowdown
# (seen: a 6.6 times slower run passed). Tests that measure speed take the machine
# for themselves (the ``machine_to_itself`` fixture, for their whole module); every test
# of tests/mindspore and tests/mindformers, and every test marked ``mindspore`` or
# ``distributed`` elsewhere (each trains a real model: the rules' scorecard trains two
# runs at once and one beside a spinning process; while it was not held off, a seed's
# demo run was once 6 times slower than its baselines), takes a shared hold, so none runs
# meanwhile: a reader-writer lock on two files of the schedule's folder (flock), the
# first a turnstile so that a waiting writer is not starved by readers arriving.
# Other tests go on. Without xdist there is nothing to do.

_exclusive_held = False


def _lock_files(config: pytest.Config) -> tuple[Path, Path] | None:
    workerinput = getattr(config, "workerinput", None)
    if not workerinput or FOLDER_KEY not in workerinput:
        return None
    folder = Path(workerinput[FOLDER_KEY])
    return folder / "turnstile.lock", folder / "machine.lock"


def _heavy(item: pytest.Item) -> bool:
    if item.nodeid.startswith(("tests/mindspore/", "tests/mindformers/")):
        return True
    return any(item.get_closest_marker(name) for name in ("mindspore", "distributed"))


@pytest.fixture(scope="module")
def machine_to_itself(request: pytest.FixtureRequest) -> Iterator[None]:
    """For the module's tests, no other worker runs a test that trains a model."""
    global _exclusive_held
    files = _lock_files(request.config)
    if files is None:
        yield
        return
    import fcntl

    with files[0].open("a") as turnstile, files[1].open("a") as machine:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # readers arriving from now on wait
        fcntl.flock(machine, fcntl.LOCK_EX)  # ... for the running ones to finish
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        _exclusive_held = True
        try:
            yield
        finally:
            _exclusive_held = False
            fcntl.flock(machine, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _machine_shared(request: pytest.FixtureRequest) -> Iterator[None]:
    files = _lock_files(request.config)
    if files is None or _exclusive_held or not _heavy(request.node):
        yield
        return
    import fcntl

    with files[0].open("a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # behind a writer that waits
        fcntl.flock(turnstile, fcntl.LOCK_UN)
    with files[1].open("a") as machine:
        fcntl.flock(machine, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(machine, fcntl.LOCK_UN)


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if FOLDER_KEY in workerinput:
            worker = _Worker(Path(workerinput[FOLDER_KEY]), workerinput["workerid"])
            config.pluginmanager.register(worker, "tests.schedule.worker")
    elif config.getoption("numprocesses", None):
        config.pluginmanager.register(_Controller(), "tests.schedule.controller")


def write_durations(junit_xml: Path) -> dict[str, float]:
    """Each test of at least LISTED_FROM seconds in a JUnit XML report (pytest's
    ``--junitxml``, whose times include setup and teardown), by node id."""
    found: dict[str, float] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        seconds = float(case.get("time", "0"))
        if seconds < LISTED_FROM:
            continue
        parts = str(case.get("classname")).split(".")
        cls = parts[-1][:1].isupper()  # a test class: tests.x.test_y.TestZ
        module = "/".join(parts[:-1] if cls else parts) + ".py"
        found["::".join([module, *(parts[-1:] if cls else []), str(case.get("name"))])] = round(
            seconds, 1
        )
    DURATIONS.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")
    return found


if __name__ == "__main__":
    listed = write_durations(Path(sys.argv[1]))
    print(f"{DURATIONS}: {len(listed)} tests of {LISTED_FROM:g} s or more")
