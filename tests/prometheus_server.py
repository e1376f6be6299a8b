"""A real Prometheus server (and Pushgateway) for tests, on loopback.

:class:`PrometheusServer` starts ``/usr/bin/prometheus`` (Debian package
``prometheus``) on a free loopback port with a generated scrape config (the targets
given, scraped every second, ``honor_labels`` so a job's own ``job`` label stays),
storage in a temporary folder; it waits until ``/-/ready`` answers, runs PromQL through
the HTTP API (``/api/v1/query``) and stops the server with SIGTERM.
:class:`Pushgateway` does the same for ``prometheus-pushgateway``.

The fixtures ``prometheus_bin`` and ``pushgateway_bin`` (tests/conftest.py) skip a test
with the package to install when a binary is missing.

Prometheus marks a target's series stale as soon as a scrape fails, so a query about a
job that has ended must ask for a time when it was still up (``query(..., at=t)``).
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Optional

from tests.ports import free_port

__all__ = ["PrometheusServer", "Pushgateway", "Series", "free_port", "http_get"]

Series = list[tuple[dict[str, str], float]]  # (labels, value) per series

READY_TIMEOUT = 60.0


def http_get(url: str, timeout: float = 5.0, auth: Optional[tuple[str, str]] = None) -> str:
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return str(response.read().decode("utf-8"))


def _wait_ready(
    url: str,
    process: subprocess.Popen[bytes],
    log: Path,
    what: str,
    auth: Optional[tuple[str, str]] = None,
) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode}): {log.read_text()[-3000:]}")
        try:
            http_get(url, timeout=1.0, auth=auth)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {READY_TIMEOUT} s: {log.read_text()[-3000:]}")


class _Program:
    """A server process on a loopback port, stopped with SIGTERM (then SIGKILL)."""

    name = "program"

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.workdir / f"{self.name}.log"
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.auth: Optional[tuple[str, str]] = None  # basic auth its HTTP API asks for

    def _args(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> _Program:
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [self.binary, *self._args()],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
            )
        _wait_ready(f"{self.url}/-/ready", self.process, self.log, self.name, self.auth)
        return self

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()


class PrometheusServer(_Program):
    """``prometheus`` scraping ``targets`` (``host:port`` each) every second."""

    name = "prometheus"

    def __init__(self, binary: str, workdir: Path, targets: Sequence[str]) -> None:
        super().__init__(binary, workdir)
        self.targets = list(targets)
        self.config = self.workdir / "prometheus.yml"
        self.config.write_text(self.scrape_config(self.targets), encoding="utf-8")

    @staticmethod
    def scrape_config(targets: Sequence[str]) -> str:
        # JSON is YAML: no YAML writer needed.
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "mindwatch",
                    "honor_labels": True,
                    "scrape_interval": "1s",
                    "scrape_timeout": "1s",
                    "static_configs": [{"targets": list(targets)}],
                }
            ],
        }
        return json.dumps(config, indent=2)

    def _args(self) -> list[str]:
        storage = self.workdir / "data"
        storage.mkdir(exist_ok=True)
        return [
            f"--config.file={self.config}",
            f"--storage.tsdb.path={storage}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ]

    def api(self, path: str, **params: Any) -> Any:
        """``/api/v1/<path>``'s ``data`` (an error answer raises)."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        body = json.loads(http_get(f"{self.url}/api/v1/{path}?{query}"))
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus answered {body}")
        return body["data"]

    def query(self, promql: str, *, at: Optional[float] = None) -> Series:
        """An instant query: ``(labels, value)`` per series (``at``: a Unix time)."""
        data = self.api("query", query=promql, time=at)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(item["metric"], float(item["value"][1])) for item in data["result"]]

    def value(self, promql: str, *, at: Optional[float] = None) -> Optional[float]:
        """The one series' value (None when the query returns nothing)."""
        result = self.query(promql, at=at)
        if not result:
            return None
        assert len(result) == 1, result
        return result[0][1]

    def wait_for(
        self,
        promql: str,
        check: Callable[[Series], bool] = bool,
        timeout: float = 60.0,
    ) -> Series:
        """Poll ``promql`` until ``check(result)`` (default: non-empty); the result."""
        deadline = time.monotonic() + timeout
        result: Series = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if check(result):
                return result
            time.sleep(0.25)
        targets = self.api("targets")
        raise AssertionError(
            f"{promql!r} never passed its check in {timeout} s; last result {result}; "
            f"targets {json.dumps(targets)[:2000]}"
        )

    def scraped_up(self, target: str) -> bool:
        """Whether the last scrape of ``target`` succeeded."""
        return self.value(f'up{{instance="{target}"}}') == 1.0


class Pushgateway(_Program):
    """``prometheus-pushgateway`` on a free loopback port, its store in memory (Debian's
    build otherwise keeps it in /var/lib/prometheus/pushgateway.data, shared by all)."""

    name = "pushgateway"

    def __init__(
        self, binary: str, workdir: Path, *, basic_auth: Optional[tuple[str, str]] = None
    ) -> None:
        """``basic_auth``: (user, password) every request must carry (its web config)."""
        super().__init__(binary, workdir)
        self.auth = basic_auth

    def _args(self) -> list[str]:
        args = [
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--persistence.file=",
            "--log.level=warn",
        ]
        if self.auth is not None:
            import bcrypt

            user, password = self.auth
            hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
            config = self.workdir / "web.yml"
            config.write_text(f"basic_auth_users:\n  {user}: '{hashed}'\n")
            args.append(f"--web.config.file={config}")
        return args

    def metrics(self) -> str:
        """``/metrics``: what it serves (the pushed groups, plus its own)."""
        return http_get(f"{self.url}/metrics", auth=self.auth)

    def groups(self) -> list[dict[str, Any]]:
        """``/api/v1/metrics``: the pushed groups with their labels and metrics."""
        body = json.loads(http_get(f"{self.url}/api/v1/metrics", auth=self.auth))
        return list(body["data"])
