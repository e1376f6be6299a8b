"""``mindwatch tensorboard``: serve a folder of runs with the TensorBoard installed
beside mindwatch, and the address of its first screen.

TensorBoard is started as ``<this python> -m tensorboard.main``, never whatever
``tensorboard`` is first on PATH (often none outside the venv, or another version). The
address opens TensorBoard's CUSTOM SCALARS dashboard when a run wrote mindwatch's layout
(:mod:`mindwatch.sinks.board_layout`: loss, eval, lr, grad norm and throughput first);
otherwise TensorBoard's default view.

Per-rank folders (``<run>/rank_<r>/``, written under msrun with ``per_rank``) are runs
to TensorBoard, which has no option to leave folders out. The address filters them out
of the run selectors with TensorBoard's own run filter (``runFilter`` for TIME SERIES and
SCALARS, ``regexInput`` for the other dashboards): the filter shows in the RUNS box,
where clearing it brings the ranks back; ``--ranks`` leaves it off.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Optional

from mindwatch.common.i18n import ngettext
from mindwatch.common.invocation import command_line
from mindwatch.events.contents import shows_something
from mindwatch.run.ranks import rank_of_run

__all__ = [
    "RANKS_HIDDEN",
    "Board",
    "BoardError",
    "Shown",
    "board_url",
    "check_logdir",
    "find_event_runs",
    "nothing_to_show",
    "open_in_browser",
    "run_count",
    "serve",
    "show",
]

# A run whose last path part is rank_<r>: the regex keeps every other run (JavaScript's
# RegExp, as TensorBoard's run filters use it).
RANKS_HIDDEN = "^(?!(.*/)?rank_[0-9]+$)"
_EVENT_MARK = "tfevents"  # how TensorBoard recognises an event file
_LAYOUT_WAIT_SECS = 15.0


class BoardError(RuntimeError):
    """TensorBoard could not be started, or LOGDIR holds nothing to show."""


def find_event_runs(logdir: Path) -> list[str]:
    """The runs TensorBoard will list below ``logdir``: folders (relative, ``/``-joined,
    ``.`` for ``logdir`` itself) holding a file whose name contains ``tfevents``."""
    runs = []
    for folder, _dirs, files in os.walk(logdir):
        if any(_EVENT_MARK in name for name in files):
            rel = os.path.relpath(folder, logdir)
            runs.append("." if rel == "." else rel.replace(os.sep, "/"))
    return sorted(runs)


def board_url(base: str, *, layout: bool, runs: list[str], ranks: bool) -> str:
    """The address to open: ``base`` (``http://host:port/``) on the first screen
    (``layout``), with the run filter that hides per-rank runs when ``runs`` has some
    and ``ranks`` is off."""
    hide = not ranks and any(rank_of_run(run) is not None for run in runs)
    # Percent-encoded only where needed, so the address stays readable ('+' is a space
    # in a query, '&' and '=' separate the fragment's keys).
    query = "?runFilter=" + urllib.parse.quote(RANKS_HIDDEN, safe="()!*/$") if hide else ""
    items = ["custom_scalars"] if layout else []
    if hide:
        items.append("regexInput=" + urllib.parse.quote(RANKS_HIDDEN, safe="()?!*/$+"))
    return base + query + ("#" + "&".join(items) if items else "")


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@dataclass
class Board:
    """A TensorBoard server this process started."""

    process: subprocess.Popen[bytes]
    base: str  # http://host:port/
    log: IO[bytes]  # its output, shown when it fails

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace").strip()

    def layout(self, timeout: float = _LAYOUT_WAIT_SECS) -> bool:
        """Whether a run wrote a custom-scalars layout (TensorBoard reads the runs in
        the background: waits up to ``timeout`` seconds for it to appear)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if _get_json(self.base + "data/plugin/custom_scalars/layout"):
                    return True
            except (OSError, ValueError):
                pass
            if time.monotonic() >= deadline or self.process.poll() is not None:
                return False
            time.sleep(0.5)

    def runs(self) -> list[str]:
        try:
            return [str(run) for run in _get_json(self.base + "data/runs")]
        except (OSError, ValueError):
            return []


def _start(logdir: Path, host: str, port: int, log: IO[bytes]) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(logdir),
        "--host",
        host,
        "--port",
        str(port),
    ]
    try:
        # Its own session: Ctrl-C in the terminal reaches mindwatch only, which then
        # stops TensorBoard (and does not mistake its exit for a failure).
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        raise BoardError(f"cannot start TensorBoard ({' '.join(command)}): {exc}") from exc


