"""Loopback ports for the servers tests start (msrun's master, TensorBoard, Chromium's
WebDriver, Prometheus and the exporters).

A port is checked free by binding it, then released for the server to take, so another
process could take it in between. Two things keep that window empty in practice:

* the ports come from below the kernel's ephemeral range (``ip_local_port_range``,
  32768-60999 by default), which it never hands out to a ``bind(0)`` or an outgoing
  connection, so only another test picking ports the same way can want the same one;
* under pytest-xdist each worker draws from its own slice of that range
  (``PYTEST_XDIST_WORKER``), at random within it, and never hands out a port twice in a
  process for a while: two tests running at once (two workers, or one test asking for
  an msrun master and an exporter in a row) never get the same port from here.
"""

from __future__ import annotations

import os
import random
import socket
from collections import deque

__all__ = ["free_port", "free_ports"]

LOW, HIGH = 20_000, 32_000  # below the ephemeral range: only tests pick these
_recent: deque[int] = deque(maxlen=512)  # handed out lately by this process
_random = random.Random()  # seeded from the OS: two suites at once draw apart


def _slice() -> range:
    """This process's ports: the whole range, or its worker's share under xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    if count <= 1 or index >= count:
        return range(LOW, HIGH)
    width = (HIGH - LOW) // count
    return range(LOW + index * width, LOW + (index + 1) * width)


def _bindable(first: int, count: int) -> bool:
    socks = []
    try:
        for port in range(first, first + count):
            sock = socket.socket()
            socks.append(sock)
            sock.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for sock in socks:
            sock.close()


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports free now (per_rank exporters
    serve on port + rank: a busy port + 1 made a rank's exporter warn and its scrape
    fail)."""
    ports = _slice()
    for _ in range(1000):
        first = _random.randrange(ports.start, ports.stop - count + 1)
        taken = range(first, first + count)
        if any(port in _recent for port in taken) or not _bindable(first, count):
            continue
        _recent.extend(taken)
        return first
    raise RuntimeError(f"no {count} consecutive free loopback ports in {ports}")


def free_port() -> int:
    """A TCP port free on loopback now."""
    return free_ports(1)
