"""Which names hold secrets (review of issue 20, item 1): the rules must mask every
secret and nothing else.

The first version masked any name with a word ending in token, key or url, and turned
numbers into the string ``***``: MindFormers' own ``pad_token_id``,
``num_key_value_heads`` and ``sort_key`` showed as ``***`` in TensorBoard's HPARAMS,
run.json and the config TEXT tab, and a checkpoint's ``obs://bucket/<run name>/`` lost
its folder name. Here every name MindFormers 1.9 has (its configs' YAML keys, its config
classes' fields, tests/fixtures/mindformers-1.9-config-names.txt) is checked, and a real
Monitor's HPARAMS, run.json and TEXT tab are read back. The names of the installed
MindFormers itself are checked in tests/mindformers/test_secret_names.py, whose venv
that suite builds.
"""

from __future__ import annotations

import ast
import glob
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.plugins.hparams import plugin_data_pb2

import mindwatch
from mindwatch.common.redact import redact_argv, redact_text, redact_value, secret_name
from tests.hostile.promise import reads_back
from tests.tbread import accumulator

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "mindformers-1.9-config-names.txt"

# The names of MindFormers 1.9 that ARE judged secrets' names, and why.
SECRETS_OF_MINDFORMERS = {
    "hub_token": "TrainingArguments.hub_token: the token that pushes to the model hub",
    "remote_save_url": (
        "a *_url name: masked whole, except that a storage URL (obs://, s3://) is shown "
        "with its path, by the URL rules (tested below)"
    ),
}


def fixture_names() -> list[str]:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def mindformers_names(site: str) -> set[str]:
    """Every name of the installed MindFormers: YAML keys of its configs, fields and
    ``__init__`` parameters of its ``*Config`` / ``*Arguments`` / ``*Args`` classes."""
    names: set[str] = set()

    def walk(data: Any) -> None:
        if isinstance(data, dict):
            for key, value in data.items():
                names.add(str(key))
                walk(value)
        elif isinstance(data, list):
            for item in data:
                walk(item)

    for path in glob.glob(f"{site}/configs/**/*.yaml", recursive=True) + glob.glob(
        f"{site}/mindformers/configs/**/*.yaml", recursive=True
    ):
        with open(path, encoding="utf-8") as file:
            for document in yaml.safe_load_all(file):
                walk(document)
    for path in glob.glob(f"{site}/mindformers/**/*.py", recursive=True):
        with warnings.catch_warnings():  # its sources' invalid escapes are not ours
            warnings.simplefilter("ignore")
            tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name.endswith(
                ("Config", "Arguments", "Args")
            ):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        names.update(a.arg for a in item.args.args + item.args.kwonlyargs)
    names.discard("self")
    return names


def test_the_fixture_holds_mindformers_names() -> None:
    names = fixture_names()
    assert len(names) > 600
    for name in (
        "pad_token_id",
        "num_key_value_heads",
        "construct_args_key",
        "max_position_embeddings",
    ):
        assert name in names


def test_no_name_of_mindformers_is_a_secret_but_the_listed_ones() -> None:
    judged = {name for name in fixture_names() if secret_name(name)}
    assert judged == set(SECRETS_OF_MINDFORMERS)


