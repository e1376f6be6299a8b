"""Under CI, a skipped test is a failed test (a pytest plugin; tests/conftest.py loads it).

`make test` installs every dependency the suite needs: the Python packages into
``.venv``, the Debian packages with apt-get. On a developer's machine without root a test
whose program or package is missing is reported as SKIPPED with what to install; under
CI the same skip would let the run pass with a hundred tests unrun (a broken MindSpore
install skips every test under ``tests/mindspore``). So when the ``CI`` environment
variable is set (``.ci/run`` sets ``CI=true``; most CI systems set it themselves), every
skip, at collection (``pytest.importorskip`` at module level) or in a test or fixture,
is turned into a failure that names the reason the test gave, e.g. the package to
install. ``CI=false`` (or ``0``, ``no``, empty) allows skips again.

Expected failures (``xfail``) are left alone; deselection (``-m``, ``-k``) is not a skip.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

FALSE = frozenset({"", "0", "false", "no", "off"})


def in_ci() -> bool:
    """Whether the ``CI`` environment variable says this is a CI run."""
    return os.environ.get("CI", "").strip().lower() not in FALSE


def _reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (file, line, "Skipped: ...")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _as_failure(report: Any) -> None:
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI={os.environ.get('CI')!r}, where `make test` installs every "
        f"dependency, so the skip is a failure: {_reason(report.longrepr)}"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and in_ci():
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci():
        _as_failure(report)
