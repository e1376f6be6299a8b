"""Loopback ports for the servers tests start (msrun's master, TensorBoard, Chromium's
WebDriver, Prometheus and the exporters)."""

from __future__ import annotations

import socket

__all__ = ["free_port", "free_ports"]


def free_port() -> int:
    """A TCP port free on loopback now (the usual small race is fine on a test machine)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports free now (per_rank exporters
    serve on port + rank: a busy port + 1 made a rank's exporter warn and its scrape
    fail)."""
    for _ in range(100):
        first = free_port()
        socks = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free loopback ports")
