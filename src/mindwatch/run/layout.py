"""What a run folder holds, by name, and how new run folders are named.

:data:`RUN_FOLDER` lists every file and folder mindwatch writes into a run folder, with
the line that describes it: docs/usage.md's "What lands on disk" is generated from it
(``docs/gen_lists.py``), and ``tests/run/test_layout.py`` checks it against the folder
a real job writes (every path there matches one entry, every entry is written).

New run folders (``run_name``) are named ``<root>/<YYYYmmdd-HHMMSS>_<name>[_<key>-<value>
...]``: ASCII-safe (any other character becomes ``-``) so the name survives shells,
URLs and file systems that mangle non-ASCII names, and unique: a folder that already
exists gets a ``-2``, ``-3``... suffix instead of being reused.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

__all__ = [
    "ALERTS_FILE",
    "EVENT_FILE_PREFIX",
    "FORENSICS_DIR",
    "RANK_FILE",
    "RUN_FILE",
    "RUN_FOLDER",
    "SKIP_FILE",
    "RunFolderEntry",
    "has_event_files",
    "make_run_dir",
    "new_run_dir",
    "run_dir_name",
]

EVENT_FILE_PREFIX = "events.out.tfevents."
RUN_FILE = "run.json"  # mindwatch.run.info
ALERTS_FILE = "alerts.jsonl"  # mindwatch.alerts.sinks
SKIP_FILE = "skip.json"  # mindwatch.forensics.skiplist
FORENSICS_DIR = "forensics"  # mindwatch.pipeline.investigate
RANK_FILE = "rank.json"  # mindwatch.run.rank_file


@dataclass(frozen=True)
class RunFolderEntry:
    """A file or folder of a run folder.

    ``path``: as the docs write it, relative to the run folder (a folder ends in ``/``;
    ``<...>`` stands for a part that varies). ``pattern``: the regular expression the
    real relative path matches. ``what``: one line saying what it holds.
    """

    path: str
    pattern: str
    what: str

    def matches(self, relative: str) -> bool:
        return re.fullmatch(self.pattern, relative) is not None


_EVENTS = re.escape(EVENT_FILE_PREFIX) + r"[^/]+"
_RANK = r"rank_\d+/"

RUN_FOLDER: tuple[RunFolderEntry, ...] = (
    RunFolderEntry(
        f"{EVENT_FILE_PREFIX}<time>.<host>.<pid>.<n>",
        _EVENTS,
        "standard TensorBoard event files (under msrun rank 0 writes them: the values "
        "reduced across ranks)",
    ),
    RunFolderEntry(
        RUN_FILE,
        re.escape(RUN_FILE),
        "start/end time, host, pid, versions, rank, world size, config, hparams, status "
        "(running / finished / terminated / failed + error), last step, steps logged (and "
        "out of order), the event files and the bytes each held, non-finite and dropped "
        "counts, files that vanished mid-run, cross-rank reduction summary, alert and "
        "notification counts, last stable checkpoint, model FLOPs per step and the device "
        "peak (and sources)",
    ),
    RunFolderEntry(
        ALERTS_FILE, re.escape(ALERTS_FILE), "one JSON object per alert (docs/alerts.md)"
    ),
    RunFolderEntry(
        SKIP_FILE,
        re.escape(SKIP_FILE),
        "the samples of the batches alerts blamed, for a resumed run to skip (docs/forensics.md)",
    ),
    RunFolderEntry(
        f"{FORENSICS_DIR}/",
        re.escape(FORENSICS_DIR) + "/",
        "an analysed alert's forensics, one file each (docs/forensics.md)",
    ),
    RunFolderEntry(
        f"{FORENSICS_DIR}/step-<S>-<rule>.json",
        re.escape(FORENSICS_DIR) + r"/step-\d+-\w+(-\d+)?\.json",
        "the whole analysis of the alert of rule <rule> at step S",
    ),
    RunFolderEntry(
        "rank_<r>/", _RANK, "multi-card with per_rank: rank r's own values (a TensorBoard run)"
    ),
    RunFolderEntry(
        f"rank_<r>/{EVENT_FILE_PREFIX}*",
        _RANK + _EVENTS,
        "rank r's event files",
    ),
    RunFolderEntry(
        f"rank_<r>/{RANK_FILE}",
        _RANK + re.escape(RANK_FILE),
        "rank r's node and device (r > 0 under reduction; rank 0's are in run.json)",
    ),
)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-.") or "run"


def has_event_files(folder: Union[str, os.PathLike[str]]) -> bool:
    """Whether ``folder`` already holds TensorBoard event files (False if unreadable)."""
    try:
        return any(n.startswith(EVENT_FILE_PREFIX) for n in os.listdir(folder))
    except OSError:
        return False


def run_dir_name(
    name: str,
    hparams: Optional[Mapping[str, object]] = None,
    when: Optional[float] = None,
) -> str:
    """``20261129-211530_demo_lr-0.001`` for ``name='demo', hparams={'lr': 0.001}``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when))
    parts = [stamp, _safe(name)]
    parts += [_safe(f"{key}-{value}") for key, value in (hparams or {}).items()]
    return "_".join(parts)


def make_run_dir(
    root: Union[str, os.PathLike[str]],
    name: str,
    hparams: Optional[Mapping[str, object]] = None,
) -> Path:
    """Create and return a new, absolute, uniquely named run folder below ``root``."""
    base = Path(os.path.abspath(os.fspath(root))) / run_dir_name(name, hparams)
    candidate, n = base, 1
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            n += 1
            candidate = base.with_name(f"{base.name}-{n}")


def new_run_dir(
    root: Union[str, os.PathLike[str]],
    name: str,
    hparams: Optional[Mapping[str, object]] = None,
    *,
    rank: int = 0,
    world_size: int = 1,
    agree: Optional[Callable[[str], Optional[str]]] = None,
) -> tuple[Path, bool]:
    """The new run folder of a job, the same on every rank, and whether this rank had
    to make one of its own.

    Rank 0 creates it; with ``agree`` (the job's all-gather of rank 0's folder name),
    the other ranks learn its name from rank 0 (their clocks, and the ``-2`` suffix for
    a taken name, could differ). Without it, or when the ranks cannot agree (``agree``
    returns None), rank ``r`` cannot know it and creates ``<date>_<name>_rank<r>``.
    """
    if world_size == 1 or (rank == 0 and agree is None):
        return make_run_dir(root, name, hparams), False
    if agree is not None:
        made = str(make_run_dir(root, name, hparams)) if rank == 0 else ""
        agreed = agree(made)
        if agreed is not None:
            return Path(agreed), False
        if rank == 0:
            return Path(made), False
    return make_run_dir(root, f"{name}_rank{rank}", hparams), True
