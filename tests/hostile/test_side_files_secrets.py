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
from mindwatch.common.redact import redact_argv, redact_text, redact_url, redact_value
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
        text = acc.SummaryMetadata(tag).plugin_data.plugin_name == "text"
        for event in acc.Tensors(tag):  # other plugins' tensors (the layout) are protos
            data = b"".join(event.tensor_proto.string_val)
            texts[f"tensor {tag}"] = data.decode() if text else data.decode("latin-1")
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
    s += [f"Sx7{draw(SAFE)} {draw(SAFE)}" for _ in range(4)]  # two words: a whole value
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
        "--header",
        f"Authorization: Bearer {s[10]}",
        f'--extra={{"password": "{s[11]}"}}',
        f"password={s[12]}",
        "--lr",
        "0.1",
    ]
    config = {
        "print_every": 0,
        "hparams": {
            "api_key": s[9],
            "dataset": f"https://h.example.com/d?sig={s[3]}",
            "header": f"Authorization: Bearer {s[13]}",
        },
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
    # sixteen forms of secret at once and new values (and characters) for each.
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


# --------------------------------------------- the whole value (review, item 4)


def test_the_whole_value_under_a_secrets_name_is_masked() -> None:
    """The value ended at the first space: ``Authorization: Bearer abc`` was kept whole,
    ``{"password": "hunter two"}`` became ``"*** two"``."""
    assert redact_text("Authorization: Bearer abcdefabcdef") == "Authorization: ***"
    assert redact_text('{"password": "hunter two", "lr": 0.1}') == '{"password": "***", "lr": 0.1}'
    assert redact_text("{'password': 'it\\'s two words'}") == "{'password': '***'}"
    assert redact_text("login failed: password=hunter two, user=me") == (
        "login failed: password=***, user=me"
    )
    assert redact_text("db:\n  password: hunter two\n  port: 5432") == (
        "db:\n  password: ***\n  port: 5432"
    )
    assert redact_text("Cookie: session=abc; csrf=def") == "Cookie: ***"
    assert redact_text('Authorization: Digest username="u", response="6629fae4"') == (
        "Authorization: ***"
    )
    assert redact_text("sent with Bearer abcdefgh12345678 to the hook") == (
        "sent with Bearer *** to the hook"
    )
    assert redact_argv(
        [
            "train.py",
            "--header",
            "Authorization: Bearer S3cretPw",
            "-H",
            "Authorization: Basic dXNlcjpodW50ZXIgdHdv",
            '--extra={"password": "hunter two"}',
            "password=hunter two",
            "--extra=password: hunter two, still",
            "--hf_token",
            "-x9YabcXYZ123",
            "--lr",
            "0.1",
        ]
    ) == [
        "train.py",
        "--header",
        "Authorization: ***",
        "-H",
        "Authorization: ***",
        '--extra={"password": "***"}',
        "password=***",
        "--extra=password: ***",  # to the end of the argument: the shell kept it one
        "--hf_token",
        "***",
        "--lr",
        "0.1",
    ]


def test_a_masked_text_stays_as_it_is_when_masked_again() -> None:
    """run.json's strings are masked twice (at the source, and when written)."""
    for text in [
        "Authorization: ***",
        "sent with Bearer *** to the hook",
        '{"password": "***", "lr": 0.1}',
        "https://h/p?access_token=*** and more, token=***",
        "password=**********",
    ]:
        assert redact_text(text) == text


def test_a_header_given_on_the_command_line_stays_out_of_run_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["train.py", "--header", "Authorization: Bearer S3cretPw", "password=hunter two"]
    monkeypatch.setattr(sys, "argv", argv)
    config = {"print_every": 0, "hparams": {"note": '{"password": "hunter two"}'}}
    with mindwatch.Monitor(tmp_path / "exp", config) as mon:
        mon.log_step(1, loss=1.0)
    text = (tmp_path / "exp" / "run.json").read_text(encoding="utf-8")
    for secret in ("S3cretPw", "hunter", "two"):
        assert secret not in text
    info = json.loads(text)
    assert info["argv"] == ["train.py", "--header", "Authorization: ***", "password=***"]
    assert info["hparams"]["note"] == '{"password": "***"}'
    reads_back(tmp_path / "exp", {"train/loss": [(1, 1.0)]})


NAMES_OF_SECRETS = st.sampled_from(
    ["password", "api_key", "hf_token", "Authorization", "access_token", "secret", "webhook"]
)
# Any printable characters but the ones that end a value (documented in
# mindwatch.common.redact): quotes for a quoted value, ``,;}`` and line ends in a text.
PHRASE = st.text(
    st.characters(
        codec="utf-8", categories=["L", "N", "P", "S", "Zs"], exclude_characters="\"',;}\\"
    ),
    min_size=1,
).map(lambda s: f"Q9{s.strip()}z")


@settings(max_examples=400, deadline=None, derandomize=True, database=None)  # ~0.5 s
@given(name=NAMES_OF_SECRETS, secret=PHRASE, scheme=st.sampled_from(["", "Bearer ", "Basic "]))
def test_a_secret_with_spaces_quotes_or_a_scheme_never_appears(
    name: str, secret: str, scheme: str
) -> None:
    forms = [
        f'{{"{name}": "{scheme}{secret}", "lr": 1}}',
        f"{{'{name}': '{scheme}{secret}'}}",
        f"{name}: {scheme}{secret}",
        f"failed, {name}={scheme}{secret}; retrying",
        f"a: 1\n{name}: {scheme}{secret}\nb: 2",
    ]
    for text in forms:
        assert secret not in redact_text(text), text
        assert redact_text(redact_text(text)) == redact_text(text)
    argv = ["train.py", f"{name}={scheme}{secret}", f"--{name}", f"{scheme}{secret}"]
    argv += [f"--{name}={scheme}{secret}", f"--cfg={name}: {scheme}{secret}, x"]
    for arg in redact_argv(argv):
        assert secret not in arg, argv


# ------------------------------------------ storage URLs keep their paths (item 5)


@pytest.mark.parametrize("scheme", ["obs", "s3", "hdfs", "file", "gs", "OBS"])
def test_a_storage_url_keeps_its_path_but_not_its_user_info_or_query(scheme: str) -> None:
    """Token-like path segments are a webhook's (Slack, Feishu): masked only in web
    addresses. ``obs://bucket/llama2_7b_finetune_20240601/ckpt`` lost its run folder."""
    url = f"{scheme}://bucket/llama2_7b_finetune_20240601/ckpt"
    assert redact_url(url) == url
    assert redact_text(f"saving to {url}.") == f"saving to {url}."
    assert redact_url(f"{scheme}://ak:sk@bucket/qwen2_5_7b_v2/x?sig=abc#f") == (
        f"{scheme}://***@bucket/qwen2_5_7b_v2/x?sig=***#***"
    )
    assert redact_argv(["--output_dir", url]) == ["--output_dir", url]
    assert redact_value({"load_checkpoint": url}) == {"load_checkpoint": url}


@pytest.mark.parametrize("scheme", ["http", "https", "ws", "wss", "HTTPS"])
def test_a_token_in_a_web_addresss_path_is_masked(scheme: str) -> None:
    url = f"{scheme}://open.feishu.cn/open-apis/bot/v2/hook/0a1b2c3d4e5f6789abcd"
    assert redact_url(url) == f"{scheme}://open.feishu.cn/open-apis/bot/v2/hook/***"


SEGMENT = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=16, max_size=40)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)  # ~0.1 s
@given(
    scheme=st.sampled_from(["obs", "s3", "s3a", "hdfs", "file", "gs", "oss"]),
    segments=st.lists(SEGMENT, min_size=1, max_size=4),
    user=SAFE,
    query=SAFE,
)
def test_any_storage_path_is_kept_and_its_credentials_are_not(
    scheme: str, segments: list[str], user: str, query: str
) -> None:
    path = "/".join(segments)
    assert redact_url(f"{scheme}://bucket/{path}") == f"{scheme}://bucket/{path}"
    shown = redact_url(f"{scheme}://Sx7{user}:Sx7{user}@bucket/{path}?s=Sx7{query}")
    assert shown == f"{scheme}://***@bucket/{path}?s=***"
