"""``mindwatch watch``: the anomaly rules from a separate process, on the event files.

Every run below the folder (including runs that appear later, new files and rotated
ones) is read incrementally with :class:`~mindwatch.events.reader.RunReader`; each
event's scalars go through the same :class:`~mindwatch.rules.RuleEngine` the training
process uses. The ``stall`` rule is the watcher's own: a run still marked ``running``
whose newest event is older than ``stall.seconds``.

The state (file offsets, rule state, cooldowns) is kept in a small JSON file, so
``--once`` from cron picks up where the previous call stopped and never reports an
event twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from mindwatch.alerts.model import CAUSES, Alert
from mindwatch.config import AlertSettings
from mindwatch.events.reader import RunReader, Scalar, find_runs
from mindwatch.rules import RuleEngine
from mindwatch.run.info import read_run_info
from mindwatch.run.ranks import rank_of_run

__all__ = ["STATE_FILE", "Watcher", "watch"]

log = logging.getLogger(__name__)

STATE_FILE = ".mindwatch-watch.json"
_STATE_VERSION = 1
_DONE = ("finished", "failed", "terminated")


@dataclass
class _Run:
    folder: Path
    reader: RunReader
    engine: RuleEngine
    last_wall: Optional[float] = None
    last_step: Optional[int] = None
    stalled: bool = False


class Watcher:
    """Watch every run below ``logdir``; :meth:`poll` returns the new alerts."""

    def __init__(
        self,
        logdir: Path,
        settings: Optional[AlertSettings] = None,
        *,
        state_path: Optional[Path] = None,
    ) -> None:
        self.logdir = logdir
        self.settings = settings or AlertSettings()
        self.state_path = state_path
        self._runs: dict[str, _Run] = {}
        self._saved: dict[str, Any] = {}
        if state_path is not None and state_path.exists():
            self._saved = self._load(state_path)

    def _load(self, path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"cannot read the watch state '{path}': {exc}; delete it to start over "
                "(alerts already reported may then be reported again)"
            ) from exc
        if not isinstance(data, dict) or data.get("version") != _STATE_VERSION:
            raise ValueError(f"'{path}' is not a mindwatch watch state (version {_STATE_VERSION})")
        runs = data.get("runs", {})
        return runs if isinstance(runs, dict) else {}

    def _run(self, name: str, folder: Path) -> _Run:
        run = self._runs.get(name)
        if run is not None:
            return run
        engine = RuleEngine(
            self.settings,
            run=folder.name if name == "." else name,
            rank=rank_of_run(name) or 0,  # a run's own folder is rank 0's
        )
        reader = RunReader(folder)
        run = _Run(folder, reader, engine)
        saved = self._saved.get(name)
        if saved:
            reader.seek(saved.get("offsets", {}), saved.get("plugins"))
            engine.load_state_dict(saved.get("engine", {}))
            run.last_wall = saved.get("last_wall")
            run.last_step = saved.get("last_step")
            run.stalled = bool(saved.get("stalled", False))
        self._runs[name] = run
        return run

    def poll(self, now: Optional[float] = None) -> list[Alert]:
        """Read what is new in every run, apply the rules, check for stalls."""
        alerts: list[Alert] = []
        for name, folder in find_runs(self.logdir):
            run = self._run(name, folder)
            alerts += self._read(run)
        now = time.time() if now is None else now
        for run in self._runs.values():
            alerts += self._stall(run, now)
        return alerts

    def _read(self, run: _Run) -> list[Alert]:
        alerts: list[Alert] = []
        step: Optional[int] = None
        values: dict[str, float] = {}
        for item in run.reader.read():
            if not isinstance(item, Scalar):
                continue
            if step is not None and item.step != step:
                alerts += run.engine.observe(step, values)
                values = {}
            step = item.step
            values[item.tag] = item.value
            run.last_wall = max(run.last_wall or 0.0, item.wall_time)
            run.last_step = item.step
            run.stalled = False  # new data: a stall can be reported again later
        if step is not None:
            alerts += run.engine.observe(step, values)
        return alerts

    def _stall(self, run: _Run, now: float) -> list[Alert]:
        settings = self.settings.stall
        if not settings.enabled or run.stalled or run.last_wall is None:
            return []
        idle = now - run.last_wall
        if idle <= settings.seconds or self._status(run.folder) in _DONE:
            return []
        run.stalled = True
        minutes = idle / 60
        return [
            Alert(
                rule="stall",
                severity="warning",
                metric="step",
                value=float(run.last_step) if run.last_step is not None else None,
                step=run.last_step or 0,
                message=f"no new step for {minutes:.1f} min (last: step {run.last_step})",
                baseline=settings.seconds,
                rank=run.engine.rank,
                run=run.engine.run,
                causes=list(CAUSES["stall"]),
            )
        ]

    @staticmethod
    def _status(folder: Path) -> Optional[str]:
        status = read_run_info(folder).get("status")
        return str(status) if status else None

    def save(self) -> None:
        """Write the state file (atomically: a crash keeps the previous one)."""
        if self.state_path is None:
            return
        runs = dict(self._saved)
        for name, run in self._runs.items():
            runs[name] = {
                "offsets": run.reader.offsets,
                "plugins": run.reader.plugins,
                "engine": run.engine.state_dict(),
                "last_wall": run.last_wall,
                "last_step": run.last_step,
                "stalled": run.stalled,
            }
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"version": _STATE_VERSION, "runs": runs}), "utf-8")
            os.replace(tmp, self.state_path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise


def watch(
    watcher: Watcher,
    report: Callable[[Alert], None],
    *,
    once: bool = False,
    interval: float = 10.0,
) -> int:
    """Poll ``watcher`` (once, or every ``interval`` seconds until interrupted), hand each
    new alert to ``report`` and to the settings' notifiers; the number of alerts.

    With ``once``, notifications are delivered (a bounded wait) before the state file
    says the alerts were reported, so a cron job killed later reports them again at
    most: at-least-once. Saving the state raises OSError.
    """
    from mindwatch.alerts.notify import build_dispatcher

    dispatcher = build_dispatcher(watcher.settings)
    total = 0
    try:
        while True:
            alerts = watcher.poll()
            for alert in alerts:
                report(alert)
                if dispatcher is not None:
                    dispatcher.submit(alert)
            total += len(alerts)
            if once and dispatcher is not None:
                # Deliver before the state says "reported" (bounded wait; what cannot be
                # delivered in time is logged, and the caller has shown it).
                dispatcher.close(timeout=30.0)
                dispatcher = None
            watcher.save()
            if once:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    if dispatcher is not None:
        dispatcher.close(timeout=30.0)
    return total
