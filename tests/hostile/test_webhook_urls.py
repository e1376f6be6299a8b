"""Malformed webhook URLs (issue 20, item 9), against a real local HTTP server.

A URL in the config is checked when the config is built (a ConfigError naming the key
path and the fix, the URL masked); one from a ``url_env`` variable is checked when
delivery starts (one warning naming the variable, never its value); a delivery that
fails says why, once per notifier, and later failures are counted.
"""

from __future__ import annotations

import http.server
import json
import logging
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import mindwatch
from mindwatch.alerts import Alert
from mindwatch.alerts.notify import Dispatcher, build_notifier
from mindwatch.config import ConfigError, DeliverySettings, MonitorConfig, NotifierSettings
from tests.hostile.promise import config_error, mindwatch_warnings, one_warning

TOKEN = "tok-7c3e9d1f0a"  # an access token: must never be shown


class Failing(http.server.BaseHTTPRequestHandler):
    """Answers every POST with HTTP 500 (and counts them)."""

    posts: ClassVar[int] = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).posts += 1
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_server() -> Iterator[str]:
    Failing.posts = 0
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def alert(step: int) -> Alert:
    return Alert(
        rule="nonfinite",
        severity="critical",
        metric="train/loss",
        value=math.nan,
        step=step,
        message="train/loss is nan",
    )


BAD_URLS = {
    "no scheme": f"oapi.dingtalk.com/robot/send?access_token={TOKEN}",
    "port not a number": f"http://hooks.example:abc/{TOKEN}",
    "a space": f"https://hooks.example/{TOKEN} x",
    "a line break": f"https://hooks.example/{TOKEN}\n",
    "file scheme": f"file:///etc/{TOKEN}",
    "no host": f"https:///{TOKEN}",
    "port out of range": f"http://hooks.example:99999/{TOKEN}",
    "port 0": f"http://hooks.example:0/{TOKEN}",
    "broken IPv6": f"http://[::1/{TOKEN}",
}


@pytest.mark.parametrize("url", BAD_URLS.values(), ids=BAD_URLS.keys())
def test_a_malformed_webhook_url_is_refused_naming_the_key_not_the_url(url: str) -> None:
    config = {"alerts": {"notify": [{"kind": "webhook"}, {"kind": "dingtalk", "url": url}]}}
    config["alerts"]["notify"][0]["url"] = "https://hooks.example/ok"
    with pytest.raises(ConfigError) as info:
        MonitorConfig.from_dict(config)
    message = config_error(info, "alerts.notify.1.url", "'***'")
    assert TOKEN not in message
    assert "hooks.example" not in message
    assert "https://" in message or "one line" in message or "port" in message  # the fix


def test_a_good_webhook_url_is_accepted() -> None:
    for url in ("https://oapi.dingtalk.com/robot/send?access_token=x", "http://127.0.0.1:8080/h"):
        MonitorConfig.from_dict({"alerts": {"notify": [{"kind": "dingtalk", "url": url}]}})


# A webhook whose URL is in the variable MW_TEST_HOOK; every NaN loss is an alert.
HOOK_FROM_VARIABLE = {
    "print_every": 0,
    "alerts": {
        "cooldown_steps": 0,
        "notify": [{"kind": "webhook", "url_env": "MW_TEST_HOOK"}],
        "delivery": {"retries": 0, "timeout": 2},
    },
}


