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
from importlib import metadata
from pathlib import Path
from typing import Optional

from mindwatch.common.i18n import _, ngettext
from mindwatch.common.invocation import command_line, python_command
from mindwatch.events.reader import event_files, find_runs
from mindwatch.mssummary.format import is_summary_file
from mindwatch.tools.doctor.findings import Finding
from mindwatch.tools.doctor.ranks import rank_findings
from mindwatch.tools.doctor.runs import run_findings

__all__ = ["diagnose"]

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
    check = _("tensorboard")
    try:
        version = metadata.version("tensorboard")
    except metadata.PackageNotFoundError:
        return Finding(
            check,
            "problem",
            _("tensorboard is not installed"),
            f"{python_command()} -m pip install tensorboard",
        )
    major_minor = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if major_minor < (2, 10):
        return Finding(
            check,
            "warning",
            _("tensorboard {version} is old (hparams and some plugins need 2.10+)").format(
                version=version
            ),
            f"{python_command()} -m pip install -U tensorboard",
        )
    return Finding(check, "ok", _("tensorboard {version} is installed").format(version=version))


def _config(path: Path) -> Finding:
    from mindwatch.config import ConfigError, MonitorConfig

    try:
        MonitorConfig.from_any(path)
    except (ConfigError, OSError, ValueError) as exc:
        return Finding(_("config"), "problem", f"{path}: {exc}", _("fix the keys named above"))
    return Finding(
        _("config"), "ok", _("{path} is a valid mindwatch configuration").format(path=path)
    )


def _folder(logdir: Path) -> list[Finding]:
    if not logdir.exists():
        parent = logdir.parent
        if parent.exists():
            hint = _("'{parent}' exists: check the folder name").format(parent=parent)
        else:
            hint = _("pass the folder your training writes to (its logdir / summary_dir)")
        return [
            Finding(
                _("folder"),
                "problem",
                _("'{folder}' does not exist").format(folder=logdir),
                hint,
            ),
            *_elsewhere(logdir),
        ]
    if logdir.is_file():
        return [
            Finding(
                _("folder"),
                "problem",
                _("'{path}' is a file; TensorBoard's --logdir takes a folder").format(path=logdir),
                command_line("tensorboard", logdir.parent),
            )
        ]
    findings = [_path_text(logdir), _writable(logdir), _disk(logdir), _filesystem(logdir)]
    runs = find_runs(logdir)
    if not runs:
        findings += _no_event_files(logdir)
        return findings
    found = ngettext(
        "{count} run with TensorBoard event files below it",
        "{count} runs with TensorBoard event files below it",
        len(runs),
    )
    findings.append(Finding(_("event files"), "ok", found.format(count=len(runs))))
    for name, folder in runs:
        findings += run_findings(name, folder)
    findings += rank_findings(runs)
    return findings


def _path_text(logdir: Path) -> Finding:
    text = str(logdir.resolve())
    if not text.isascii():
        return Finding(
            _("path"),
            "warning",
            _("the path has non-ASCII characters: {path}").format(path=text),
            _("some TensorBoard setups and shells mangle them; prefer an ASCII path"),
        )
    return Finding(_("path"), "ok", _("the path is plain ASCII"))


def _writable(logdir: Path) -> Finding:
    if not os.access(logdir, os.W_OK | os.X_OK):
        return Finding(
            _("permissions"),
            "warning",
            _("this user cannot write to '{folder}'").format(folder=logdir),
            _(
                "training that runs as this user cannot log here: choose another folder or "
                "fix its permissions"
            ),
        )
    return Finding(_("permissions"), "ok", _("the folder is writable"))


def _disk(logdir: Path) -> Finding:
    usage = shutil.disk_usage(logdir)
    if usage.free < LOW_DISK_BYTES or usage.free < 0.05 * usage.total:
        return Finding(
            _("disk"),
            "warning",
            _("only {free:.1f} GiB free on the disk of '{folder}'").format(
                free=usage.free / 2**30, folder=logdir
            ),
            _(
                "free space, or prune old runs: `{command}` lists them, and with "
                "--keep N --yes deletes all but the N newest"
            ).format(command=command_line("runs", logdir)),
        )
    return Finding(_("disk"), "ok", _("{free:.0f} GiB free").format(free=usage.free / 2**30))


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
                    _("file system"),
                    "info",
                    _("'{folder}' is on a network file system ({type} at {mount})").format(
                        folder=logdir, type=fstype, mount=mount
                    ),
                    _(
                        "files appear in TensorBoard only after a flush and the server's "
                        "reload (default 5 s): a short flush_secs helps; a local disk is faster"
                    ),
                )
            return Finding(
                _("file system"), "ok", _("a local file system ({type})").format(type=fstype)
            )
    return Finding(_("file system"), "ok", _("file system type unknown (not Linux?)"))


def _no_event_files(logdir: Path) -> list[Finding]:
    ms_files = [p for p in logdir.rglob("*_MS") if p.is_file() and is_summary_file(p.name)]
    if ms_files:
        found = ngettext(
            "{count} MindSpore summary file (*_MS, {name}) but no TensorBoard event files: "
            "stock TensorBoard shows MindSpore's SummaryCollector output as empty",
            "{count} MindSpore summary files (*_MS, e.g. {name}) but no TensorBoard event "
            "files: stock TensorBoard shows MindSpore's SummaryCollector output as empty",
            len(ms_files),
        )
        return [
            Finding(
                _("event files"),
                "problem",
                found.format(count=len(ms_files), name=ms_files[0].name),
                _(
                    "{command} (scalars, histograms, images, the graph), or log with "
                    "mindwatch.mindspore.TrainingMonitor, which writes TensorBoard's format"
                ).format(command=command_line("convert", ms_files[0].parent, logdir / "converted")),
            )
        ]
    logs = sorted(logdir.rglob("worker_*.log")) or sorted(logdir.glob("*.log"))
    if logs:
        found = ngettext(
            "no TensorBoard event files, but {count} training log: {name}",
            "no TensorBoard event files, but {count} training logs such as {name}",
            len(logs),
        )
        return [
            Finding(
                _("event files"),
                "problem",
                found.format(count=len(logs), name=logs[0].name),
                command_line("convert", logs[0].parent, logdir / "converted"),
            )
        ]
    parent = logdir.resolve().parent
    if event_files(parent):
        return [
            Finding(
                _("event files"),
                "problem",
                _("no event files here, but the folder above holds some: LOGDIR is too deep"),
                command_line("tensorboard", parent),
            )
        ]
    return [
        *_elsewhere(logdir),
        Finding(
            _("event files"),
            "problem",
            _("no TensorBoard event files (*tfevents*) below '{folder}'").format(folder=logdir),
            _(
                "check the logdir / summary_dir your training uses (an absolute path: a "
                "relative one moves with os.chdir), and that the callback is passed to "
                "Model.train"
            ),
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
            _("relative path"),
            "problem",
            _(
                "'{folder}' has no event files, but a folder of the same name does: "
                "'{other}': the training probably used a relative logdir and changed its "
                "working directory (os.chdir, or was launched from another folder)"
            ).format(folder=target, other=where),
            _(
                "{command}; in the script, make the logdir absolute (os.path.abspath "
                "before any os.chdir)"
            ).format(command=command_line("tensorboard", where)),
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
