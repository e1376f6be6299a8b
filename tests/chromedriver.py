"""A headless Chromium driven through chromedriver's W3C WebDriver HTTP API.

No Python driver package is needed: the protocol is JSON over HTTP
(https://www.w3.org/TR/webdriver2/), spoken here with urllib. Pages whose content lives
in shadow DOM (TensorBoard's Polymer dashboards) are read with scripts run in the page.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from tests.ports import free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def available() -> bool:
    return Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()


class Browser:
    """One WebDriver session: ``get``, ``run`` (a script), ``wait_for``, ``screenshot``."""

    def __init__(self, endpoint: str, session: str) -> None:
        self.base = f"{endpoint}/session/{session}"

    def _call(self, method: str, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"WebDriver {method} {path}: {exc.read()[:2000]!r}") from exc

    def get(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """Run ``script`` (a function body; ``arguments`` holds ``args``) in the page."""
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait_for(self, script: str, timeout: float = 90, interval: float = 0.5) -> Any:
        """Run ``script`` until it returns something truthy; return that."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = self.run(script)
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"the page never satisfied the script; last result: {last!r}")

    def console(self) -> list[dict[str, Any]]:
        """The page's console messages since the last call (chromedriver's browser log;
        needs the session's ``goog:loggingPrefs``, which :func:`browser` sets)."""
        entries: list[dict[str, Any]] = self._call("POST", "/se/log", {"type": "browser"})
        return entries

    def pointer(self, *moves: tuple[str, int, int]) -> None:
        """Real mouse input at viewport pixels: ("move" | "down" | "up", x, y) in order."""
        actions: list[dict[str, Any]] = []
        for kind, x, y in moves:
            actions.append({"type": "pointerMove", "duration": 50, "x": x, "y": y})
            if kind == "down":
                actions.append({"type": "pointerDown", "button": 0})
            elif kind == "up":
                actions.append({"type": "pointerUp", "button": 0})
        body = {
            "actions": [
                {
                    "type": "pointer",
                    "id": "mouse",
                    "parameters": {"pointerType": "mouse"},
                    "actions": actions,
                }
            ]
        }
        self._call("POST", "/actions", body)

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))
        return path


@contextmanager
def browser(
    profile: Path,
    *,
    width: int = 1400,
    height: int = 1000,
    offline: bool = False,
    phone: bool = False,
) -> Iterator[Browser]:
    """A headless Chromium session (its own profile folder), ended on exit. ``offline``:
    no host name resolves and every request goes to a closed port, so anything the page
    tries to fetch fails (and shows in :meth:`Browser.console`). ``phone``: Chromium's
    mobile emulation at ``width`` x ``height`` CSS pixels (a desktop window cannot be
    narrower than 500 px)."""
    blocked = [
        f"--proxy-server=http://127.0.0.1:{free_port()}",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]
    port = free_port()
    driver = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{endpoint}/status", timeout=5) as response:
                    if json.loads(response.read())["value"]["ready"]:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.2)
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--hide-scrollbars",
                    f"--window-size={width},{height}",
                    f"--user-data-dir={profile}",
                    *(blocked if offline else []),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        if phone:
            metrics = {"width": width, "height": height, "pixelRatio": 1.0}
            capabilities["goog:chromeOptions"]["mobileEmulation"] = {"deviceMetrics": metrics}
        request = urllib.request.Request(
            f"{endpoint}/session",
            data=json.dumps({"capabilities": {"alwaysMatch": capabilities}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            session = json.loads(response.read())["value"]["sessionId"]
        page = Browser(endpoint, session)
        try:
            yield page
        finally:
            with contextlib.suppress(RuntimeError, OSError):
                page._call("DELETE", "")
    finally:
        driver.terminate()
        driver.wait(30)
