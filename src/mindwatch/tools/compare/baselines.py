"""Named baselines, recorded where the job runs: ``mindwatch compare RUN --save-baseline
NAME`` copies the run into ``<baselines folder>/NAME/<run>/`` and ``--baseline NAME``
compares with every run stored there (several runs of the job: their spread is the
run-to-run noise, see docs/compare.md).

The folder is ``--baselines-dir``, else ``$MINDWATCH_BASELINES``, else ``./baselines``.
A stored run is what ``compare`` reads: the run's own event files and its ``run.json``
(versions, hardware, world size, config), not its ``rank_<r>/`` sub-runs, checkpoints or
forensics. A set keeps its newest ``keep`` runs (5 by default), by the time each was
saved; saving the same run again replaces its copy.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mindwatch.common.invocation import command_line
from mindwatch.run.layout import RUN_FILE
from mindwatch.tools.compare.checks import CompareError

__all__ = ["DEFAULT_KEEP", "SavedBaseline", "baselines_dir", "resolve", "save"]

ENV = "MINDWATCH_BASELINES"
DEFAULT_KEEP = 5
SAVED_FILE = ".saved"  # in each stored run: when it was saved (ordering for ``keep``)


def baselines_dir(option: Optional[Path]) -> Path:
    """Where named baselines live: the option, ``$MINDWATCH_BASELINES``, ``./baselines``."""
    if option is not None:
        return option
    return Path(os.environ.get(ENV) or "baselines")


def resolve(given: Path, folder: Path) -> Path:
    """``given`` as a path when it exists, else the named set ``folder/given``."""
    if given.exists() or len(given.parts) != 1:
        return given
    named = folder / given
    if named.is_dir():
        return named
    raise CompareError(
        f"'{given}' is neither a run folder nor a saved baseline in '{folder}'; "
        f"save one with `{command_line('compare', 'RUN', '--save-baseline', given)}`"
    )


@dataclass(frozen=True)
class SavedBaseline:
    """A save's outcome: where the run went, and the runs the set now holds."""

    name: str
    stored: Path
    runs: tuple[Path, ...]
    removed: tuple[Path, ...]


def _event_files(run: Path) -> list[Path]:
    return sorted(p for p in run.iterdir() if p.is_file() and "tfevents" in p.name)


def _saved_at(run: Path) -> float:
    try:
        return float((run / SAVED_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return run.stat().st_mtime


def save(run: Path, name: str, folder: Path, *, keep: int = DEFAULT_KEEP) -> SavedBaseline:
    """Copy ``run`` (a run folder) into the set ``name`` and trim the set to ``keep``."""
    if not name or name in (".", "..") or "/" in name or os.sep in name:
        raise CompareError(f"baseline name {name!r}: use a plain name such as 'nightly'")
    if keep < 1:
        raise CompareError(f"--keep {keep}: a baseline set keeps at least one run")
    files = _event_files(run)
    if not files:
        raise CompareError(f"'{run}' has no event files of its own to save as a baseline")
    target_set = folder / name
    target = target_set / run.resolve().name
    staging = target_set / f".{target.name}.saving"
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for file in [*files, run / RUN_FILE]:
            if file.is_file():
                shutil.copy2(file, staging / file.name)
        (staging / SAVED_FILE).write_text(f"{time.time():.6f}\n", encoding="utf-8")
        # Replace a previous copy of the same run only once the new one is complete.
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise CompareError(
            f"cannot save '{run}' as baseline '{name}' in '{folder}': {exc}"
        ) from exc
    members = sorted(
        (p for p in target_set.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=_saved_at,
    )
    removed = members[:-keep] if len(members) > keep else []
    for old in removed:
        shutil.rmtree(old, ignore_errors=True)
    kept = tuple(members[len(removed) :])
    return SavedBaseline(name, target, kept, tuple(removed))
