"""Shared fixtures. MindSpore logs are silenced (GLOG_v=3) for every test and subprocess.

The browser, PDF and Prometheus tests drive real programs from Debian packages (`make test` installs
them with apt-get as root or with passwordless sudo). Where one is missing, the fixture
skips the test with the package to install: `pytest -ra` lists it as SKIPPED, never passed.
Under CI (the ``CI`` environment variable, which ``.ci/run`` sets) every skip is a failure
naming what is missing (tests/ci_skips.py).
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator

import pytest

os.environ.setdefault("GLOG_v", "3")

# A suite started in the background by a shell without job control (`make test &`,
# some CI runners) inherits SIGINT *ignored*, and so would every command a test starts;
# Python then never turns SIGINT into KeyboardInterrupt, and a command the test stops
# "with Ctrl-C" runs on until the test's timeout. Ignoring survives exec, a handler does
# not: with Python's own handler here, the commands start with SIGINT at its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

pytest_plugins = ["tests.ci_skips", "tests.schedule"]


@pytest.fixture(autouse=True)
def _own_state_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-user state (``mindwatch watch``'s) goes to a fresh folder, never ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state-home")))


@pytest.fixture(autouse=True)
def _english(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests read English whatever the machine's locale (and so do their subprocesses);
    a test that sets a language gets the default back afterwards."""
    from mindwatch.common.i18n import set_language

    monkeypatch.setenv("LANGUAGE", "en")
    set_language(None)
    yield
    set_language(None)


def _program(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(
            f"{name} is not installed: apt-get install {package} "
            "(`make test` does it as root or with passwordless sudo)"
        )
    return path


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium's path (Debian package chromium)."""
    return _program("chromium", "chromium")


@pytest.fixture(scope="session")
def pdftoppm() -> str:
    """pdftoppm's path; pdfinfo comes in the same package (poppler-utils)."""
    _program("pdfinfo", "poppler-utils")
    return _program("pdftoppm", "poppler-utils")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    """The Prometheus server's path (Debian package prometheus)."""
    return _program("prometheus", "prometheus")


@pytest.fixture(scope="session")
def pushgateway_bin() -> str:
    """The Pushgateway's path (Debian package prometheus-pushgateway)."""
    return _program("prometheus-pushgateway", "prometheus-pushgateway")