def _wait_until_serving(board: Board, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = board.process.poll()
        if status is not None:
            raise BoardError(
                f"TensorBoard exited with status {status} before serving:\n{board.output()}"
            )
        try:
            _get_json(board.base + "data/environment")
            return
        except (OSError, ValueError):
            pass
        if time.monotonic() >= deadline:
            raise BoardError(
                f"TensorBoard did not answer at {board.base} within {timeout:.0f} s:\n"
                f"{board.output()}"
            )
        time.sleep(0.25)


def check_logdir(logdir: Path) -> list[str]:
    """The runs below ``logdir``; :class:`BoardError` naming the fix when there are none."""
    if not logdir.exists():
        raise BoardError(
            f"'{logdir}' does not exist; pass the folder of your runs (the logdir of "
            f"your training, e.g. ./runs), or make one with `{command_line('demo')}`"
        )
    if not logdir.is_dir():
        raise BoardError(f"'{logdir}' is a file; pass the folder that holds the runs")
    runs = find_event_runs(logdir)
    if not runs:
        raise BoardError(
            f"no runs below '{logdir}' (no TensorBoard event files, *tfevents*); "
            f"`{command_line('doctor', logdir)}` says why"
        )
    return runs


def nothing_to_show(logdir: Path, runs: list[str]) -> str:
    """Why TensorBoard will show nothing for ``runs`` below ``logdir`` (every event file
    empty, only a header, or unreadable), or "" when some file holds data. Stops at the
    first file that does (one or two records read), so a large logdir costs little.

    TensorBoard is still started: a run that has just begun writes its first values
    within its flush interval, and TensorBoard picks them up when it reloads.
    """
    files = [
        Path(logdir, run, name)
        for run in runs
        for name in sorted(os.listdir(Path(logdir, run)))
        if _EVENT_MARK in name and Path(logdir, run, name).is_file()
    ]
    if not files or any(shows_something(path) for path in files):
        return ""
    empty = sum(1 for path in files if path.stat().st_size == 0)
    example = files[0].relative_to(logdir)
    if len(files) == 1:
        held = "is empty (0 bytes)" if empty else "holds only its header"
        what = f"its only event file, {example}, {held}"
    else:
        held = (
            "are all empty (0 bytes)"
            if empty == len(files)
            else ("are empty or hold only their header" if empty else "hold only their header")
        )
        what = f"its {len(files)} event files (e.g. {example}) {held}"
    return (
        f"nothing below '{logdir}' holds data TensorBoard can show: {what}.\n"
        "TensorBoard starts anyway, for a run about to write; "
        f"`{command_line('doctor', logdir)}` says why"
    )


@contextmanager
def serve(
    logdir: Path, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 120.0
) -> Iterator[Board]:
    """Start TensorBoard on ``logdir`` (``port`` 0: a free one), wait until it answers,
    and stop it on exit (SIGTERM, then SIGKILL after 10 s)."""
    chosen = port or _free_port(host)
    shown = socket.gethostname() if host in ("0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    with tempfile.TemporaryFile() as log:
        process = _start(logdir, host, chosen, log)
        board = Board(process, f"http://{shown}:{chosen}/", log)
        try:
            _wait_until_serving(board, timeout)
            yield board
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def run_count(runs: list[str], *, ranks: bool) -> str:
    """How many of ``runs`` the address lists: ``3 runs``, or with per-rank folders
    filtered out (``ranks`` off) how many and how to bring them back."""
    per_rank = [run for run in runs if rank_of_run(run) is not None]
    shown = len(runs) - (0 if ranks else len(per_rank))
    count = ngettext("{count} run", "{count} runs", shown).format(count=shown)
    if per_rank and not ranks:
        filtered = ngettext(
            "{runs}; {count} per-rank folder filtered out, --ranks shows it",
            "{runs}; {count} per-rank folders filtered out, --ranks shows them",
            len(per_rank),
        )
        count = filtered.format(runs=count, count=len(per_rank))
    return count


@dataclass
class Shown:
    """A TensorBoard serving the runs, and what to tell the user about it."""

    board: Board
    url: str  # the address to open: the first screen, per-rank runs filtered out
    count: str  # how many runs it lists (:func:`run_count`)

    def wait(self) -> Optional[int]:
        """Wait until TensorBoard exits: its exit status when it stopped by itself, None
        when Ctrl-C or SIGTERM stopped this process (leaving :func:`show`'s block then
        stops TensorBoard). Installs a SIGTERM handler, so ``kill`` stops as cleanly."""
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            return self.board.process.wait()
        except KeyboardInterrupt:
            return None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def show(
    logdir: Path, runs: list[str], *, host: str = "127.0.0.1", port: int = 0, ranks: bool
) -> Iterator[Shown]:
    """Serve ``logdir`` (whose runs :func:`check_logdir` found) and work out the address
    of its first screen; TensorBoard stops when the block ends."""
    with serve(logdir, host=host, port=port) as server:
        layout = server.layout()  # first: its wait gives TensorBoard time to read the runs
        listed = server.runs() or runs  # the runs TensorBoard itself lists, if it answers
        url = board_url(server.base, layout=layout, runs=listed, ranks=ranks)
        yield Shown(server, url, run_count(runs, ranks=ranks))


def open_in_browser(url: str) -> bool:
    """Open ``url`` in a web browser; False when there is none here."""
    import webbrowser  # only with --open

    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False
