"""Notifiers against a real local HTTP server and a real SMTP server; no secret leaks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import logging
import math
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

import mindwatch
from mindwatch.alerts import Alert
from mindwatch.alerts.notify import Dispatcher, build_notifier
from mindwatch.config import DeliverySettings, NotifierSettings

TOKEN = "tok-5e1cf7a1b2"  # what a robot URL's access token looks like: a secret
SECRET = "SEC-9f8e7d6c5b4a"  # a signing secret
PASSWORD = "pw-0a1b2c3d4e"


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records every POST; behaves as ``mode`` says: ok, fail-once, hang."""

    posts: ClassVar[list[dict[str, Any]]] = []
    mode: ClassVar[str] = "ok"
    failures: ClassVar[int] = 0

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        type(self).posts.append({"path": self.path, "body": body})
        if type(self).mode == "hang":
            time.sleep(3)
        if type(self).mode == "fail-once" and type(self).failures == 0:
            type(self).failures += 1
            self.send_response(500)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"errcode": 0}')

    def log_message(self, *args: object) -> None:
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a hanging request: expected here


@pytest.fixture
def server() -> Iterator[str]:
    Recorder.posts, Recorder.mode, Recorder.failures = [], "ok", 0
    httpd = QuietServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def alert() -> Alert:
    return Alert(
        rule="spike",
        severity="critical",
        metric="train/loss",
        value=47.6,
        step=320,
        message="train/loss jumped to 47.6",
        baseline=0.8,
        rank=1,
        batch=63,
        run="exp",
        causes=["a bad batch"],
    )


def deliver(settings: dict[str, Any], **delivery: Any) -> Dispatcher:
    options = {"timeout": 2.0, "retries": 0, "backoff": 0.05, **delivery}
    notifier = build_notifier(NotifierSettings(**settings), options["timeout"])
    dispatcher = Dispatcher([notifier], DeliverySettings(**options))
    dispatcher.submit(alert())
    dispatcher.close(timeout=20)
    return dispatcher


