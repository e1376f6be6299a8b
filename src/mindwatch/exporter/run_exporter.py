"""``RunExporter``: one process's Prometheus exporter, as the config's ``prometheus``
section asks: the metrics of its run, the HTTP server, the Pushgateway pushes.

The pipeline's sinks (:mod:`mindwatch.sinks.prometheus`) feed its series and start it
with the first item they get, on the pipeline's thread; the server and the pushes then
run on threads of their own.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any, Optional

from mindwatch.common.i18n import _
from mindwatch.config.prometheus import PrometheusSettings
from mindwatch.config.urls import pushgateway_url_problem
from mindwatch.exporter.families import PrometheusMetrics, RunSeries
from mindwatch.exporter.serving import MetricsServer, Pusher, push_url
from mindwatch.run.ranks import env_device_id

__all__ = ["RunExporter"]

log = logging.getLogger(__name__)


class RunExporter:
    """The metrics of run ``run`` on rank ``rank`` of ``world_size``, served and pushed.

    Rank 0 serves on ``settings.port``; with ``per_rank``, rank r on ``port + r``. Pushes
    go under the grouping key ``{run}`` (rank 0) or ``{run, rank}`` (another rank).

    A rank's own series (and those of a run of one process) carry ``node``, this host's
    name, and ``device_id``, the logical device of ``DEVICE_ID`` (what msrun exports):
    the labels a query joins the node's NPU-Exporter series on.
    """

    def __init__(
        self, settings: PrometheusSettings, *, run: str, rank: int, world_size: int
    ) -> None:
        self.settings = settings
        self.run = run
        self.rank = rank
        self.world_size = world_size
        self.node = socket.gethostname()
        self.device_id = env_device_id()
        self.metrics = PrometheusMetrics(prefix=settings.prefix, labels=settings.labels)
        port = settings.rank_port(rank)
        self.server = (
            MetricsServer(self.metrics, host=settings.host, port=port) if port is not None else None
        )
        self.pusher: Optional[Pusher] = None
        push = settings.push
        if push is not None:
            url = push_url(settings.push_address(), push.url_env)
            # One from the variable is checked here, when it is read, and named by the
            # variable (never shown); the config's own url passed this check already.
            problem = None if url is None else pushgateway_url_problem(url)
            if url is None:
                message = _(
                    "prometheus.push: the variable {name} is not set and no url is given; "
                    "nothing is pushed"
                )
                log.warning("mindwatch: %s", message.format(name=push.url_env))
            elif problem is not None:
                message = _(
                    "prometheus.push: the address in the variable {name} {problem}; "
                    "nothing is pushed"
                )
                log.warning("mindwatch: %s", message.format(name=push.url_env, problem=problem))
            else:
                grouping = {"run": run} if rank == 0 else {"run": run, "rank": str(rank)}
                self.pusher = Pusher(
                    self.metrics,
                    url=url,
                    job=settings.push_job(),
                    grouping=grouping,
                    every_secs=push.every_secs,
                    timeout=push.timeout,
                )
        self._started = False
        self._closed = False

    def series(self, *, rank: Optional[int] = None, own: Optional[bool] = None) -> RunSeries:
        """The series of this run (``rank``: a rank's own values), marked running.
        ``own``: they are this process's own values, labelled with its node and device
        (default: a rank's, or those of a run of one process; never a job's reduced
        values)."""
        series = self.metrics.run(self.run, rank=rank)
        series.set_world_size(self.world_size)
        if own is None:
            own = rank is not None or self.world_size == 1
        if own:
            series.set_place(self.node, self.device_id)
        series.set_status("running")
        return series

    def start(self) -> None:
        """Start the server and the periodic pushes (once)."""
        if self._started or self._closed:
            return
        self._started = True
        if self.server is not None:
            self.server.start()
        if self.pusher is not None:
            self.pusher.start()

    def close(self, timeout: Optional[float] = None) -> None:
        """Wait for one more scrape of the final status (``linger_secs``, within
        ``timeout``), push the final values, then stop the server (once)."""
        if self._closed:
            return
        self._closed = True
        linger = self.settings.linger_secs
        if self.server is not None and self.server.running and linger > 0:
            self._linger(linger if timeout is None else min(linger, timeout))
        if self.pusher is not None:
            self.pusher.close(timeout)
        if self.server is not None:
            self.server.stop(timeout)

    def _linger(self, seconds: float) -> None:
        """Until the values are read once more (Prometheus' next scrape), at most
        ``seconds``: the run's status has been set to its end by now."""
        seen = self.metrics.collections
        deadline = time.monotonic() + seconds
        while self.metrics.collections == seen and time.monotonic() < deadline:
            time.sleep(0.05)

    def summary(self) -> dict[str, Any]:
        """What ``run.json`` says about the exporter."""
        out: dict[str, Any] = {}
        server = self.server
        if server is not None:
            out["url"] = server.url if server.served else None
        if self.pusher is not None:
            out["pushes"] = self.pusher.pushed
            out["push_failures"] = self.pusher.failed
        return out