def test_a_malformed_url_in_a_variable_is_said_once_at_start_naming_the_variable(
    tmp_path: Path,
    failing_server: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server's address without http://: urllib raised ValueError at every alert,
    # and the log said "webhook notifier ... failed: ValueError" each time.
    monkeypatch.setenv("MW_TEST_HOOK", f"{failing_server}/hook?token={TOKEN}")
    caplog.set_level(logging.WARNING)
    mon = mindwatch.Monitor(tmp_path, HOOK_FROM_VARIABLE)
    at_start = mindwatch_warnings(caplog.records)
    assert len(at_start) == 1, at_start
    warning = at_start[0]
    for said in ("MW_TEST_HOOK", "must start with https://", "fix the variable"):
        assert said in warning, warning
    for step in range(1, 4):
        mon.log_step(step, loss=math.nan)
    mon.close()
    about_delivery = [w for w in mindwatch_warnings(caplog.records) if "notifier" in w]
    assert about_delivery == [warning]  # not once per alert (the alerts are logged too)
    assert Failing.posts == 0  # never sent to a malformed address
    for text in [*mindwatch_warnings(caplog.records), (tmp_path / "run.json").read_text()]:
        assert TOKEN not in text
        assert failing_server not in text
    notes = json.loads((tmp_path / "run.json").read_text())["notifications"]
    assert (notes["failed"], notes["sent"]) == (3, 0)


def test_a_failing_endpoint_is_reported_once_with_the_reason_then_counted(
    failing_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    url = f"http://{failing_server}/hook?token={TOKEN}"
    notifier = build_notifier(NotifierSettings(kind="webhook", url=url), 2.0)
    dispatcher = Dispatcher([notifier], DeliverySettings(timeout=2.0, retries=1, backoff=0.01))
    for step in range(1, 5):
        dispatcher.submit(alert(step))
    dispatcher.close(timeout=30)
    message = one_warning(caplog.records, "HTTP 500", "after 2 attempts", "counted")
    assert TOKEN not in message
    assert url not in message
    assert (dispatcher.failed, dispatcher.sent, Failing.posts) == (4, 0, 8)


class Buggy(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_a_notifier_bug_is_said_once_with_its_reason_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"https://hooks.example/{TOKEN}"
    notifier = build_notifier(NotifierSettings(kind="slack", url=url), 1.0)

    def broken(alert: Any) -> None:  # a bug that quotes the URL in its message
        raise ValueError(f"cannot post to {url}")

    notifier.send = broken  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING)
    dispatcher = Dispatcher([notifier], DeliverySettings(retries=0))
    for step in (1, 2, 3):
        dispatcher.submit(alert(step))
    dispatcher.close(timeout=10)
    message = one_warning(caplog.records, "slack notifier", "ValueError", "cannot post to ***")
    assert TOKEN not in message
    assert "hooks.example" not in message
    assert dispatcher.failed == 3


@pytest.mark.parametrize(
    "address", ["pushgateway:abc", "http://gw 9091", "ftp://gw:9091", "http://:9091", "gw:0"]
)
def test_a_malformed_pushgateway_address_is_refused_masked(address: str) -> None:
    """The Pushgateway address gets the webhook's checks (it may carry a password too);
    ``host:port`` without a scheme is fine, as prometheus_client reads it."""
    from mindwatch.config import ConfigError, MonitorConfig

    with pytest.raises(ConfigError) as info:
        MonitorConfig.from_dict({"prometheus": {"push": {"url": address}}})
    assert "prometheus.push.url" in str(info.value)
    assert address not in str(info.value)


@pytest.mark.parametrize(
    "address", ["pushgateway:9091", "http://gw:9091", "https://u:p@gw.example/push", "gw"]
)
def test_a_pushgateway_address_as_people_write_it_is_accepted(address: str) -> None:
    from mindwatch.config import MonitorConfig

    MonitorConfig.from_dict({"prometheus": {"push": {"url": address}}})


def test_a_malformed_pushgateway_address_in_a_variable_is_said_once_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``push.url_env``: the address is read when the monitor starts and gets the same
    checks; one warning names the variable, never the address, and nothing is pushed
    (it used to fail at every push with the library's ValueError)."""
    monkeypatch.setenv("MW_TEST_GATEWAY", f"http://gw:abc/?token={TOKEN}")
    caplog.set_level(logging.WARNING)
    config = {"print_every": 0, "prometheus": {"push": {"url_env": "MW_TEST_GATEWAY"}}}
    with mindwatch.Monitor(tmp_path, config) as mon:
        for step in range(1, 4):
            mon.log_step(step, loss=1.0 / step)
    said = mindwatch_warnings(caplog.records)
    assert len(said) == 1, said
    for part in ("MW_TEST_GATEWAY", "not a valid web address", "nothing is pushed"):
        assert part in said[0], said[0]
    for text in [said[0], (tmp_path / "run.json").read_text()]:
        assert TOKEN not in text
        assert "gw:abc" not in text


# A character beyond ASCII (review of issue 20, item 6): a zero-width space pasted from a
# chat passed the checks and failed every delivery with "UnicodeEncodeError: 'ascii'
# codec can't encode character '\u200b'". Each: (where, what it is, how it is named).
NOT_ASCII = {
    "zero-width space in the token": (
        f"/robot/send?access_token={TOKEN}\u200b",
        "U+200B",
        "zero-width space",
    ),
    "BOM before the scheme": ("\ufeff", "U+FEFF", "byte order mark"),
    "no-break space in the path": ("/robot\u00a0send", "U+00A0", "no-break space"),
    "word joiner": ("/hook\u2060", "U+2060", "word joiner"),
    "Chinese path": ("/机器人/send", "U+673A", "percent-encode"),
    "Chinese host": ("", "U+4F8B", "xn--"),
}


def _with(where: str) -> str:
    if where == "\ufeff":
        return f"\ufeffhttps://oapi.dingtalk.com/robot/send?access_token={TOKEN}"
    if not where:
        return f"https://例子.测试/hook?access_token={TOKEN}"
    return f"https://oapi.dingtalk.com{where}"


@pytest.mark.parametrize("case", NOT_ASCII.values(), ids=NOT_ASCII.keys())
def test_a_url_with_a_character_beyond_ascii_is_refused_naming_it(
    case: tuple[str, str, str],
) -> None:
    where, code_point, named = case
    url = _with(where)
    config = {"alerts": {"notify": [{"kind": "dingtalk", "url": url}]}}
    with pytest.raises(ConfigError) as info:
        MonitorConfig.from_dict(config)
    message = config_error(info, "alerts.notify.0.url", "'***'", code_point, named)
    position = next(i for i, c in enumerate(url, 1) if ord(c) > 127)
    assert f"character {position} of {len(url)}" in message
    assert TOKEN not in message
    assert "dingtalk" not in message
    assert not any(ord(c) > 127 for c in message)  # not the character itself
    with pytest.raises(ConfigError) as push:
        MonitorConfig.from_dict({"prometheus": {"push": {"url": url}}})
    config_error(push, "prometheus.push.url", code_point)


def test_a_url_in_a_variable_with_a_zero_width_space_is_said_once_at_start(
    tmp_path: Path,
    failing_server: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("MW_TEST_HOOK", f"http://{failing_server}/hook?token={TOKEN}\u200b")
    caplog.set_level(logging.WARNING)
    with mindwatch.Monitor(tmp_path, HOOK_FROM_VARIABLE) as mon:
        warning = one_warning(caplog.records, "MW_TEST_HOOK", "U+200B", "zero-width space")
        for step in range(1, 4):
            mon.log_step(step, loss=math.nan)
    assert [w for w in mindwatch_warnings(caplog.records) if "notifier" in w] == [warning]
    assert "UnicodeEncodeError" not in caplog.text
    assert Failing.posts == 0
    assert TOKEN not in caplog.text
    notes = json.loads((tmp_path / "run.json").read_text())["notifications"]
    assert (notes["failed"], notes["sent"]) == (3, 0)