def test_generic_webhook_gets_the_alert_json(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MW_HOOK", f"{server}/hook?token={TOKEN}")
    assert deliver({"kind": "webhook", "url_env": "MW_HOOK"}).sent == 1
    (post,) = Recorder.posts
    body = post["body"]
    assert body["source"] == "mindwatch"
    assert (body["rule"], body["step"], body["rank"], body["batch"]) == ("spike", 320, 1, 63)


def test_dingtalk_is_signed(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MW_DING", f"{server}/robot/send?access_token={TOKEN}")
    monkeypatch.setenv("MW_DING_SECRET", SECRET)
    deliver({"kind": "dingtalk", "url_env": "MW_DING", "secret_env": "MW_DING_SECRET"})
    (post,) = Recorder.posts
    query = urllib.parse.parse_qs(urllib.parse.urlparse(post["path"]).query)
    stamp, sign = query["timestamp"][0], query["sign"][0]
    expected = base64.b64encode(
        hmac.new(SECRET.encode(), f"{stamp}\n{SECRET}".encode(), hashlib.sha256).digest()
    ).decode()
    assert sign == expected  # parse_qs undid the URL quoting
    assert abs(int(stamp) / 1000 - time.time()) < 60
    assert query["access_token"] == [TOKEN]
    body = post["body"]
    assert body["msgtype"] == "markdown"
    assert body["markdown"]["title"] == "mindwatch critical: spike"
    assert "step 320, rank 1, batch 63" in body["markdown"]["text"]


def test_feishu_is_signed(server: str) -> None:
    deliver({"kind": "feishu", "url": f"{server}/hook/{TOKEN}", "secret": SECRET})
    (post,) = Recorder.posts
    body = post["body"]
    key = f"{body['timestamp']}\n{SECRET}".encode()
    assert body["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
    assert body["msg_type"] == "text"
    assert body["content"]["text"].startswith("[mindwatch] CRITICAL spike")


def test_wecom_and_slack_shapes(server: str) -> None:
    deliver({"kind": "wecom", "url": f"{server}/cgi-bin/webhook/send?key={TOKEN}"})
    deliver({"kind": "slack", "url": f"{server}/services/{TOKEN}"})
    wecom, slack = (p["body"] for p in Recorder.posts)
    assert wecom["msgtype"] == "markdown"
    assert "spike" in wecom["markdown"]["content"]
    assert set(slack) == {"text"}
    assert "run exp, step 320" in slack["text"]


def test_a_500_is_retried_then_delivered(server: str) -> None:
    Recorder.mode = "fail-once"
    dispatcher = deliver({"kind": "slack", "url": f"{server}/s"}, retries=2)
    assert (dispatcher.sent, dispatcher.failed) == (1, 0)
    assert len(Recorder.posts) == 2


def test_a_hanging_endpoint_costs_training_nothing(
    server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Recorder.mode = "hang"
    caplog.set_level(logging.WARNING, logger="mindwatch")
    url = f"{server}/hook?token={TOKEN}"
    config = {
        "print_every": 0,
        "alerts": {
            "notify": [{"kind": "webhook", "url": url}],
            "delivery": {"timeout": 0.3, "retries": 1, "backoff": 0.05},
            "cooldown_steps": 1,
        },
    }
    with mindwatch.Monitor(tmp_path, config) as mon:
        for step in range(1, 201):  # a NaN every step: a flood of alerts to deliver
            mon.log_step(step, loss=math.nan)
        assert mon.steps_logged == 200  # the loop never waited for the endpoint
    info = json.loads((tmp_path / "run.json").read_text())
    notes = info["notifications"]
    assert notes["sent"] == 0
    assert notes["failed"] + notes["dropped"] >= 1
    failures = [r.getMessage() for r in caplog.records if "could not deliver" in r.getMessage()]
    assert len(failures) == 1  # reported once
    assert "TimeoutError" in failures[0] or "timeout" in failures[0]
    assert_no_secrets(tmp_path, caplog.text)


def test_email_through_a_real_smtp_server(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    received: list[Any] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
            received.append(envelope)
            return "250 OK"

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
        ok = isinstance(data, LoginPassword) and data.password == PASSWORD.encode()
        return AuthResult(success=ok)

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=free_port,
        authenticator=authenticate,
        auth_require_tls=False,
    )
    controller.start()
    try:
        port = free_port
        settings = {
            "kind": "email",
            "host": "127.0.0.1",
            "port": port,
            "security": "none",
            "username": "bot",
            "password": PASSWORD,
            "sender": "mindwatch@example.test",
            "recipients": ["oncall@example.test"],
        }
        caplog.set_level(logging.DEBUG)
        assert deliver(settings).sent == 1
        bad = deliver({**settings, "password": "wrong"})
        assert (bad.sent, bad.failed) == (0, 1)
    finally:
        controller.stop()
    (envelope,) = received
    text = envelope.content.decode()
    assert "Subject: [mindwatch] critical spike at step 320 (exp)" in text
    assert envelope.rcpt_tos == ["oncall@example.test"]
    assert PASSWORD not in caplog.text


def assert_no_secrets(folder: Path, *texts: str) -> None:
    for secret in (TOKEN, SECRET, PASSWORD):
        for text in texts:
            assert secret not in text
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def test_secrets_never_reach_files_logs_or_errors(
    server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = {
        "print_every": 0,
        "alerts": {
            "notify": [
                {"kind": "dingtalk", "url": f"{server}/r?access_token={TOKEN}", "secret": SECRET},
                {"kind": "slack", "url": f"http://127.0.0.1:1/{TOKEN}"},  # refused: fails
                {
                    "kind": "email",
                    "host": "127.0.0.1",
                    "port": 1,
                    "security": "none",
                    "username": "u",
                    "password": PASSWORD,
                    "sender": "a@b.test",
                    "recipients": ["c@d.test"],
                },
            ],
            "delivery": {"timeout": 1.0, "retries": 0},
        },
    }
    with mindwatch.Monitor(tmp_path, config) as mon:
        mon.log_step(1, loss=math.inf)
    assert len(Recorder.posts) == 1  # dingtalk delivered
    assert "could not deliver" in caplog.text  # slack and email failed, said so
    assert_no_secrets(tmp_path, caplog.text)
    with pytest.raises(mindwatch.ConfigError) as info:
        mindwatch.MonitorConfig.from_dict(
            {"alerts": {"notify": [{"kind": "email", "password": PASSWORD}]}}
        )
    assert PASSWORD not in str(info.value)


def test_urls_are_masked_in_config_errors_wherever_they_are() -> None:
    url = f"https://oapi.dingtalk.com/robot/send?access_token={TOKEN}"
    for bad in (
        {"alerts": {"notify": [url]}},  # a URL where a notifier belongs
        {"alerts": {"notify": [{"kind": "dingtalk", "url_env": url}]}},  # value, not name
        {"alerts": [url]},
    ):
        with pytest.raises(mindwatch.ConfigError) as info:
            mindwatch.MonitorConfig.from_dict(bad)
        assert TOKEN not in str(info.value)
        assert "dingtalk.com" not in str(info.value)


def test_a_chinese_alert_reaches_dingtalk_feishu_and_wecom(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alerts.language: zh, a NaN loss at step 3: the local server receives the alert in
    Chinese in each robot's own payload shape, with the node the rank runs on."""
    monkeypatch.delenv("DEVICE_ID", raising=False)
    config = {
        "print_every": 0,
        "alerts": {
            "language": "zh",
            "notify": [
                {"kind": "dingtalk", "url": f"{server}/robot/send?access_token={TOKEN}"},
                {"kind": "feishu", "url": f"{server}/open-apis/bot/v2/hook/{TOKEN}"},
                {"kind": "wecom", "url": f"{server}/cgi-bin/webhook/send?key={TOKEN}"},
            ],
            "delivery": {"timeout": 2.0, "retries": 0},
        },
    }
    with mindwatch.Monitor(tmp_path / "exp", config) as mon:
        for step in (1, 2):
            mon.log_step(step, loss=1.0)
        mon.log_step(3, loss=math.nan)
    posts = {p["path"].split("/")[1]: p["body"] for p in Recorder.posts}
    assert set(posts) == {"robot", "open-apis", "cgi-bin"}
    headline = "[mindwatch] 严重 nonfinite：train/loss 为 NaN"
    where = f"运行 exp，第 3 步，rank 0（{socket.gethostname()}）"
    check = "请检查：输入批次中有 NaN 或 Inf（检查这一步的数据）；"
    # A loop of its own handed the flight recorder no per-layer norms: said, with the fix.
    moved = (
        "没有记录逐层梯度范数，因此无法指出是哪一层：没有代码把它们交给飞行记录器；在自己的训练循环中，"
        "先调用一次 monitor.flight_recorder.set_layers(names)，再在每一步调用 "
        "monitor.flight_recorder.add_layers(step, squared_norms)（docs/forensics.md）。"
    )

    ding = posts["robot"]
    assert set(ding) == {"msgtype", "markdown"}
    assert ding["msgtype"] == "markdown"
    assert ding["markdown"]["title"] == "mindwatch 严重：nonfinite"
    text = ding["markdown"]["text"].split("\n\n")
    assert text[:3] == [f"### {headline}", f"- {where}", f"- {moved}"]
    assert text[3].startswith(f"- {check}")

    feishu = posts["open-apis"]
    assert set(feishu) == {"msg_type", "content"}
    assert feishu["msg_type"] == "text"
    lines = feishu["content"]["text"].split("\n")
    assert lines[:3] == [headline, where, moved]
    assert lines[3].startswith(check)

    wecom = posts["cgi-bin"]
    assert set(wecom) == {"msgtype", "markdown"}
    assert wecom["msgtype"] == "markdown"
    assert wecom["markdown"]["content"] == feishu["content"]["text"]


def test_the_message_names_the_first_mover_when_the_alert_has_forensics(
    server: str, tmp_path: Path
) -> None:
    """Alert lines as the pipeline writes them (a real flight recorder's analysis): the
    chat message says which layer moved first, on which rank, how long before the loss,
    and the first non-finite gradient; in Chinese too. Without forensics: as before."""
    from mindwatch.common.i18n import set_language
    from tests.tools.explain.planted import LONG, NAN_FIRST, NAN_STEP, write_run

    run = write_run(tmp_path / "run", ranks=False)
    lines = [json.loads(line) for line in (run / "alerts.jsonl").read_text().splitlines()]
    spike, nonfinite = (line["forensics"] for line in lines[1:])
    notifier = build_notifier(NotifierSettings(kind="slack", url=f"{server}/services/{TOKEN}"), 2.0)

    def send(*summaries: Any) -> list[list[str]]:
        Recorder.posts = []
        dispatcher = Dispatcher([notifier], DeliverySettings(timeout=2.0, retries=0))
        for summary in summaries:
            sent = alert()
            if summary is not None:
                sent.extra = {"forensics": summary}
            dispatcher.submit(sent)
        dispatcher.close(timeout=20)
        return [p["body"]["text"].split("\n") for p in Recorder.posts]

    z = f"{spike['first_mover']['z']:.1f}"
    first, second, plain = send(spike, nonfinite, None)
    assert first[2] == f"first mover: layer {LONG} on rank 1 moved 3 steps before the loss (z {z})"
    assert first[3].startswith("check: ")  # then what to check, as before
    # a tie of non-finite layers is no first mover: the backward order names the first
    assert second[2] == f"first non-finite gradient: {NAN_FIRST} (step {NAN_STEP})"
    assert len(plain) == 3
    assert plain[2].startswith("check: ")
    set_language("zh")
    (chinese,) = send(spike)
    assert chinese[2] == f"最先偏离：rank 1 上的层 {LONG} 比损失早 3 步开始偏离（z {z}）"