NOT_SECRETS = [
    *["pad_token", "eos_token_id", "pad_token_id", "num_key_value_heads", "construct_args_key"],
    *["sort_key", "max_tokens", "moe_token_dispatcher_type", "tokenizer", "tokens", "keys"],
    *["author", "monkey", "primary_key", "key_size", "eosTokenId", "numKeyValueHeads"],
    *["model.pad_token", "ignore_token_id", "use_past", "url_env", "webhook_url_env"],
    *["tokens_per_sample", "token_budget", "key_value_cache", "hub_model_id", "push_to_hub"],
    *["access_key_id", "hf_token_path", "secret_env", "authority", "curly"],
]
SECRETS = [
    *["password", "PASSWORD", "db_password", "passwd", "user_pwd", "pwd", "passphrase"],
    *["secret", "client_secret", "AWS_SECRET_ACCESS_KEY", "secret_key", "secretKey"],
    *["api_key", "apiKey", "API_KEY", "APIKey", "x-api-key", "X-Api-Key", "apikey", "APIKEY"],
    *["openai_api_key", "OPENAI_API_KEY", "WANDB_API_KEY", "wandb_key", "SWANLAB_API_KEY"],
    *["token", "TOKEN", "key", "KEY", "--token", "hf_token", "HF_TOKEN", "hftoken"],
    *["HUGGING_FACE_HUB_TOKEN", "hub_token", "github_token", "GITHUB_TOKEN", "GH_TOKEN"],
    *["access_token", "accessToken", "accesstoken", "auth_token", "authToken", "authtoken"],
    *["apitoken", "refresh_token", "bearer_token", "session_token", "AWS_SESSION_TOKEN"],
    *["private_key", "privateKey", "privatekey", "accesskey", "signing_key", "license_key"],
    *["master_key", "encryption_key", "ssh_key", "bot_token", "dingtalk_token", "api_keys"],
    *["feishu_secret", "slack_token", "wecom_key", "lark_token", "api_key_2", "hf_token2"],
    *["credentials", "credential", "cookie", "session_cookie", "Cookie", "Set-Cookie"],
    *["webhook", "webhook_url", "dingtalk_webhook", "url", "notify_url", "URL", "base_url"],
    *["dsn", "sentry_dsn", "database_url", "redis_uri", "authorization", "Authorization"],
    *["Proxy-Authorization", "http_auth", "basic_auth", "auth", "oauth", "obs_sk"],
    *["alerts.notify.0.url", "alerts.notify[0].url", "alerts.notify.0.secret", "hub.token"],
    *["wandb.key", "model.hf_token", "+api_key", "数据库密码", "访问令牌"],
]


@pytest.mark.parametrize("name", NOT_SECRETS)
def test_not_a_secrets_name(name: str) -> None:
    assert not secret_name(name)


@pytest.mark.parametrize("name", SECRETS)
def test_a_secrets_name(name: str) -> None:
    assert secret_name(name)
    assert redact_value({name: "s3cr3t-value"}) == {name: "***"}


def test_numbers_are_kept_under_any_name_but_a_passwords() -> None:
    """A secret is text: a count, an id, a flag is not; YAML reads ``password: 123456``
    as a number, so under a password's name a number is masked."""
    data = {"api_key": 5, "token": [1, 2.5], "hub_token": None, "auth": True, "url": 0}
    assert redact_value(data) == data
    assert redact_value({"password": 123456, "secret": 7.5, "db_pwd": [1]}) == {
        "password": "***",
        "secret": "***",
        "db_pwd": ["***"],
    }


def test_a_storage_url_under_a_url_name_keeps_its_path() -> None:
    data = {
        "remote_save_url": "obs://bucket/llama2_7b_finetune_20240601/ckpt",
        "dataset_url": "s3://reader:pw@bucket/qwen2_5_7b_instruct_v2/x?X-Amz-Signature=abc",
        "notify_url": "https://oapi.dingtalk.com/robot/send?access_token=abc",
        "webhook_url": "obs://bucket/a",  # a webhook's name: masked whole all the same
    }
    assert redact_value(data) == {
        "remote_save_url": "obs://bucket/llama2_7b_finetune_20240601/ckpt",
        "dataset_url": "s3://***@bucket/qwen2_5_7b_instruct_v2/x?X-Amz-Signature=***",
        "notify_url": "***",
        "webhook_url": "***",
    }


# Names drawn from MindFormers' own (a dotted path of one to three of them, as
# flatten_hparams makes), values of every kind an hparam has.
NAMES = st.sampled_from([n for n in fixture_names() if n not in SECRETS_OF_MINDFORMERS])
VALUES = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-5, 5), max_size=3),
    st.text("abcdefghijklmnopqrstuvwxyz_-/0123456789 ", max_size=20),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)  # ~0.3 s
