"""One run per folder: what a new process does with a folder an earlier run wrote.

TensorBoard shows every event file of a folder as one run, so a second training
written into the same folder gives two points per step (a zig-zag curve) and one
``run.json`` overwritten by the other. mindwatch therefore decides, when a Monitor
opens a folder that already holds a run written by another process (``run.json``, or
event files from any writer):

* **resume**: the process declared that it continues that run (``Monitor(...,
  resume_step=N)`` or ``resume=True``; the MindSpore callback detects it when training
  starts after step 0, e.g. ``Model.train(initial_epoch=E)`` from a checkpoint). It
  writes into the same folder; the purge marker at the resume step hides what the
  earlier attempt logged from there on, and ``run.json`` lists both attempts;
* otherwise it is **a new run in a new folder next to it**: ``<folder>-2`` (``-3``...,
  the first name not taken). The choice is logged as a warning, the new ``run.json``
  records ``previous_run`` and the earlier one gets the new folder in ``next_runs``.

This holds within one process too (a notebook that trains twice into one folder makes
two runs); the callback reopening its own folder for ``Model.eval`` after
``Model.train`` declares ``resume=True``. An empty folder, or one holding only other
files (checkpoints, logs), is simply used.

Under ``msrun`` rank 0 decides and the other ranks follow its choice when the ranks
can agree (the callback's collective). Without one, a rank r > 0 cannot know what
rank 0 chose: if the folder holds an earlier run, it writes a folder of its own,
``<folder>-rank<r>``. A ``run.json`` still ``running`` is taken for its own job's,
rank 0's, not an earlier run; so are event files without a ``run.json`` that were all
written after this process started: rank 0 opens its event file a moment before it
writes ``run.json`` (seen under msrun: rank 1 looked in between and wrote
``plain-rank1``), and an earlier run's files are older than the job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from mindwatch.run.info import process_alive
from mindwatch.run.layout import EVENT_FILE_PREFIX, RUN_FILE, has_event_files
from mindwatch.run.record import Attempt, read_run_file

__all__ = ["Claim", "EarlierRun", "claim_run_dir", "earlier_run", "link_runs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EarlierRun:
    """What another process left in a folder."""

    status: str  # finished, failed, terminated, crashed, running, or "unknown" (no run.json)
    last_step: Optional[int] = None

    def describe(self) -> str:
        """``a finished run (last step 200)``."""
        if self.status == "unknown":
            return "event files of an earlier run"
        status = "a run still writing" if self.status == "running" else f"a {self.status} run"
        return status + (f" (last step {self.last_step})" if self.last_step is not None else "")


def _attempt_state(attempt: Attempt) -> str:
    """An attempt's status, ``crashed`` for one still ``running`` whose process is gone."""
    status = attempt.status or "unknown"
    here = attempt.host == socket.gethostname()
    if status == "running" and here and not process_alive(attempt.pid):
        return "crashed"
    return status


def earlier_run(folder: Path, *, rank: int = 0) -> Optional[EarlierRun]:
    """The run another process wrote into ``folder``, or None when there is none.

    ``rank`` > 0: a run still ``running`` is this job's own (rank 0 started it), not an
    earlier one.
    """
    on_disk = read_run_file(folder, warn=False)  # a damaged one: RunInfo says so
    info = on_disk.record
    if info.attempts:
        last = info.attempts[-1]
        status = _attempt_state(last)
        if status == "running" and rank > 0:
            return None
        step = last.last_step if "last_step" in last.model_fields_set else info.last_step
        return EarlierRun(status=status, last_step=step)
    if on_disk.found:  # a run.json without attempts (hand-written or damaged): still a run
        return EarlierRun(status=info.status or "unknown")
    if has_event_files(folder):
        if rank > 0 and _written_since_this_process_started(folder):
            return None  # rank 0 of this job has just opened them; its run.json follows
        return EarlierRun(status="unknown")
    return None


