"""``mindwatch runs --keep / --max-size``: which runs a retention policy deletes, and
deleting them.

Pruning: ``keep=N`` marks all but the N newest runs; ``max_size`` marks the oldest runs
until the kept ones fit; both together mark the union. "Newest" is by ``run.json``'s
``start_time`` (the latest attempt's start, so a resumed run counts as recent), falling
back to the last update. Deleting refuses ROOT itself and any path that is a symlink or
resolves outside ROOT (a folder swapped for a link after listing); one failure does not
stop the others.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from mindwatch.tools.runs.folders import DEFAULT_ACTIVE_SECS, Run, find_runs

__all__ = ["Pruning", "delete_run", "format_size", "parse_size", "plan", "prune"]

log = logging.getLogger(__name__)

_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+) ?(?:([kmgt])(ib|b)?|b)?", re.IGNORECASE)


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


@dataclass
class Pruning:
    """What ``mindwatch runs`` found and did: every run below ROOT (oldest first), the
    ones the policy marked, and why a deletion failed, by run name."""

    found: list[Run]
    now: float  # when the runs were looked at: ages and "active" are relative to it
    keep: Optional[int] = None
    max_size: Optional[int] = None
    deleted: bool = False  # the marked runs were deleted (--yes), not only shown
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def policy(self) -> bool:
        """Whether a retention policy was given (the listing then has an action column)."""
        return self.keep is not None or self.max_size is not None

    @property
    def marked(self) -> list[Run]:
        return [run for run in self.found if run.delete]


def prune(
    root: Path,
    *,
    keep: Optional[int] = None,
    max_size: Optional[int] = None,
    active_secs: float = DEFAULT_ACTIVE_SECS,
    delete: bool = False,
    now: Optional[float] = None,
) -> Pruning:
    """The runs below ``root`` (an existing folder), marked by the policy (:func:`plan`)
    and, with ``delete``, the marked ones deleted; one failure does not stop the others."""
    now = time.time() if now is None else now
    found = find_runs(root.absolute(), active_secs=active_secs, now=now)
    plan(found, keep=keep, max_size=max_size)
    pruning = Pruning(found, now, keep=keep, max_size=max_size, deleted=delete)
    if delete:
        for run in pruning.marked:
            error = delete_run(root, run)
            if error:
                pruning.failed[run.name] = error
    return pruning