@given(path=st.lists(NAMES, min_size=1, max_size=3), value=VALUES)
def test_any_mindformers_name_and_value_is_never_masked(path: list[str], value: Any) -> None:
    name = ".".join(path)
    assert not secret_name(name)
    assert redact_value({name: value}) == {name: value}
    nested: Any = value
    for part in reversed(path):
        nested = {part: nested}
    assert redact_value(nested) == nested
    if isinstance(value, str) and value.strip():
        # As text in a command line or a message: name=value and name: value stay.
        assert redact_argv([f"--{name}", value, f"{name}={value}"]) == [
            f"--{name}",
            value,
            f"{name}={value}",
        ]
        assert redact_text(f"{name}: {value}") == f"{name}: {value}"


HPARAMS = {
    "model": {
        "num_key_value_heads": 8,
        "pad_token_id": 0,
        "eos_token_id": [2],
        "construct_args_key": ["input_ids", "labels"],
        "moe_token_dispatcher_type": "alltoall",
        "max_tokens": 4096,
    },
    "sort_key": "loss",
    "load_checkpoint": "s3://bucket/qwen2_5_7b_instruct/step_1000",
    "remote_save_url": "obs://bucket/llama2_7b_finetune_20240601/ckpt",
    "hub_token": "hf_Sx7qLp4Zr8wTk9x2",
}
FLAT = {
    "model.num_key_value_heads": 8,
    "model.pad_token_id": 0,
    "model.eos_token_id": "[2]",
    "model.construct_args_key": "['input_ids', 'labels']",
    "model.moe_token_dispatcher_type": "alltoall",
    "model.max_tokens": 4096,
    "sort_key": "loss",
    "load_checkpoint": "s3://bucket/qwen2_5_7b_instruct/step_1000",
    "remote_save_url": "obs://bucket/llama2_7b_finetune_20240601/ckpt",
    "hub_token": "***",
}


def test_mindformers_hparams_reach_hparams_run_json_and_the_text_tab_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["train.py", "--num_key_value_heads", "8", "--sort_key=loss"])
    config = {"print_every": 0, "hparams": {"num_key_value_heads": 8, "pad_token_id": 0}}
    with mindwatch.Monitor(tmp_path, config) as mon:
        mon.log_hparams(HPARAMS)
        mon.log_step(1, loss=1.0)
    info = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert info["hparams"] == {"num_key_value_heads": 8, "pad_token_id": 0, **FLAT}
    assert info["config"]["hparams"] == {"num_key_value_heads": 8, "pad_token_id": 0}
    assert info["argv"] == ["train.py", "--num_key_value_heads", "8", "--sort_key=loss"]
    assert "hf_Sx7qLp4Zr8wTk9x2" not in (tmp_path / "run.json").read_text(encoding="utf-8")

    acc = accumulator(tmp_path)
    shown: dict[str, Any] = {}
    for content in acc.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        if data.HasField("session_start_info"):
            for key, value in data.session_start_info.hparams.items():
                kind = value.WhichOneof("kind")
                shown[key] = getattr(value, kind)
    numbers = {k: float(v) for k, v in FLAT.items() if isinstance(v, int)}
    assert shown == {
        "num_key_value_heads": 8.0,
        "pad_token_id": 0.0,
        **FLAT,
        **numbers,  # TensorBoard's hparams hold numbers as doubles
    }
    text = {
        tag: b"".join(acc.Tensors(tag)[0].tensor_proto.string_val).decode()
        for tag in acc.Tags()["tensors"]
        if tag.startswith("mindwatch/config")
    }
    assert text, acc.Tags()
    assert all('"num_key_value_heads": 8' in t and '"pad_token_id": 0' in t for t in text.values())
    reads_back(tmp_path, {"train/loss": [(1, 1.0)]})
