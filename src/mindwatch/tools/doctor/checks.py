"""``mindwatch doctor``: why TensorBoard shows nothing (or too little), checked.

Each check returns a :class:`Finding` with a verdict and, when something is wrong, the
fix. Verdicts: ``ok``, ``info`` (worth knowing), ``warning`` and ``problem``; the command
exits 1 when there is a warning or a problem, as the seeds' troubleshooting tables
would have a person do by hand. What the event files themselves hold, against what
``run.json`` says they should, is checked in :mod:`mindwatch.tools.doctor.event_files`.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from importlib import metadata
from pathlib import Path
from typing import Optional

from mindwatch.events.mixing import mixed_runs
from mindwatch.events.reader import event_files, find_runs
from mindwatch.mssummary.format import is_summary_file
from mindwatch.run.info import process_alive
from mindwatch.run.ranks import rank_of_run
from mindwatch.run.record import RunFile, read_run_file, read_run_info
from mindwatch.tools.completeness import ENDED
from mindwatch.tools.doctor.event_files import event_file_findings
from mindwatch.tools.doctor.findings import Finding
from mindwatch.tools.doctor.ranks import rank_findings

__all__ = ["diagnose"]

STALE_SECS = 3600.0
LOW_DISK_BYTES = 1 << 30
_SEARCH_BUDGET = 5000  # folders visited when looking for a misplaced logdir
_NETWORK_FS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "fuse.sshfs",
    "ceph",
    "glusterfs",
    "lustre",
    "beegfs",
    "gpfs",
)


def diagnose(logdir: Optional[Path], config: Optional[Path] = None) -> list[Finding]:
    """Every check that applies to ``logdir`` and ``config``."""
    findings: list[Finding] = []
    findings.append(_tensorboard())
    if config is not None:
        findings.append(_config(config))
    if logdir is not None:
        findings += _folder(logdir)
    return findings


def _tensorboard() -> Finding:
    try:
        version = metadata.version("tensorboard")
    except metadata.PackageNotFoundError:
        return Finding(
            "tensorboard", "problem", "tensorboard is not installed", "pip install tensorboard"
        )
    major_minor = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if major_minor < (2, 10):
        return Finding(
            "tensorboard",
            "warning",
            f"tensorboard {version} is old (hparams and some plugins need 2.10+)",
            "pip install -U tensorboard",
        )
    return Finding("tensorboard", "ok", f"tensorboard {version} is installed")


def _config(path: Path) -> Finding:
    from mindwatch.config import ConfigError, MonitorConfig

    try:
        MonitorConfig.from_any(path)
    except (ConfigError, OSError, ValueError) as exc:
        return Finding("config", "problem", f"{path}: {exc}", "fix the keys named above")
    return Finding("config", "ok", f"{path} is a valid mindwatch configuration")


def _folder(logdir: Path) -> list[Finding]:
    if not logdir.exists():
        parent = logdir.parent
        hint = f"'{parent}' exists: check the folder name" if parent.exists() else ""
        return [
            Finding(
                "folder",
                "problem",
                f"'{logdir}' does not exist",
                hint or "pass the folder your training writes to (its logdir / summary_dir)",
            ),
            *_elsewhere(logdir),
        ]
    if logdir.is_file():
        return [
            Finding(
                "folder",
                "problem",
                f"'{logdir}' is a file; TensorBoard's --logdir takes a folder",
                f"tensorboard --logdir {logdir.parent}",
            )
        ]
    findings = [_path_text(logdir), _writable(logdir), _disk(logdir), _filesystem(logdir)]
    runs = find_runs(logdir)
    if not runs:
        findings += _no_event_files(logdir)
        return findings
    findings.append(
        Finding("event files", "ok", f"{len(runs)} run(s) with TensorBoard event files below it")
    )
    for name, folder in runs:
        findings += _run(name, folder)
    findings += rank_findings(runs)
    return findings


def _path_text(logdir: Path) -> Finding:
    text = str(logdir.resolve())
    if not text.isascii():
        return Finding(
            "path",
            "warning",
            f"the path has non-ASCII characters: {text}",
            "some TensorBoard setups and shells mangle them; prefer an ASCII path",
        )
    return Finding("path", "ok", "the path is plain ASCII")


def _writable(logdir: Path) -> Finding:
    if not os.access(logdir, os.W_OK | os.X_OK):
        return Finding(
            "permissions",
            "warning",
            f"this user cannot write to '{logdir}'",
            "training that runs as this user cannot log here: choose another folder or fix "
            "its permissions",
        )
    return Finding("permissions", "ok", "the folder is writable")


def _disk(logdir: Path) -> Finding:
    usage = shutil.disk_usage(logdir)
    if usage.free < LOW_DISK_BYTES or usage.free < 0.05 * usage.total:
        return Finding(
            "disk",
            "warning",
            f"only {usage.free / 2**30:.1f} GiB free on the disk of '{logdir}'",
            "free space, or prune old runs: mindwatch runs ROOT --keep N --yes",
        )
    return Finding("disk", "ok", f"{usage.free / 2**30:.0f} GiB free")


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) from /proc/mounts (Linux), longest first."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            mounts.append((parts[1].replace("\\040", " "), parts[2]))
    return sorted(mounts, key=lambda m: len(m[0]), reverse=True)


def _filesystem(logdir: Path) -> Finding:
    path = str(logdir.resolve())
    for mount, fstype in _mounts():
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            if fstype in _NETWORK_FS:
                return Finding(
                    "file system",
                    "info",
                    f"'{logdir}' is on a network file system ({fstype} at {mount})",
                    "files appear in TensorBoard only after a flush and the server's reload "
                    "(default 5 s): a short flush_secs helps; a local disk is faster",
                )
            return Finding("file system", "ok", f"a local file system ({fstype})")
    return Finding("file system", "ok", "file system type unknown (not Linux?)")


def _no_event_files(logdir: Path) -> list[Finding]:
    ms_files = [p for p in logdir.rglob("*_MS") if p.is_file() and is_summary_file(p.name)]
    if ms_files:
        return [
            Finding(
                "event files",
                "problem",
                f"{len(ms_files)} MindSpore summary file(s) (*_MS, e.g. {ms_files[0].name}) but "
                "no TensorBoard event files: stock TensorBoard shows MindSpore's "
                "SummaryCollector output as empty",
                f"mindwatch convert {ms_files[0].parent} {logdir / 'converted'} (scalars, "
                "histograms, images, the graph), or log with "
                "mindwatch.mindspore.TrainingMonitor, which writes TensorBoard's format",
            )
        ]
    logs = sorted(logdir.rglob("worker_*.log")) or sorted(logdir.glob("*.log"))
    if logs:
        return [
            Finding(
                "event files",
                "problem",
                f"no TensorBoard event files, but {len(logs)} training log(s) such as "
                f"{logs[0].name}",
                f"mindwatch convert {logs[0].parent} {logdir / 'converted'}",
            )
        ]
    parent = logdir.resolve().parent
    if event_files(parent):
        return [
            Finding(
                "event files",
                "problem",
                "no event files here, but the folder above holds some: LOGDIR is too deep",
                f"tensorboard --logdir {parent}",
            )
        ]
    return [
        *_elsewhere(logdir),
        Finding(
            "event files",
            "problem",
            f"no TensorBoard event files (*tfevents*) below '{logdir}'",
            "check the logdir / summary_dir your training uses (an absolute path: a relative "
            "one moves with os.chdir), and that the callback is passed to Model.train",
        ),
    ]


def _elsewhere(logdir: Path) -> list[Finding]:
    """Event files in a same-named folder nearby: the classic relative path + os.chdir.

    A writer given a relative logdir resolves it against the working directory when it
    creates its first file; a script that changes directory first (or a job launched
    from another folder) writes below that other folder. Searched: the current
    directory and the logdir's parent, a few levels deep, hidden folders skipped, with
    a bounded number of folders visited.
    """
    target = logdir.absolute()
    found: list[Path] = []
    roots = {Path.cwd(), target.parent} if target.parent.exists() else {Path.cwd()}
    for root in sorted(roots):
        found += _same_named(root, target.name, target)
    if not found:
        return []
    where = sorted(set(found))[0]
    return [
        Finding(
            "relative path",
            "problem",
            f"'{target}' has no event files, but a folder of the same name does: '{where}': "
            "the training probably used a relative logdir and changed its working "
            "directory (os.chdir, or was launched from another folder)",
            f"tensorboard --logdir {where}; in the script, make the logdir absolute "
            "(os.path.abspath before any os.chdir)",
        )
    ]


def _same_named(root: Path, name: str, exclude: Path, depth: int = 4) -> list[Path]:
    found: list[Path] = []
    budget = [_SEARCH_BUDGET]

    def walk(folder: Path, level: int) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if budget[0] <= 0 or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name.startswith("."):
                continue
            budget[0] -= 1
            path = Path(entry.path)
            if entry.name == name and path != exclude and find_runs(path):
                found.append(path)
            elif level < depth:
                walk(path, level + 1)

    walk(root, 1)
    return found


def _damaged(name: str, run_file: RunFile) -> list[Finding]:
    """A ``run.json`` that could not be read whole: what was ignored, and why."""
    if not run_file.problems:
        return []
    ignored = "the rest of it is used" if run_file.found else "it is ignored"
    return [
        Finding(
            f"run {name}",
            "warning",
            f"{run_file.path}: {'; '.join(run_file.problems)}; {ignored}",
            "the tools read what they can; the next run written into this folder (a "
            "resume) starts a fresh run.json and keeps this one as run.json.damaged",
        )
    ]


def _run(name: str, folder: Path) -> list[Finding]:
    run_file = read_run_file(folder, warn=False)  # its problems are a finding here
    findings: list[Finding] = _damaged(name, run_file)
    info = run_file.record
    newest = max((folder / f).stat().st_mtime for f in event_files(folder))
    age = time.time() - newest
    status = info.get("status")
    ended = status in ENDED
    if status == "running":
        same_host = info.get("host") == socket.gethostname()
        if same_host and not process_alive(info.get("pid")):
            ended = True
            findings.append(
                Finding(
                    f"run {name}",
                    "problem",
                    "its process is gone but the run was never closed (crashed or killed): "
                    "the last points up to flush_secs before the end may be missing",
                    "check the training log for the error; resume from the last checkpoint "
                    "into the same folder",
                )
            )
        elif age > STALE_SECS:
            findings.append(
                Finding(
                    f"run {name}",
                    "warning",
                    f"marked running, but nothing was written for {age / 3600:.1f} h",
                    "the job may hang (a collective waiting for a dead rank?): check it; "
                    "mindwatch watch reports stalls",
                )
            )
    if not ended and rank_of_run(name) is not None:  # a rank's folder: the run's status
        ended = read_run_info(folder.parent).get("status") in ENDED
    findings += event_file_findings(name, folder, info, ended=ended, now=time.time())
    mixed = mixed_runs(folder)
    if mixed is not None:
        findings.append(
            Finding(
                f"run {name}",
                "problem",
                f"{mixed.describe()}: TensorBoard draws them as one curve with several "
                "points per step, and report/compare numbers mix them",
                "move each later run into a folder of its own: "
                + "; ".join(mixed.split_commands()),
            )
        )
    hparams = info.hparams
    every = info.config.collect_freq
    if status in ENDED and info.steps_logged == 0:
        why = (
            f"collect_freq {every} skipped every step the run took"
            if every is not None and every > 1
            else "no training step reached the monitor"
        )
        findings.append(
            Finding(
                f"run {name}",
                "problem",
                f"the run ended without recording a step: {why}",
                "lower collect_freq (1 records every step), and check that the callback "
                "is in Model.train's callbacks",
            )
        )
    if hparams.get("mode") == "PYNATIVE":
        findings.append(
            Finding(
                f"run {name}",
                "info",
                "PyNative mode: steps are slower than in GRAPH mode; MindSpore's "
                "SummaryCollector would record nothing here, mindwatch does",
            )
        )
    if hparams.get("dataset_sink_mode") is True:
        findings.append(
            Finding(
                f"run {name}",
                "info",
                "dataset sink mode: on Ascend the callback runs once per sink, so one point "
                "per sink (its last step), with the sink's time shared among its steps",
            )
        )
    if not findings:
        findings.append(
            Finding(f"run {name}", "ok", f"{status or 'no run.json'}; last written {age:.0f} s ago")
        )
    return findings
