"""``mindwatch runs ROOT``: list the runs below a folder and prune them by a retention policy.

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

Pruning: ``keep=N`` marks all but the N newest runs; ``max_size`` marks the oldest runs
until the kept ones fit; both together mark the union. "Newest" is by ``run.json``'s
``start_time`` (the latest attempt's start, so a resumed run counts as recent), falling
back to the last update. Deleting refuses ROOT itself and any path that is a symlink or
resolves outside ROOT (a folder swapped for a link after listing); one failure does not
stop the others.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from mindwatch.run.info import process_alive as pid_alive
from mindwatch.run.layout import EVENT_FILE_PREFIX, RUN_FILE
from mindwatch.run.record import RunRecord, read_run_info

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "DEFAULT_ACTIVE_SECS",
    "STALE_SECS",
    "Run",
    "delete_run",
    "find_runs",
    "format_size",
    "parse_size",
    "plan",
    "runs_json",
    "runs_table",
    "summary_lines",
]

log = logging.getLogger(__name__)

#: A run recorded as ``running`` on another host is ``stale`` after this long without a
#: change to any of its files. Generous: a long evaluation or checkpoint writes nothing.
STALE_SECS = 600.0
#: Any file changed this recently makes a run active: never deleted (``--active-secs``).
DEFAULT_ACTIVE_SECS = 120.0

_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+) ?(?:([kmgt])(ib|b)?|b)?", re.IGNORECASE)
_STATUS_STYLE = {"running": "green", "crashed": "red", "stale": "yellow", "unknown": "dim"}


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


def parse_size(text: str) -> int:
    """Bytes in ``500M``, ``2G``, ``1.5GiB``, ``10MB`` or ``1048576``.

    Like GNU ``du``/``sort``: ``K``/``M``/``G``/``T`` and ``KiB``... are powers of 1024,
    ``KB``/``MB``... powers of 1000; case does not matter. Raises ``ValueError``.
    """
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a size")
    number, prefix, suffix = match.groups()
    unit = 1
    if prefix:
        power = "kmgt".index(prefix.lower()) + 1
        unit = 1000**power if (suffix or "").lower() == "b" else 1024**power
    return round(float(number) * unit)


def format_size(size: float) -> str:
    """``812 B``, ``1.5 KiB``, ``3.2 GiB``: binary units, the ones ``--max-size`` takes."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def format_age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86400:.0f} days ago"


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


def plan(runs: list[Run], *, keep: Optional[int] = None, max_size: Optional[int] = None) -> None:
    """Mark ``runs`` (oldest first) for deletion by the policy; active runs stay."""

    def mark(run: Run, policy: str) -> None:
        if run.delete:
            return
        if run.active:  # a recent change means "still running" unless it says it ended
            ended = run.status in ("finished", "terminated", "crashed")
            run.note = "kept: changed recently" if ended else "kept: still running"
        elif run.name == ".":
            run.note = "kept: it is ROOT"
        else:
            run.delete, run.note = True, f"delete ({policy})"

    if keep is not None:
        for run in runs[: max(len(runs) - keep, 0)]:
            mark(run, f"--keep {keep}")
    if max_size is not None:
        total = sum(run.size for run in runs if not run.delete)
        for run in runs:
            if total <= max_size:
                break
            mark(run, f"--max-size {format_size(max_size)}")
            if run.delete:
                total -= run.size
    if keep is not None or max_size is not None:
        for run in runs:
            run.note = run.note or "keep"


def delete_run(root: Path, run: Run) -> Optional[str]:
    """Delete one run folder; return why it was not deleted, or None when it was."""
    root = root.resolve()
    if run.path.is_symlink():
        return f"{run.path} is a symlink; refusing to follow it"
    target = run.path.resolve()
    if target == root or root not in target.parents:
        return f"{run.path} resolves to {target}, which is not inside ROOT {root}; refusing"
    try:
        shutil.rmtree(target)
    except OSError as exc:
        return f"{exc.filename or target}: {exc.strerror or exc}"
    log.info("mindwatch runs: deleted %s", target)
    return None


def _local(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def runs_table(runs: list[Run], *, now: float, with_action: bool) -> Table:
    """The listing as a rich table: colour on a terminal, aligned plain text in a pipe."""
    from rich.table import Table
    from rich.text import Text  # rich only when a table is drawn, not on every CLI call

    table = Table(box=None, pad_edge=False, header_style="bold")
    for header, justify in [("run", "left"), ("status", "left"), ("steps", "right")]:
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    table.add_column("last update")
    table.add_column("size", justify="right")
    if with_action:
        table.add_column("action")
    for run in runs:
        row = [
            Text(run.name),
            Text(run.status, style=_STATUS_STYLE.get(run.status, "")),
            Text("-" if run.steps is None else str(run.steps)),
            Text(f"{_local(run.last_update)} ({format_age(now - run.last_update)})"),
            Text(format_size(run.size)),
        ]
        if with_action:
            row.append(Text(run.note, style="red" if run.delete else ""))
        table.add_row(*row)
    return table


def runs_json(runs: list[Run], *, now: float) -> list[dict[str, Any]]:
    """The listing as plain data, for ``--json``."""
    return [
        {
            "name": run.name,
            "path": str(run.path),
            "status": run.status,
            "active": run.active,
            "steps": run.steps,
            "start_time": None if run.start_time is None else _iso(run.start_time),
            "last_update": _iso(run.last_update),
            "age_secs": round(max(now - run.last_update, 0.0), 1),
            "size_bytes": run.size,
            "delete": run.delete,
            "note": run.note,
        }
        for run in runs
    ]


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


def summary_lines(
    found: list[Run],
    marked: list[Run],
    failed: Mapping[str, str],
    *,
    deleted: bool,
    policy: bool,
    max_size: Optional[int],
) -> list[str]:
    """What ``mindwatch runs`` says below its table: totals, and what was (or would be)
    deleted under the policy."""
    lines = []
    active = sum(run.active for run in found)
    total = sum(run.size for run in found)
    lines.append(
        f"{len(found)} run{'s' if len(found) != 1 else ''}, {format_size(total)}"
        + (f"; {active} active (never deleted)" if active else "")
    )
    freed = sum(run.size for run in marked if run.name not in failed)
    if marked and not deleted:
        lines.append(
            f"Would delete {len(marked)} run(s), freeing {format_size(freed)}. "
            "Add --yes to delete them."
        )
    elif marked:
        lines += [
            f"deleted {run.name} ({format_size(run.size)})"
            for run in marked
            if run.name not in failed
        ]
        done = len(marked) - len(failed)
        lines.append(f"Deleted {done} run(s), freed {format_size(freed)}.")
    elif policy:
        lines.append("Nothing to delete.")
    kept = total - sum(run.size for run in marked)
    if max_size is not None and kept > max_size:
        lines.append(
            f"The kept runs total {format_size(kept)}, still over --max-size "
            f"{format_size(max_size)}: the rest is active and never deleted."
        )
    return lines
