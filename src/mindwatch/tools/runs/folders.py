"""The runs below a folder, as ``mindwatch runs ROOT`` lists them: what counts as a run,
its status, and whether it is active.

A *run* is a folder below ROOT that holds ``run.json`` (written by mindwatch) and/or
TensorBoard event files (``events.out.tfevents.*``, from mindwatch or any other tool).
The search stops at a run: its subfolders (``rank_1/`` under ``msrun``) belong to it and
are not runs of their own. Symlinked folders are not followed, so nothing outside ROOT is
listed, sized or deleted.

Listing stays cheap on big folders because event files are never parsed (a long run has
gigabytes of them): the steps come from ``run.json``'s ``last_step``, which mindwatch
writes at ``close()``, so a run still going, or written by another tool, shows ``-``.

Status, from ``run.json`` and what can be checked from this machine:

* ``finished`` / ``terminated``: as recorded at close (``terminated``: after SIGTERM).
* ``running`` on this host: ``running`` while its pid is alive, else ``crashed`` (killed,
  out of memory, power loss: nothing was left to rewrite ``run.json``).
* ``running`` on another host: its pid can't be checked from here, so the files decide:
  ``running`` while something in the folder changed in the last :data:`STALE_SECS`,
  else ``stale`` (crashed or hung; from here the two look the same).
* no ``run.json`` (another tool), or one that can't be read: ``unknown``.

A run is *active*, and never deleted whatever the policy, when its status is ``running``
or any file in it changed in the last ``active_secs`` (:data:`DEFAULT_ACTIVE_SECS`). The
second rule covers what the first can't see: runs of other tools, and runs on other hosts
sharing the file system. A pid reused by an unrelated process makes a crashed run look
running; it is then kept, which is the safe mistake.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Optional

from mindwatch.run.info import process_alive as pid_alive
from mindwatch.run.layout import EVENT_FILE_PREFIX, RUN_FILE
from mindwatch.run.record import RunRecord, read_run_info

__all__ = ["DEFAULT_ACTIVE_SECS", "STALE_SECS", "Run", "find_runs"]

log = logging.getLogger(__name__)

#: A run recorded as ``running`` on another host is ``stale`` after this long without a
#: change to any of its files. Generous: a long evaluation or checkpoint writes nothing.
STALE_SECS = 600.0
#: Any file changed this recently makes a run active: never deleted (``--active-secs``).
DEFAULT_ACTIVE_SECS = 120.0


@dataclass
class Run:
    """One run folder, as found; ``delete`` and ``note`` are filled in by :func:`plan`."""

    path: Path
    name: str  # relative to ROOT, "/"-separated; "." when ROOT itself is a run
    status: str
    steps: Optional[int]
    start_time: Optional[float]
    last_update: float
    size: int
    active: bool
    delete: bool = False
    note: str = ""

    @property
    def sort_time(self) -> float:
        return self.start_time if self.start_time is not None else self.last_update


def _walk_error(exc: OSError) -> None:
    log.warning("mindwatch runs: skipping %s: %s", exc.filename, exc.strerror or exc)


def _scan(path: Path) -> tuple[int, float]:
    """Total bytes and newest mtime of the files below ``path`` (links not followed)."""
    size, newest = 0, 0.0
    for dirpath, _, filenames in os.walk(path, onerror=_walk_error):
        for name in filenames:
            try:
                stat = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue  # vanished while we looked: a writer's temporary file renamed
            size += stat.st_size
            newest = max(newest, stat.st_mtime)
    return size, newest or path.lstat().st_mtime


def _status(info: RunRecord, age: float, host: str) -> str:
    recorded = info.status
    if recorded in ("finished", "terminated", "failed"):
        return str(recorded)
    if recorded != "running":
        return "unknown"
    if info.host == host:
        return "running" if pid_alive(info.pid) else "crashed"
    return "running" if age < STALE_SECS else "stale"


def _start_time(info: RunRecord) -> Optional[float]:
    if info.start_time is None:
        return None
    try:
        return datetime.fromisoformat(info.start_time).timestamp()
    except (ValueError, OverflowError, OSError):  # not a time, or one no clock can show
        return None


def _load(root: Path, path: Path, now: float, host: str, active_secs: float) -> Run:
    info = read_run_info(path)
    size, last_update = _scan(path)
    age = now - last_update
    status = _status(info, age, host)
    return Run(
        path=path,
        name=path.relative_to(root).as_posix(),
        status=status,
        steps=info.last_step,
        start_time=_start_time(info),
        last_update=last_update,
        size=size,
        active=status == "running" or age < active_secs,
    )


def find_runs(
    root: Path, *, active_secs: float = DEFAULT_ACTIVE_SECS, now: Optional[float] = None
) -> list[Run]:
    """The runs below ``root`` (an existing folder), oldest first."""
    now = time.time() if now is None else now
    host = socket.gethostname()
    found = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_walk_error):
        if RUN_FILE in filenames or any(n.startswith(EVENT_FILE_PREFIX) for n in filenames):
            dirnames.clear()  # rank_1/ and the like belong to this run
            found.append(_load(root, Path(dirpath), now, host, active_secs))
    return sorted(found, key=lambda run: (run.sort_time, run.name))
