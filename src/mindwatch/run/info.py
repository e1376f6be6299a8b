"""``run.json``: what a run folder holds, written so it is always complete on disk.

Written when the monitor starts (``status: running``) and rewritten at ``close()``
(``status: finished``, ``terminated`` after SIGTERM, or ``failed`` with the ``error``
when training raised), each time atomically
(temporary file + rename), so a crash never leaves half a file. A run whose
``status`` is still ``running`` while its ``pid`` is gone has crashed.

``previous_run`` / ``next_runs`` link runs that were asked to write the same folder
(:mod:`mindwatch.run.claim` moved the later ones next to it).

``attempts`` lists every process that wrote the folder, oldest first: a run resumed
from a checkpoint keeps the crashed attempt (marked ``crashed`` when its process is
gone) and adds its own, with the step it resumed at. Failing to write the file is a
warning, never an error: it must not take training down.

An existing ``run.json`` is read through its schema (:mod:`mindwatch.run.record`): a
damaged one is never rewritten with worse data. This run starts a fresh one, keeping
the attempts and links it could read, and the damaged file is kept next to it as
``run.json.damaged``; one warning says so.

Secrets never reach the file (:mod:`mindwatch.common.redact`): the command line is
redacted (a webhook URL or ``--token X`` in ``argv``), so are the config and the extra
fields (values under secret names, URLs' tokens), and every string once more when the
file is written.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import platform
import socket
import sys
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from mindwatch.common.redact import redact_argv, redact_strings, redact_value
from mindwatch.common.warn import WarnOnce
from mindwatch.run.layout import RUN_FILE
from mindwatch.run.record import RunFile, RunRecord, read_run_file

__all__ = ["PROCESS", "RunInfo", "package_versions", "process_alive"]

log = logging.getLogger(__name__)

# Tells this process's attempts from an earlier process that had the same pid (a
# restarted container often gets the same host name and pid).
PROCESS = uuid.uuid4().hex
_tmp_counter = itertools.count()
# run.json keys linking the runs written into one folder one after the other.
_LINKS = ("previous_run", "next_runs")
# Counters a folder reopened by the same process adds to (RunInfo._with_carried).
_ADDED_UP = (
    "points_dropped",
    "write_errors",
    "event_files_vanished",
    "steps_out_of_order",
    "alerts",
    "steps_logged",
)
_PACKAGES = ("mindwatch", "mindspore", "mindformers", "tensorboard", "numpy", "protobuf")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that matter, without importing any of them."""
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def process_alive(pid: Any) -> bool:
    """True if a process with this pid exists on this host."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: more than a pid_t holds
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _now() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


class RunInfo:
    """The contents of ``<logdir>/run.json`` and the code that keeps it on disk."""

    def __init__(
        self,
        logdir: Path,
        *,
        config: Mapping[str, Any],
        world_size: int = 1,
        rank: int = 0,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = logdir / RUN_FILE
        self.data: dict[str, Any] = {
            "format": 1,
            "status": "running",
            "start_time": _now(),
            "end_time": None,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "argv": redact_argv(sys.argv),
            "cwd": os.getcwd(),
            "logdir": str(logdir),
            "world_size": world_size,
            "rank": rank,
            "versions": package_versions(),
            "config": redact_value(dict(config)),
        }
        if extra:
            self.data.update(redact_value(dict(extra)))
        self._warn = WarnOnce(log)
        self.data["process"] = PROCESS
        on_disk = read_run_file(logdir, warn=False)
        record = on_disk.record
        links = {"previous_run": record.previous_run, "next_runs": list(record.next_runs)}
        for key in _LINKS:  # a resumed run keeps its links to the runs before and after it
            if links[key] and key not in self.data:
                self.data[key] = links[key]
        earlier = self._earlier_attempts(on_disk)
        if on_disk.problems:
            self._start_afresh(on_disk, kept=len(earlier))
        self._carried: RunRecord | None = None
        if earlier and earlier[-1].get("process") == PROCESS:
            # The same process opened this folder again (e.g. Model.eval after training,
            # a second Model.train): one attempt, not two, whose counts go on adding up.
            self.data["start_time"] = earlier.pop()["start_time"]
            self._carried = record
        self.data["attempts"] = [*earlier, self._attempt()]

    def _attempt(self) -> dict[str, Any]:
        keys = (
            "start_time",
            "end_time",
            "status",
            "host",
            "pid",
            "process",
            "last_step",
            "resumed_at",
        )
        return {key: self.data.get(key) for key in keys}

    @staticmethod
    def _earlier_attempts(on_disk: RunFile) -> list[dict[str, Any]]:
        """Attempts recorded by earlier processes writing this folder (resumes).

        An attempt still marked ``running`` whose process is gone is ``crashed``.
        """
        attempts = [a.model_dump() for a in on_disk.record.attempts]
        for attempt in attempts:
            if attempt.get("status") == "running":
                same_host = attempt.get("host") == socket.gethostname()
                pid = attempt.get("pid")
                reused = pid == os.getpid() and attempt.get("process") != PROCESS
                if same_host and (reused or not process_alive(pid)):
                    attempt["status"] = "crashed"
        return attempts

    def _start_afresh(self, on_disk: RunFile, *, kept: int) -> None:
        """A damaged ``run.json`` is kept aside (``run.json.damaged``), never rewritten
        with less than it held; one warning says what was wrong and what was kept."""
        aside = self.path.with_name(self.path.name + ".damaged")
        moved = "the damaged one is replaced"  # a FIFO, a device, a link: not data
        try:
            if self.path.is_dir() and not self.path.is_symlink():
                moved = "a folder is in its place, so it cannot be written"
            elif self.path.is_file() and not self.path.is_symlink():
                os.replace(self.path, aside)
                moved = f"the damaged one is kept as {aside.name}"
        except OSError as exc:
            moved = f"the damaged one could not be kept aside ({exc.strerror or exc})"
        links = [key for key in _LINKS if key in self.data]
        what = [f"{kept} earlier attempt(s)"] if kept else []
        what += ["the links to the other runs"] if links else []
        keeping = f", keeping {' and '.join(what)}" if what else ""
        log.warning(
            "mindwatch: %s: %s; this run writes a fresh one%s, and %s",
            self.path,
            "; ".join(on_disk.problems),
            keeping,
            moved,
        )

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.data["attempts"][-1] = self._attempt()

    def finish(self, status: str = "finished", **fields: Any) -> None:
        self.update(**self._with_carried(fields), status=status, end_time=_now())
        self.write()

    def _with_carried(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` (this monitor's totals) plus what the same process's earlier
        monitor of this folder recorded: counts added, event files listed once each."""
        before = self._carried
        if before is None:
            return fields
        fields = dict(fields)
        resumed = self.data.get("resumed_at") is not None
        for key in _ADDED_UP:
            if key == "steps_logged" and resumed:
                continue  # from a checkpoint: the steps beyond it are hidden, as on resume
            earlier, now = getattr(before, key), fields.get(key)
            if earlier and isinstance(now, int):
                fields[key] = earlier + now
        if "event_files" in fields:
            files = list(before.event_files)
            fields["event_files"] = files + [f for f in fields["event_files"] if f not in files]
        if "event_file_bytes" in fields:
            fields["event_file_bytes"] = {**before.event_file_bytes, **fields["event_file_bytes"]}
        if "nonfinite" in fields and before.nonfinite:
            nonfinite = dict(before.nonfinite)
            for tag, count in fields["nonfinite"].items():
                nonfinite[tag] = nonfinite.get(tag, 0) + count
            fields["nonfinite"] = nonfinite
        return fields

    def write(self) -> None:
        # A unique temporary name per write: a signal handler may write while the main
        # thread is half-way through its own write.
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{next(_tmp_counter)}.tmp")
        # A later run into the same folder may have recorded itself meanwhile
        # (mindwatch.run.claim.link_runs): keep it.
        later = read_run_file(self.path.parent, warn=False).record.next_runs
        if later:
            known = self.data.setdefault("next_runs", [])
            known.extend(run for run in later if run not in known)
        try:
            # The run folder deleted or moved mid-run: the event writer makes it again
            # and goes on there (mindwatch.events.writer), and so does run.json.
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # backslashreplace: a lone surrogate (argv bytes that are not UTF-8) is
            # written as the JSON escape it is, instead of failing the write
            with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as handle:
                data = redact_strings(self.data)
                json.dump(data, handle, indent=2, ensure_ascii=False, default=str)
                handle.write("\n")
            os.replace(tmp, self.path)
        except OSError as exc:
            self._warn(
                "write", "mindwatch: could not write %s: %s; training continues", self.path, exc
            )
            with contextlib.suppress(OSError):
                tmp.unlink()
