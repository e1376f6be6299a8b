"""``mindwatch watch``: the anomaly rules from a separate process, on the event files.

Every run below the folder (including runs that appear later, new files and rotated
ones) is read incrementally with :class:`~mindwatch.events.reader.RunReader`; each
event's scalars go through the same :class:`~mindwatch.alerts.RuleEngine` the training
process uses. The ``stall`` rule is the watcher's own: a run still marked ``running``
whose newest event is older than ``stall.seconds``. A run whose ``run.json`` says it
ended (finished, failed, terminated) is never stalled, and a run whose folder vanished
(deleted, moved, or left without event files) is forgotten, with an info line: it is
not stalled, it is gone.

The state (file offsets, rule state, cooldowns) is kept in a small JSON file, so
``--once`` from cron picks up where the previous call stopped and never reports an
event twice. It lives outside the watched folder (which may be read-only, shared, or
synced), in the user's state folder: ``$XDG_STATE_HOME/mindwatch/watch/`` (default
``~/.local/state/mindwatch/watch/``), one file per watched folder named after its
path (:func:`default_state_path`). A state file an older version left in the folder
(``.mindwatch-watch.json``) is read once and then left alone. A damaged state is an
error naming it (:mod:`mindwatch.tools.watch.state`).

A run folder that mixes runs (:mod:`mindwatch.events.mixing`: a second run written
into it without a resume marker, by an older version or another tool) is said so once,
as a warning; its rules then follow only the newest run (the state of the rules
restarts), so one run's values are never judged against the other's.

An observer (:class:`PollObserver`; ``watch --prometheus`` passes
:class:`~mindwatch.tools.watch.prometheus.WatchExporter`) sees every step's values as
they are read and, after each poll, the runs found and the alerts raised.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

from mindwatch.alerts.engine import RuleEngine
from mindwatch.alerts.model import Alert, likely_causes
from mindwatch.common.i18n import _, set_language
from mindwatch.common.invocation import command_line
from mindwatch.common.waits import wait_seconds
from mindwatch.config import AlertSettings
from mindwatch.events.mixing import mixed_runs
from mindwatch.events.reader import RunReader, Scalar, event_files, find_runs
from mindwatch.run.rank_file import RankIdentity, rank_identity
from mindwatch.run.ranks import RankPlace, rank_of_run
from mindwatch.run.record import read_run_info
from mindwatch.tools.completeness import ENDED, steps_gap
from mindwatch.tools.ranks import RankProgress, behind, stopped_message
from mindwatch.tools.watch.state import VERSION, SavedRun, load_state

__all__ = ["STATE_FILE", "PollObserver", "Watcher", "default_state_path", "watch"]

log = logging.getLogger(__name__)

STATE_FILE = ".mindwatch-watch.json"  # where versions before 0.2 kept it: in the folder


def default_state_path(logdir: Path) -> Path:
    """``$XDG_STATE_HOME/mindwatch/watch/<folder name>-<hash of its path>.json``."""
    folder = Path(os.path.abspath(logdir))
    home = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    digest = hashlib.sha256(str(folder).encode("utf-8")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-.") or "root"
    return Path(home) / "mindwatch" / "watch" / f"{name}-{digest}.json"


class PollObserver(Protocol):
    """What a :class:`Watcher` tells besides its alerts (runs are named as found:
    paths relative to the watched folder, ``"."`` for the folder itself)."""

    def step(self, run: str, step: int, values: dict[str, float], wall: float) -> None:
        """A step's values (``tag -> value``) read from ``run``; ``wall``: its newest
        wall time. A step split across two polls comes twice."""

    def polled(self, runs: list[tuple[str, Path]], alerts: list[Alert], now: float) -> None:
        """A poll ended: the runs below the folder now, and the alerts it raised."""


@dataclass
class _Run:
    name: str
    folder: Path
    reader: RunReader
    engine: RuleEngine
    last_wall: Optional[float] = None
    last_step: Optional[int] = None
    stalled: bool = False
    runs_seen: int = 0  # runs found mixed in the folder so far (1: not mixed)
    ended: bool = False  # its run.json said it ended, and its steps were checked


class Watcher:
    """Watch every run below ``logdir``; :meth:`poll` returns the new alerts. Notices that
    are not alerts (a folder found mixing runs) go to ``on_notice`` (default: a warning),
    facts worth a line (a run no longer there) to ``on_info`` (default: an info log)."""

    def __init__(
        self,
        logdir: Path,
        settings: Optional[AlertSettings] = None,
        *,
        state_path: Optional[Path] = None,
        on_notice: Optional[Callable[[str], None]] = None,
        on_info: Optional[Callable[[str], None]] = None,
        observer: Optional[PollObserver] = None,
    ) -> None:
        self.logdir = logdir
        self.observer = observer
        self.on_notice = on_notice or log.warning
        self.on_info = on_info or log.info
        self.settings = settings or AlertSettings()
        if self.settings.language is not None:
            set_language(self.settings.language)
        self.state_path = state_path
        self._runs: dict[str, _Run] = {}
        self._saved: dict[str, SavedRun] = {}
        if state_path is not None and state_path.exists():
            self._saved = load_state(state_path, self.settings)
        elif state_path is not None and (logdir / STATE_FILE).is_file():
            try:  # an older version's, in the folder: not ours to delete
                self._saved = load_state(logdir / STATE_FILE, self.settings)
            except ValueError as exc:
                log.warning("mindwatch watch: %s; it is ignored", exc)

    def _run(self, name: str, folder: Path) -> _Run:
        run = self._runs.get(name)
        if run is not None:
            return run
        engine = RuleEngine(
            self.settings,
            run=folder.name if name == "." else name,
            rank=rank_of_run(name) or 0,  # a run's own folder is rank 0's
            places=self._places(name, folder),
        )
        reader = RunReader(folder)
        run = _Run(name, folder, reader, engine)
        saved = self._saved.get(name)
        if saved is not None:
            reader.seek(saved.offsets, saved.plugins)
            engine.load_state_dict(saved.engine)
            run.last_wall = saved.last_wall
            run.last_step = saved.last_step
            run.stalled = saved.stalled
            run.runs_seen = saved.runs_seen
            run.ended = saved.ended
        self._runs[name] = run
        return run

    @staticmethod
    def _places(name: str, folder: Path) -> list[RankPlace]:
        """Where the run's ranks ran (its run.json's ``ranks``; a rank's own folder has
        none: the run's folder above says it), so alerts name the node and device."""
        if rank_of_run(name) is not None:
            folder = folder.parent
        return [entry.place() for entry in read_run_info(folder).ranks]

    def poll(self, now: Optional[float] = None) -> list[Alert]:
        """Read what is new in every run, apply the rules, check for stalls."""
        alerts: list[Alert] = []
        found = find_runs(self.logdir)
        self._forget_vanished({name for name, _ in found})
        for name, folder in found:
            run = self._run(name, folder)
            alerts += self._read(run)
        now = time.time() if now is None else now
        for run in self._runs.values():
            alerts += self._stall(run, now)
        if self.observer is not None:
            self.observer.polled(found, alerts, now)
        return alerts

    def _forget_vanished(self, names: set[str]) -> None:
        """Runs watched before (in this process, or in the saved state) that are no
        longer below the folder: said once, and dropped with their state."""
        for name in [n for n in dict.fromkeys([*self._runs, *self._saved]) if n not in names]:
            run = self._runs.pop(name, None)
            self._saved.pop(name, None)
            folder = run.folder if run is not None else self.logdir / name
            shown = run.engine.run if run is not None else name
            said = (
                _(
                    "mindwatch watch: {run}: its folder {folder} holds no event files any "
                    "more (deleted or moved); it is no longer watched"
                )
                if folder.is_dir()
                else _(
                    "mindwatch watch: {run}: its folder {folder} is gone (deleted or moved); "
                    "it is no longer watched"
                )
            )
            self.on_info(said.format(run=shown, folder=folder))

    def _mixing(self, run: _Run) -> None:
        """When files appeared: whether the folder now mixes runs; then say so, follow
        only the newest run, and skip the older runs' files not read yet."""
        names = event_files(run.folder)
        read = run.reader.offsets
        if len(names) < 2 or all(name in read for name in names):
            return
        mixed = mixed_runs(run.folder)
        count = len(mixed.runs) if mixed is not None else 1
        if mixed is not None and count > run.runs_seen:
            self.on_notice(
                _(
                    "mindwatch watch: {run}: {mixed}; the rules follow the newest run only. "
                    "To split the folder: {commands}"
                ).format(
                    run=run.engine.run,
                    mixed=mixed.describe(),
                    commands="; ".join(mixed.split_commands()),
                )
            )
            if run.runs_seen:
                run.engine = RuleEngine(
                    self.settings,
                    run=run.engine.run,
                    rank=run.engine.rank,
                    places=run.engine.places.values(),
                )
            newest = {f.name for f in mixed.runs[-1]}
            skip = [n for n in names if n not in newest and n not in read]
            with contextlib.suppress(OSError):
                run.reader.seek({n: (run.folder / n).stat().st_size for n in skip})
        run.runs_seen = max(run.runs_seen, count)

    def _read(self, run: _Run) -> list[Alert]:
        self._mixing(run)
        alerts: list[Alert] = []
        step: Optional[int] = None
        values: dict[str, float] = {}
        wall = 0.0
        for item in run.reader.read():
            if not isinstance(item, Scalar):
                continue
            if step is not None and item.step != step:
                alerts += self._observe(run, step, values, wall)
                values, wall = {}, 0.0
            step = item.step
            values[item.tag] = item.value
            wall = max(wall, item.wall_time)
            run.last_wall = max(run.last_wall or 0.0, item.wall_time)
            run.last_step = item.step
            run.stalled = False  # new data: a stall can be reported again later
        if step is not None:
            alerts += self._observe(run, step, values, wall)
        if not run.ended:
            self._ended(run)
        return alerts

    def _ended(self, run: _Run) -> None:
        """Once a run's run.json says it ended (so its files are complete): whether they
        hold the steps it says it logged; said once if not."""
        if rank_of_run(run.name) is not None:
            return  # run.json describes the run's own folder, not a rank's
        info = read_run_info(run.folder)
        if info.get("status") not in ENDED:
            return
        run.ended = True
        gap = steps_gap(info, run.last_step, None)
        if gap is not None:
            self.on_notice(
                _(
                    "mindwatch watch: {run}: {gap}; the rules saw what they hold "
                    "(`{command}` says why)"
                ).format(
                    run=run.engine.run,
                    gap=gap.describe(),
                    command=command_line("doctor", run.folder),
                )
            )

    def _observe(self, run: _Run, step: int, values: dict[str, float], wall: float) -> list[Alert]:
        if self.observer is not None:
            self.observer.step(run.name, step, values, wall)
        return run.engine.observe(step, values)

    def _stall(self, run: _Run, now: float) -> list[Alert]:
        settings = self.settings.stall
        if not settings.enabled or run.stalled or run.last_wall is None:
            return []
        idle = now - run.last_wall
        if idle <= settings.seconds or self._status(run) in ENDED:
            return []
        run.stalled = True
        minutes = idle / 60
        message = self._rank_stopped(run, now) or _(
            "no new step for {minutes:.1f} min (last: step {step})"
        ).format(minutes=minutes, step=run.last_step)
        return [
            run.engine.locate(
                Alert(
                    rule="stall",
                    severity="warning",
                    metric="step",
                    value=float(run.last_step) if run.last_step is not None else None,
                    step=run.last_step or 0,
                    message=message,
                    baseline=settings.seconds,
                    rank=run.engine.rank,
                    run=run.engine.run,
                    causes=likely_causes("stall"),
                )
            )
        ]

    def _rank_stopped(self, run: _Run, now: float) -> Optional[str]:
        """For a rank of a data-parallel run that stalled while the other ranks go on:
        which rank, where it ran and how far behind it is (mindwatch.tools.ranks)."""
        rank = rank_of_run(run.name)
        run_name = run.name.rsplit("/", 1)[0] if "/" in run.name else "."
        if rank is None:
            rank, run_name = 0, run.name
        group: dict[int, list[_Run]] = {}
        for other in self._runs.values():
            other_rank = rank_of_run(other.name)
            parent = other.name.rsplit("/", 1)[0] if "/" in other.name else "."
            if other_rank is not None and parent == run_name:
                group.setdefault(other_rank, []).append(other)
            elif other.name == run_name:
                group.setdefault(0, []).append(other)
        if len(group) < 2 or rank not in group:
            return None
        progress = []
        for number, runs in sorted(group.items()):
            walls = [r.last_wall for r in runs if r.last_wall is not None]
            steps = [r.last_step for r in runs if r.last_step is not None]
            own = next((r.folder for r in runs if rank_of_run(r.name) is not None), runs[0].folder)
            where = self.logdir if run_name == "." else self.logdir / run_name
            identity = rank_identity(own, number, where) if number == rank else RankIdentity()
            last_step = max(steps) if steps else None
            progress.append(RankProgress(number, identity, last_step, max(walls, default=None)))
        for late, others in behind(progress, min_lag=self.settings.stall.seconds):
            if late.rank == rank:
                return stopped_message(late, others, now)
        return None

    @staticmethod
    def _status(run: _Run) -> Optional[str]:
        # A rank's own folder (msrun) has no run.json: the run's folder above says it.
        folder = run.folder.parent if rank_of_run(run.name) is not None else run.folder
        return read_run_info(folder).status

    def save(self) -> None:
        """Write the state file (atomically: a crash keeps the previous one)."""
        if self.state_path is None:
            return
        runs = {name: saved.model_dump() for name, saved in self._saved.items()}
        for name, run in self._runs.items():
            runs[name] = {
                "offsets": run.reader.offsets,
                "plugins": run.reader.plugins,
                "engine": run.engine.state_dict(),
                "last_wall": run.last_wall,
                "last_step": run.last_step,
                "stalled": run.stalled,
                "runs_seen": run.runs_seen,
                "ended": run.ended,
            }
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"version": VERSION, "runs": runs}), "utf-8")
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
            time.sleep(wait_seconds(interval))
    except KeyboardInterrupt:
        pass
    if dispatcher is not None:
        dispatcher.close(timeout=30.0)
    return total
