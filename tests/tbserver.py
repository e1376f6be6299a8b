"""A live ``tensorboard`` server over a log folder, queried over its HTTP API.

The same steps as ``tests/mindspore/test_demo_in_tensorboard.py``, shared: start the
real server on a free port, wait until it lists the tags, read the plugins' JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.ports import free_port

TENSORBOARD = str(Path(sys.executable).with_name("tensorboard"))


@contextmanager
def live_tensorboard(logdir: Path) -> Iterator[str]:
    """The URL of a TensorBoard serving ``logdir`` (stopped on exit)."""
    port = free_port()
    proc = subprocess.Popen(
        [TENSORBOARD, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def query(url: str, path: str, **params: str) -> Any:
    """``GET <url><path>?<params>`` as JSON."""
    return get(f"{url}{path}?{urllib.parse.urlencode(params)}")


def wait_for_tags(
    url: str, want: set[str], plugin: str = "scalars", timeout: float = 120
) -> dict[str, Any]:
    """``{run: tags}`` once some run lists every tag of ``want`` for ``plugin``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = get(f"{url}/data/plugin/{plugin}/tags")
            if any(want <= set(tags) for tags in last.values()):
                return dict(last)
        except OSError:
            pass  # the server is still starting
        time.sleep(0.5)
    raise AssertionError(f"TensorBoard never listed {want} ({plugin}); last answer: {last}")
