"""What a run folder holds, by name, and how new run folders are named.

::

    <logdir>/                                 one TensorBoard run (rank 0 writes it)
      events.out.tfevents.<time>.<host>.<pid>.<n>   EVENT_FILE_PREFIX
      run.json                                RUN_FILE (mindwatch.run.info)
      alerts.jsonl                            ALERTS_FILE (mindwatch.alerts)
      rank_<r>/                               rank r's own values (mindwatch.run.ranks)
        rank.json                             its node and device (mindwatch.run.rank_file)

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
from pathlib import Path
from typing import Callable, Optional, Union

__all__ = [
    "ALERTS_FILE",
    "EVENT_FILE_PREFIX",
    "RUN_FILE",
    "has_event_files",
    "make_run_dir",
    "new_run_dir",
    "run_dir_name",
]

EVENT_FILE_PREFIX = "events.out.tfevents."
RUN_FILE = "run.json"
ALERTS_FILE = "alerts.jsonl"

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
