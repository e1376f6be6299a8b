"""Secrets in stored text (issue 20, item 7): a webhook token, password or key given on
the command line or in the config never reaches run.json, the event files (the config
TEXT tab and HPARAMS, read back with EventAccumulator), alerts.jsonl, the report
(HTML, JSON, Markdown) or the log.

Real parts: a real Monitor with sys.argv set as a training script's would be, notifiers
and a Pushgateway address pointing at a closed local port (so their failures are
logged, the place a URL would leak), a NaN loss so an alert is raised and sent.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindwatch
from mindwatch.cli import main
from mindwatch.common.redact import redact_argv, redact_text, redact_url
from tests.hostile.promise import reads_back
from tests.tbread import accumulator

CLOSED = "http://127.0.0.1:1"  # nothing listens: a delivery fails at once, and is logged


def _stored(folder: Path, report: Path, log: str) -> dict[str, str]:
    """Everything the run stored or printed, as text (files as their bytes, escaped)."""
    texts = {"log": log}
    for path in [*folder.rglob("*"), *report.rglob("*")]:
        if path.is_file():
            texts[str(path)] = path.read_bytes().decode("utf-8", "backslashreplace")
    acc = accumulator(folder)
    for tag in acc.Tags()["tensors"]:  # the config TEXT, as TensorBoard decodes it
        for event in acc.Tensors(tag):
            texts[f"tensor {tag}"] = b"".join(event.tensor_proto.string_val).decode()
    for tag, content in acc.PluginTagToContent("hparams").items():  # HPARAMS' values
        texts[f"hparams {tag}"] = content.decode("utf-8", "backslashreplace")
    return texts


def _leaks(texts: dict[str, str], secrets: list[str]) -> list[str]:
    found = []
    for secret in secrets:
        forms = {secret, urllib.parse.quote(secret, safe=""), json.dumps(secret)[1:-1]}
        found += [f"{secret!r} in {where}" for where, t in texts.items() for f in forms if f in t]
    return found


def _run(folder: Path, argv: list[str], config: dict[str, Any], monkey: pytest.MonkeyPatch) -> Path:
    """Train 4 steps (a NaN at step 3) under ``argv``; the report's folder."""
    monkey.setattr(sys, "argv", argv)
    with mindwatch.Monitor(folder, config) as mon:
        for step in range(1, 5):
            mon.log_step(step, loss=math.nan if step == 3 else 1.0 / step)
    out = folder.parent / "report"
    result = CliRunner().invoke(
        main, ["report", str(folder), "--format", "json,md,html", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    reads_back(folder, {"train/loss": [(1, 1.0), (2, 0.5), (4, 0.25)]})
    return out


def test_a_webhook_token_on_the_command_line_stays_out_of_run_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 7: argv was recorded verbatim while the same URL in the config was masked."""
    token = "Tk9x2mQ7vLp4Zr8w"
    argv = [
        "train.py",
        "--url",
        f"https://oapi.dingtalk.com/robot/send?access_token={token}",
        f"--password=pw-{token}",
        "--token",
        f"raw-{token}",
        f"WEBHOOK=https://oapi.dingtalk.com/robot/send?access_token={token}",
        "--data",
        f"https://bucket.example.com/train.tar?X-Amz-Signature={token}",
        "--epochs",
        "3",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    with mindwatch.Monitor(tmp_path / "exp", {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)
    text = (tmp_path / "exp" / "run.json").read_text(encoding="utf-8")
    assert token not in text
    assert json.loads(text)["argv"] == [
        "train.py",
        "--url",
        "***",
        "--password=***",
        "--token",
        "***",
        "WEBHOOK=***",
        "--data",
        "https://bucket.example.com/train.tar?X-Amz-Signature=***",
        "--epochs",
        "3",
    ]


def test_what_counts_as_a_secret() -> None:
    """The module's rules, one line each (see mindwatch.common.redact)."""
    assert redact_url("http://u:pw@gw:9091/x") == "http://***@gw:9091/x"
    assert redact_url("https://h/p?a=1&b=2#frag") == "https://h/p?a=***&b=***#***"
    slack = "https://hooks.slack.com/services/T0AB12CD3/B0AB12CD3/abcDEF123ghiJKL456mnoPQR"
    assert redact_url(slack) == "https://hooks.slack.com/services/T0AB12CD3/B0AB12CD3/***"
    assert redact_url("https://example.com/datasets/wikitext") == (
        "https://example.com/datasets/wikitext"
    )
    assert redact_text("push to user:pw@gw:9091 failed.") == "push to ***@gw:9091 failed."
    assert redact_argv(["--max_tokens", "512", "--tokenizer", "t", "--author", "me"]) == [
        "--max_tokens",
        "512",
        "--tokenizer",
        "t",
        "--author",
        "me",
    ]
    assert redact_argv(['--cfg={"secret": "s1", "lr": 1}', "password: p1", "+api_key=k1"]) == [
        '--cfg={"secret": "***", "lr": 1}',
        "password: ***",
        "+api_key=***",
    ]


# Secrets as a user's are: URL-safe characters (a query value or password in a URL is
# URL-encoded by whoever wrote it), alphanumeric in a URL path (Slack's, Feishu's).
# A fixed prefix keeps a drawn secret from being found by chance in unrelated bytes.
SAFE = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~", min_size=8)
ANY = st.text(st.characters(codec="utf-8", exclude_characters="\n\r\x00"), min_size=8)
PATH = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=30)


@st.composite
def planted(draw: Any) -> tuple[list[str], dict[str, Any], list[str]]:
    """(argv, config, the secrets in them): each form of secret once, values drawn."""
    s = [f"Sx7{draw(SAFE)}" for _ in range(7)] + [f"Sx7{draw(ANY)}" for _ in range(3)]
    path_token = f"Sx7{draw(PATH)}"
    argv = [
        "train.py",
        "--webhook",
        f"https://oapi.dingtalk.com/robot/send?access_token={s[0]}",
        f"--url=https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key={s[1]}",
        "--api-key",
        s[7],
        f"--password={s[8]}",
        f"NOTIFY_URL=https://open.feishu.cn/open-apis/bot/v2/hook/{path_token}",
        "--data",
        f"https://reader:{s[2]}@data.example.com/set",
        "--lr",
        "0.1",
    ]
    config = {
        "print_every": 0,
        "hparams": {"api_key": s[9], "dataset": f"https://h.example.com/d?sig={s[3]}"},
        "alerts": {
            "notify": [
                {"kind": "dingtalk", "url": f"{CLOSED}/robot/send?access_token={s[4]}"},
                {"kind": "slack", "url": f"{CLOSED}/services/T0/B0/{path_token}"},
                {"kind": "feishu", "url": f"{CLOSED}/hook/x", "secret": s[5]},
            ],
            "delivery": {"timeout": 1.0, "retries": 0},
        },
        "prometheus": {
            "push": {"url": f"http://pusher:{s[6]}@127.0.0.1:1", "timeout": 1.0, "every_secs": None}
        },
    }
    return argv, config, [*s, path_token]


@settings(
    # A real run with notifiers per example, ~0.15 s: 25 examples in ~4 s, each with all
    # twelve forms of secret at once and new values (and characters) for each.
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=planted())
def test_no_secret_from_argv_or_the_config_is_stored_or_printed(
    case: tuple[list[str], dict[str, Any], list[str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    argv, config, secrets = case
    with tempfile.TemporaryDirectory(prefix="mw-secret-") as scratch:
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            report = _run(Path(scratch) / "exp", argv, config, monkeypatch)
        texts = _stored(Path(scratch) / "exp", report, caplog.text)
        assert "could not deliver" in caplog.text  # the failures were logged: checked
        assert "pushing the Prometheus metrics to http://***@127.0.0.1:1" in caplog.text
        assert any(t.startswith("tensor mindwatch/config") for t in texts)
        assert _leaks(texts, secrets) == []
        info = json.loads((Path(scratch) / "exp" / "run.json").read_text(encoding="utf-8"))
        assert info["argv"][:3] == ["train.py", "--webhook", "***"]
        assert info["hparams"]["dataset"] == "https://h.example.com/d?sig=***"


def test_a_command_line_that_is_not_utf8_is_recorded_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python decodes argv bytes that are not UTF-8 to lone surrogates; writing them
    into run.json failed Monitor() with UnicodeEncodeError."""
    monkeypatch.setattr(sys, "argv", ["train.py", "--data", "/data/caf\udce9"])
    config = {"print_every": 0, "hparams": {"data": "/data/caf\udce9"}}
    with mindwatch.Monitor(tmp_path / "exp", config) as mon:
        mon.log_step(1, loss=1.0)
    info = json.loads((tmp_path / "exp" / "run.json").read_text(encoding="utf-8"))
    assert info["argv"] == ["train.py", "--data", "/data/caf\udce9"]  # as JSON escapes it
    assert info["hparams"] == {"data": "/data/caf?"}
    reads_back(tmp_path / "exp", {"train/loss": [(1, 1.0)]})
