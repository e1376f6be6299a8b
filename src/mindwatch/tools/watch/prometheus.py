"""``mindwatch watch ROOT --prometheus HOST:PORT``: the runs below ROOT as Prometheus metrics.

The same families as the in-job exporter (:mod:`mindwatch.exporter.families`), fed by
the watcher's incremental reader, for jobs that cannot open a port and for runs written
by other tools (then only the tags mindwatch knows: ``train/loss``, ``train/lr``, ...).

Series and labels. A run is named by its folder relative to ROOT (``run="exp"``; ROOT
itself, when it holds event files, by its own folder name). A rank's own folder inside a
run (``exp/rank_1``, written under ``msrun``) becomes ``run="exp", rank="1"``; the run's
folder itself (the job's reduced values) has no ``rank`` label, as on a rank-0 exporter.
A rank's series, and those of a run of one process, also carry ``node`` and
``device_id`` (from its ``rank.json`` or ``run.json``:
:func:`mindwatch.run.rank_file.rank_identity`), as the in-job exporter labels them, so
dashboards join them with NPU-Exporter's series; a rank whose place is not known (yet)
has neither.

What each poll sets: the step's values and its wall time as they are read (so
``seconds_since_last_step`` is the age of the newest event), the evaluation metrics,
the watcher's alerts counted by rule and severity (``stall`` included), and the run's
status from its ``run.json``: ``running`` becomes ``crashed`` when the run was written
on this host and its process is gone. Runs without ``run.json`` (other tools) have no
status series. Runs that already had been read by an earlier ``watch`` (its state file)
are read once in full when first seen, so their last values are served at once.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

from mindwatch.alerts.model import Alert
from mindwatch.events.reader import RunReader, Scalar
from mindwatch.exporter import DEFAULT_PREFIX, RUN_STATUSES, PrometheusMetrics, RunSeries
from mindwatch.run.info import process_alive
from mindwatch.run.rank_file import rank_identity
from mindwatch.run.ranks import rank_of_run
from mindwatch.run.record import RunRecord, read_run_info

__all__ = ["WatchExporter", "parse_address", "run_status", "series_name"]

log = logging.getLogger(__name__)

_LOOPBACK = "127.0.0.1"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6, or ``PORT`` alone: loopback) as
    ``(host, port)``; ValueError says what is wrong."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host = _LOOPBACK
    host = host.strip("[]") or _LOOPBACK
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise ValueError(f"'{text}' is not HOST:PORT (a port from 1 to 65535), e.g. 127.0.0.1:9400")
    return host, port


def series_name(name: str, root_name: str) -> tuple[str, Optional[int]]:
    """``(run label, rank)`` of a run found below the watched folder (``"."``: the folder
    itself, labelled ``root_name``; ``exp/rank_1``: run ``exp``, rank 1)."""
    rank = rank_of_run(name)
    if rank is not None:
        name = name.rpartition("/")[0] or "."
    return (root_name if name == "." else name), rank


def run_status(info: RunRecord, host: str) -> Optional[str]:
    """The status a ``run.json`` (``info``) records, ``crashed`` for a ``running`` run of
    this host whose process is gone; None without one or with a status we do not know."""
    status = info.status
    if status == "running" and info.host == host and not process_alive(info.pid):
        return "crashed"
    return status if status in RUN_STATUSES else None


class WatchExporter:
    """A :class:`~mindwatch.tools.watch.PollObserver` that serves what the watcher reads.

    Args:
        root: the watched folder.
        prefix: metric names' prefix.
        labels: constant labels on every series (``{"team": "nlp"}``).
    """

    def __init__(
        self,
        root: Path,
        *,
        prefix: str = DEFAULT_PREFIX,
        labels: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.root_name = Path(os.path.abspath(root)).name or "root"
        self.metrics = PrometheusMetrics(prefix=prefix, labels=labels)
        self._series: dict[str, RunSeries] = {}  # by the watcher's run name
        self._stepped: set[str] = set()  # runs whose steps were seen as read
        self._placed: set[str] = set()  # runs whose node and device are labelled
        self._host = socket.gethostname()
        self._server: Any = None

    # ------------------------------------------------------------ PollObserver

    def step(self, run: str, step: int, values: dict[str, float], wall: float) -> None:
        self._stepped.add(run)
        _feed(self._of(run), step, values, wall)

    def polled(self, runs: list[tuple[str, Path]], alerts: list[Alert], now: float) -> None:
        names = {}
        for name, folder in runs:
            series = self._of(name)
            if name not in self._stepped:
                self._stepped.add(name)
                self._backfill(series, folder)
            names[folder.name if name == "." else name] = name  # as the rules name runs
            rank = rank_of_run(name)
            if name not in self._placed and rank is not None:
                self._place(name, series, folder, rank, folder.parent)
            if rank is None:
                info = read_run_info(folder)
                if name not in self._placed and info.world_size == 1:
                    self._place(name, series, folder, 0, None)
                status = run_status(info, self._host)
                if status is not None:
                    series.set_status(status)
                if info.world_size is not None:
                    series.set_world_size(info.world_size)
        for gone in set(self._series) - {name for name, _ in runs}:
            label, rank = series_name(gone, self.root_name)
            self.metrics.forget(label, rank=rank)
            del self._series[gone]
            self._stepped.discard(gone)
            self._placed.discard(gone)
        for alert in alerts:
            found = names.get(alert.run or "")
            if found is not None:
                self._of(found).count_alert(alert.rule, alert.severity)

    def _place(
        self, name: str, series: RunSeries, folder: Path, rank: int, run: Optional[Path]
    ) -> None:
        """Label one process's series with its node and device, once they are known."""
        identity = rank_identity(folder, rank, run)
        if identity.node is not None:
            series.set_place(identity.node, identity.device)
            self._placed.add(name)

    # ------------------------------------------------------------ serving

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port`` from prometheus_client's own thread;
        OSError when the address cannot be bound (a port in use)."""
        from prometheus_client import start_http_server

        self._server, _ = start_http_server(port, addr=host, registry=self.metrics.registry)

    def close(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    # ------------------------------------------------------------ inside

    def _of(self, name: str) -> RunSeries:
        series = self._series.get(name)
        if series is None:
            label, rank = series_name(name, self.root_name)
            series = self._series[name] = self.metrics.run(label, rank=rank)
        return series

    @staticmethod
    def _backfill(series: RunSeries, folder: Path) -> None:
        """The last value of each tag of a run the watcher had read before (its state
        file skips what it read), so a restarted watch serves it at once. The step and
        wall time are the last ones written, as a live read has them: a resumed run's
        step 60 comes after its first session's step 100."""
        last: dict[str, float] = {}
        step: Optional[int] = None
        wall = 0.0
        try:
            for item in RunReader(folder).read():
                if isinstance(item, Scalar):
                    last[item.tag] = item.value
                    step, wall = item.step, item.wall_time
        except OSError as exc:  # a folder removed while read: the next poll forgets it
            log.debug("mindwatch watch: cannot read %s: %s", folder, exc)
            return
        if step is not None:
            _feed(series, step, last, wall)


def _feed(series: RunSeries, step: int, values: Mapping[str, float], wall: float) -> None:
    train = [(tag, value) for tag, value in values.items() if not tag.startswith("eval/")]
    evals = [(tag, value) for tag, value in values.items() if tag.startswith("eval/")]
    if train:
        series.observe_step(step, train, wall)
    if evals:
        series.observe_eval(evals)
