"""How the metrics leave the process: an HTTP server Prometheus scrapes, and pushes to a
Pushgateway.

:class:`MetricsServer` is ``prometheus_client``'s own server (``start_http_server`` with
the run's registry) on its own threads: a scrape formats the last values under a short
lock and never touches the training thread. :class:`Pusher` pushes the registry every
``every_secs`` seconds from a thread of its own and once more at the end.

Neither ever raises into training: a port in use is one warning naming ``host:port``
and the config key to change, a failing push one warning (the next push tries again).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, Optional

from mindwatch.common.i18n import _
from mindwatch.common.redact import redact_text, redact_url
from mindwatch.common.waits import wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.exporter.families import PrometheusMetrics

__all__ = ["MetricsServer", "Pusher", "push_url", "shown_url", "split_credentials"]

log = logging.getLogger(__name__)


class MetricsServer:
    """``http://<host>:<port>/metrics`` for ``metrics``, started by :meth:`start`."""

    def __init__(self, metrics: PrometheusMetrics, *, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port  # the bound port once started (0 asks for any free one)
        self._server: Any = None
        self._thread: Optional[threading.Thread] = None
        self._tried = False
        self.served = False  # it listened (a port in use: never)
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> bool:
        """Start serving (once; later calls return whether it runs). A port that cannot
        be bound is one warning, and no server."""
        with self._lock:
            if self._tried:
                return self._server is not None
            self._tried = True
            from prometheus_client import start_http_server

            try:
                server, thread = start_http_server(self.port, self.host, self.metrics.registry)
            except (OSError, OverflowError, ValueError) as exc:  # in use; port + rank > 65535
                message = _(
                    "the Prometheus exporter cannot listen on {address} ({error}); training "
                    "goes on without it: choose a free port with prometheus.port (0 takes "
                    "any free one), or stop what uses that port"
                )
                log.warning(
                    "mindwatch: %s",
                    message.format(
                        address=f"{self.host}:{self.port}",
                        error=getattr(exc, "strerror", None) or exc,
                    ),
                )
                return False
            self._server, self._thread = server, thread
            self.port = int(server.server_address[1])
            self.served = True
            log.info("mindwatch: Prometheus metrics on %s", self.url)
            return True

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stop serving and free the port."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None:
            return
        server.shutdown()  # returns once serve_forever has (its poll: half a second)
        server.server_close()
        if thread is not None:
            thread.join(wait_seconds(timeout))


def _with_scheme(url: str) -> str:
    """``url`` with ``http://`` when it has no scheme (``prometheus_client`` adds it too:
    ``user:pw@host:9091`` must not read as the scheme ``user``)."""
    return url if "://" in url else f"http://{url}"


def split_credentials(url: str) -> tuple[str, Optional[str], Optional[str]]:
    """``url`` without its user and password, and them (URL-decoded), for basic auth:
    urllib would take ``user:pw@`` for part of the host name."""
    parts = urllib.parse.urlsplit(_with_scheme(url))
    if parts.username is None and parts.password is None:
        return _with_scheme(url), None, None
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = host + (f":{parts.port}" if parts.port else "")
    clean = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    return clean, user, password


def shown_url(url: str) -> str:
    """``url`` as messages show it: with its scheme, without its secrets
    (:func:`mindwatch.common.redact.redact_url`: user and password, query values)."""
    return redact_url(_with_scheme(url))


def push_url(url: Optional[str], url_env: Optional[str]) -> Optional[str]:
    """The Pushgateway address: ``$url_env`` when that variable is set, else ``url``."""
    if url_env:
        found = os.environ.get(url_env)
        if found:
            return found
    return url


class Pusher:
    """Push ``metrics`` to the Pushgateway at ``url`` under ``job`` and ``grouping``
    (e.g. ``{"run": "exp1"}``): every ``every_secs`` seconds once started, and at
    :meth:`close`. A failed push is a warning once and counted in :attr:`failed`."""

    def __init__(
        self,
        metrics: PrometheusMetrics,
        *,
        url: str,
        job: str,
        grouping: Mapping[str, str],
        every_secs: Optional[float],
        timeout: float,
    ) -> None:
        self.metrics = metrics
        self.url = url  # as given, for messages (shown_url); never printed whole
        self._address, self._user, self._password = split_credentials(url)
        self.job = job
        self.grouping = dict(grouping)
        self.every_secs = every_secs
        self.timeout = timeout
        self.pushed = 0
        self.failed = 0
        self._warn = WarnOnce(log)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one push at a time: the thread's and the last one
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Start the periodic pushes (once; none without ``every_secs``)."""
        if self._thread is not None or self.every_secs is None or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._run, name="mindwatch-push", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self.every_secs is not None
        while not self._stop.wait(wait_seconds(self.every_secs)):
            self.push()

    def push(self, timeout: Optional[float] = None) -> bool:
        """Push now (at most ``timeout`` seconds, default the configured one, for the
        push and for waiting on one still under way)."""
        limit = self.timeout if timeout is None else max(0.1, min(timeout, self.timeout))
        deadline = time.monotonic() + limit
        if not self._lock.acquire(timeout=wait_seconds(limit) or 0.0):
            self._failed(TimeoutError("the previous push is still under way"))
            return False
        try:
            self._push(max(0.1, deadline - time.monotonic()))
        except Exception as exc:  # URLError, HTTPError, a bad address: never raised
            self._failed(exc)
            return False
        finally:
            self._lock.release()
        self.pushed += 1
        return True

    def _push(self, timeout: float) -> None:
        from prometheus_client import push_to_gateway
        from prometheus_client.exposition import basic_auth_handler, default_handler

        user, password = self._user, self._password

        def handler(  # called with these names as keywords
            url: str, method: str, timeout: Optional[float], headers: Any, data: bytes
        ) -> Any:
            if user is None:
                return default_handler(url, method, timeout, headers, data)
            return basic_auth_handler(url, method, timeout, headers, data, user, password)

        push_to_gateway(
            self._address,
            job=self.job,
            registry=self.metrics.registry,
            grouping_key=self.grouping,
            timeout=timeout,
            handler=handler,
        )

    def _failed(self, exc: BaseException) -> None:
        self.failed += 1
        message = _(
            "pushing the Prometheus metrics to {url} failed ({error}); training goes "
            "on and the next push tries again (prometheus.push)"
        )
        # http.client quotes a host it cannot parse, password included
        known = (self.url, self._password, self._user)
        error = redact_text(str(exc) or type(exc).__name__, known)
        self._warn("push", "mindwatch: %s", message.format(url=shown_url(self.url), error=error))

    def close(self, timeout: Optional[float] = None) -> None:
        """Stop the periodic pushes and push the final values: all of it within
        ``timeout`` (default: the configured push timeout), a push under way included."""
        budget = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(wait_seconds(deadline - time.monotonic()))
        self.push(max(0.1, deadline - time.monotonic()))
