"""How far each rank of a data-parallel run got, and which rank stopped reporting.

A data-parallel run's ranks write their own folders (``<run>/rank_<r>/``: ``per_rank``
under reduction, or each rank's whole run without one); rank 0 also writes the run's
own folder. A rank whose folder stops getting points while the others' go on has died,
hangs, or lost its file system: the others either wait for it in the next collective
or, where nothing waits for it (no gradient all-reduce), train on without it. Either
way the tools say which rank it is, where it ran, and how far behind it is::

    rank 1 (node-a, device 1) last wrote step 120, 95 s ago; the other ranks are at step 400

A rank is *behind* when its newest point is more than ``min_lag`` seconds older than
the newest point of the others and its last step is below theirs. Ranks that all stop
together (a finished run, a hung job) are not: that is the run's own status.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mindwatch.common.i18n import _
from mindwatch.events.reader import RunReader, event_files
from mindwatch.run.rank_file import RankIdentity, rank_identity
from mindwatch.run.ranks import rank_of_run

__all__ = ["RankProgress", "behind", "rank_folders", "rank_progress", "stopped_message"]


@dataclass(frozen=True)
class RankProgress:
    """One rank's newest point: its step and wall time (None: no point yet)."""

    rank: int
    identity: RankIdentity
    last_step: Optional[int]
    last_wall: Optional[float]


def rank_folders(run_folder: Path) -> dict[int, list[Path]]:
    """Rank -> the folders of ``run_folder`` its process writes: each ``rank_<r>/``
    holding event files, and the run's own folder for rank 0. Empty when the run has
    no rank folders (one process, or ``per_rank`` off: nothing tells the ranks apart)."""
    found: dict[int, list[Path]] = {}
    try:
        children = sorted(p for p in run_folder.iterdir() if p.is_dir())
    except OSError:
        return {}
    for child in children:
        rank = rank_of_run(child.name)
        if rank is not None and event_files(child):
            found.setdefault(rank, []).append(child)
    if found and event_files(run_folder):
        found.setdefault(0, []).insert(0, run_folder)
    return dict(sorted(found.items()))


def _newest(folders: Sequence[Path]) -> tuple[Optional[int], Optional[float]]:
    """The newest point's step and wall time; for folders with event files but no point
    (a rank killed before its writer's first flush), no step and the time its newest
    event file was last written."""
    step: Optional[int] = None
    wall: Optional[float] = None
    for folder in folders:
        _tags, steps, walls, _values = RunReader(folder).scalar_columns()
        if len(steps):
            step = max(step if step is not None else int(steps.max()), int(steps.max()))
            wall = max(wall if wall is not None else float(walls.max()), float(walls.max()))
    if step is None:
        with contextlib.suppress(OSError, ValueError):
            wall = max((f / n).stat().st_mtime for f in folders for n in event_files(f))
    return step, wall


def rank_progress(run_folder: Path) -> list[RankProgress]:
    """Each rank's newest point, read from its folders' event files (all of them)."""
    progress = []
    for rank, folders in rank_folders(run_folder).items():
        own = next((f for f in folders if f != run_folder), folders[0])
        step, wall = _newest(folders)
        progress.append(RankProgress(rank, rank_identity(own, rank, run_folder), step, wall))
    return progress


def behind(
    progress: Sequence[RankProgress], *, min_lag: float
) -> list[tuple[RankProgress, list[RankProgress]]]:
    """The ranks that stopped reporting while the others went on, each with the ranks
    that went on (see the module)."""
    known = [p for p in progress if p.last_wall is not None]
    if len(known) < 2:
        return []
    newest = max(p.last_wall for p in known if p.last_wall is not None)
    late = [p for p in known if p.last_wall is not None and p.last_wall < newest - min_lag]
    going = [p for p in known if p not in late and p.last_step is not None]
    if not going:
        return []
    top = max(p.last_step for p in going if p.last_step is not None)
    return [(p, going) for p in late if p.last_step is None or p.last_step < top]


def stopped_message(rank: RankProgress, others: Sequence[RankProgress], now: float) -> str:
    """``rank 1 (node-a, device 1) last wrote step 120, 95 s ago; the other ranks are at
    step 400`` (in the current language)."""
    where = rank.identity.label()
    who = _("rank {rank} ({where})") if where else _("rank {rank} (node unknown)")
    who = who.format(rank=rank.rank, where=where)
    steps = sorted({p.last_step for p in others if p.last_step is not None})
    at = str(steps[-1]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
    ago = max(0.0, now - (rank.last_wall or now))
    if rank.last_step is None:  # killed before its first flush: a header, no point
        return _(
            "{rank} wrote no step (its event file was last written {seconds:.0f} s ago); "
            "the other ranks are at step {steps}"
        ).format(rank=who, seconds=ago, steps=at)
    return _(
        "{rank} last wrote step {step}, {seconds:.0f} s ago; the other ranks are at step {steps}"
    ).format(rank=who, step=rank.last_step, seconds=ago, steps=at)
