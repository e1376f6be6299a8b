"""Loopback ports for the servers tests start (msrun's master, TensorBoard, Chromium's
WebDriver, Prometheus and the exporters)."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port free on loopback now (the usual small race is fine on a test machine)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