def _written_since_this_process_started(folder: Path) -> bool:
    """Whether every event file in ``folder`` was last written after this process
    started (False when that cannot be told)."""
    import psutil

    try:
        started = psutil.Process().create_time()
        names = [n for n in os.listdir(folder) if n.startswith(EVENT_FILE_PREFIX)]
        written = [os.stat(folder / name).st_mtime for name in names]
    except (psutil.Error, OSError):
        return False
    return bool(written) and min(written) >= started


@dataclass(frozen=True)
class Claim:
    """The folder a process writes, and why."""

    folder: Path
    previous: Optional[Path] = None  # the folder of the earlier run this one moved away from
    own_run_folder: bool = False  # a rank r > 0 that had to make a run folder of its own


def _next_free(folder: Path, suffix: str = "") -> Path:
    """Create and return ``<folder><suffix>-2`` (or ``-3``...), the first name not taken;
    ``<folder><suffix>`` itself when a suffix is given and it is free."""
    first = 1 if suffix else 2
    n = first
    while True:
        name = folder.name + suffix + (f"-{n}" if n > 1 else "")
        candidate = folder.with_name(name)
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            n += 1


def claim_run_dir(
    folder: Path,
    *,
    resume: bool,
    rank: int = 0,
    world_size: int = 1,
    agree: Optional[Callable[[str], Optional[str]]] = None,
) -> Claim:
    """The folder this process writes when asked to write ``folder`` (absolute).

    See the module's docs; ``agree`` is the job's start-up all-gather of rank 0's choice (the
    same call on every rank), returning None when the ranks cannot agree.
    """
    if world_size > 1 and agree is not None:
        # Every rank makes the same collective call, whatever it believes of resuming.
        chosen = ""
        earlier = earlier_run(folder) if rank == 0 and not resume else None
        if earlier is not None:
            chosen = str(_next_free(folder))
            _announce(folder, Path(chosen), earlier)
        agreed = agree(chosen if rank == 0 else "")
        if agreed is not None:
            return Claim(Path(agreed), folder) if agreed else Claim(folder)
        if rank == 0:
            return Claim(Path(chosen), folder) if chosen else Claim(folder)
        # The ranks could not agree: rank r > 0 decides for itself, as without agree.
    if resume:
        return Claim(folder)
    earlier = earlier_run(folder, rank=rank)
    if earlier is None:
        return Claim(folder)
    if rank > 0 and world_size > 1:
        own = _next_free(folder, f"-rank{rank}")
        log.warning(
            "mindwatch: rank %d: %s holds %s and this rank cannot learn rank 0's new folder; "
            "it writes its values to %s",
            rank,
            folder,
            earlier.describe(),
            own,
        )
        return Claim(own, folder, own_run_folder=True)
    chosen_path = _next_free(folder)
    _announce(folder, chosen_path, earlier)
    return Claim(chosen_path, folder)


def _announce(folder: Path, chosen: Path, earlier: EarlierRun) -> None:
    log.warning(
        "mindwatch: %s holds %s; this run writes to %s, so the two never mix. To "
        "continue that run instead, resume from its checkpoint or pass resume_step=N.",
        folder,
        earlier.describe(),
        chosen,
    )


def link_runs(previous: Path, new: Path) -> None:
    """Record ``new`` in ``next_runs`` of the earlier run's ``run.json`` (atomically; a
    folder without one, or one that cannot be written, is left alone)."""
    path = previous / RUN_FILE
    on_disk = read_run_file(previous, warn=False)
    if on_disk.raw is None:
        return
    later = list(on_disk.record.next_runs)
    if str(new) in later:
        return
    # The object as it was, with only the link added: what the schema does not know
    # (or refused) is not this function's to drop.
    data = {**on_disk.raw, "next_runs": [*later, str(new)]}
    tmp = path.with_name(f".{RUN_FILE}.{os.getpid()}.link.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False, default=str)
            handle.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("mindwatch: could not record the new run in %s: %s", path, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
