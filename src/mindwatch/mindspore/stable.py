"""Keeping the "last stable" checkpoint when an alert fires.

The newest checkpoint file MindSpore's ``ModelCheckpoint`` saved before the alert's
step is hard-linked (copied where links are impossible) as ``last_stable-<its name>``
in the same folder. ``ModelCheckpoint`` rotates only files named ``<prefix>-<digits and
underscores>.ckpt``, so the link survives ``keep_checkpoint_max`` and costs no space.

The rules judge steps on another thread, a little later; the file to keep must still be
there when their verdict arrives. ``ModelCheckpoint`` deletes files only when it saves,
so on a step where one of them will save (:meth:`StableKeeper.save_due`) the callback
waits for the verdicts on every step so far before ``ModelCheckpoint`` runs
(``build_callbacks`` puts the monitor first). A file saved at or after the alert's step
is never the one kept.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Optional

__all__ = ["StableKeeper"]

log = logging.getLogger(__name__)

_STEP = re.compile(r"-(\d+)_(\d+)\.ckpt$")
LINK_PREFIX = "last_stable-"


class StableKeeper:
    """Find ``ModelCheckpoint`` callbacks and keep their newest file on demand."""

    def __init__(self, callbacks: Any) -> None:
        from mindspore.train import ModelCheckpoint

        self.checkpointers = [c for c in (callbacks or []) if isinstance(c, ModelCheckpoint)]
        self.kept: Optional[Path] = None

    def save_due(self, cb: Any) -> bool:
        """Whether a ``ModelCheckpoint`` will save (and so may rotate files away) in this
        step's callbacks: its own test, on its own counters."""
        step = int(cb.get("cur_step_num") or 0)
        for checkpointer in self.checkpointers:
            config = getattr(checkpointer, "_config", None)
            steps = getattr(config, "save_checkpoint_steps", None)
            seconds = getattr(config, "save_checkpoint_seconds", None)
            if steps and steps > 0:
                due = step >= getattr(checkpointer, "_last_triggered_step", 0) + steps
            else:
                last = getattr(checkpointer, "_last_time", 0.0)
                due = bool(seconds and seconds > 0 and time.time() - last > seconds)
            if due:
                return True
        return False

    def newest(
        self, before: Optional[int] = None, steps_per_epoch: Optional[int] = None
    ) -> Optional[Path]:
        """The newest checkpoint file the ``ModelCheckpoint`` callbacks wrote; with
        ``before``, the newest of a step before it (rules may run a reduction interval
        after the step they judge, when later checkpoints already exist)."""
        found: list[Path] = []
        for checkpointer in self.checkpointers:
            directory = getattr(checkpointer, "_directory", None)
            prefix = getattr(checkpointer, "_prefix", None)
            if not directory or not prefix:
                continue
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                if name.startswith(f"{prefix}-") and name.endswith(".ckpt"):
                    middle = name[len(prefix) + 1 : -5]
                    if middle and not any(ch.isalpha() for ch in middle):
                        found.append(Path(directory) / name)
        if before is not None:
            found = [
                p
                for p in found
                if (step := self.step_of(p, steps_per_epoch)) is None or step < before
            ]
        if not found:
            return None
        return max(found, key=lambda p: p.stat().st_mtime_ns if p.exists() else 0)

    def keep(
        self, before: Optional[int] = None, steps_per_epoch: Optional[int] = None
    ) -> Optional[Path]:
        """Link the newest checkpoint (of a step before ``before``) as
        ``last_stable-<name>``; the previous link goes."""
        source = self.newest(before, steps_per_epoch)
        if source is None:
            return None
        target = source.with_name(LINK_PREFIX + source.name)
        if self.kept == target and target.exists():
            return target
        try:
            if target.exists():
                target.unlink()
            try:
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)
        except OSError as exc:
            log.warning("mindwatch: could not keep %s as last stable: %s", source, exc)
            return None
        if self.kept is not None and self.kept != target:
            with contextlib.suppress(OSError):
                self.kept.unlink()
        self.kept = target
        return target

    @staticmethod
    def step_of(path: Path, steps_per_epoch: Optional[int]) -> Optional[int]:
        """The global step in a ``<prefix>-<epoch>_<step>.ckpt`` name."""
        match = _STEP.search(path.name)
        if match is None:
            return None
        epoch, step = int(match.group(1)), int(match.group(2))
        return (epoch - 1) * steps_per_epoch + step if steps_per_epoch else step
