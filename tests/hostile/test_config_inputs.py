"""Numbers and files users hand the config (issue 20, items 1, 2 and 6, monitor_on).

Every numeric field of ``MonitorConfig`` and its nested settings, found from the models
themselves (a new field is covered without touching this file), at and beyond its
bounds and with hostile values, either is refused with a ``ConfigError`` naming its key
path, or gives a config a Monitor logs and closes with; a YAML file in any encoding is
read or refused naming the file, never a ``UnicodeDecodeError``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import types
import typing
from pathlib import Path
from typing import Any, Union

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import mindwatch
from mindwatch.config import (
    ConfigError,
    MonitorConfig,
    NotifierSettings,
    PrometheusSettings,
    PushSettings,
)
from tests.hostile.promise import config_error, mindwatch_warnings, one_warning, reads_back

# ------------------------------------------------------------------ the fields


# A minimal valid body for each nested model that has required keys (checked below, so
# a new such model makes the test fail with this table to extend).
BASES: dict[type[BaseModel], dict[str, Any]] = {
    PrometheusSettings: {"port": 0},
    PushSettings: {"url": "http://127.0.0.1:9/"},  # nothing listens: a push is a warning
    NotifierSettings: {
        "kind": "email",
        "host": "127.0.0.1",
        "sender": "a@b.test",
        "recipients": ["c@d.test"],
    },
}

Path_ = tuple[Union[str, int], ...]


def _members(annotation: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(annotation)
    if origin is Union or origin is getattr(types, "UnionType", ()):
        return typing.get_args(annotation)
    return (annotation,)


def _model_of(member: Any) -> tuple[type[BaseModel], bool] | None:
    """The model a member annotation holds, and whether it is a list of them."""
    if isinstance(member, type) and issubclass(member, BaseModel):
        return member, False
    if typing.get_origin(member) is list:
        (inner,) = typing.get_args(member)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner, True
    return None


def numeric_fields(
    model: type[BaseModel] = MonitorConfig, path: Path_ = ()
) -> list[tuple[Path_, Any, str]]:
    """``(key path, FieldInfo, 'int' or 'float')`` of every numeric field, recursively."""
    found = []
    for name, field in model.model_fields.items():
        members = _members(field.annotation)
        if any(m is float for m in members):
            found.append(((*path, name), field, "float"))
        elif any(m is int for m in members):
            found.append(((*path, name), field, "int"))
        for member in members:
            nested = _model_of(member)
            if nested is not None:
                inner, is_list = nested
                found += numeric_fields(inner, (*path, name, 0) if is_list else (*path, name))
    return found


FIELDS = numeric_fields()
KEYS = [".".join(map(str, p)) for p, _, _ in FIELDS]


def config_with(path: Path_, value: Any) -> dict[str, Any]:
    """A config dict that sets ``path`` to ``value`` (with the bases its models need)."""
    root: dict[str, Any] = {"print_every": 0}
    node: Any = root
    model: type[BaseModel] = MonitorConfig
    for part in path[:-1]:
        if isinstance(part, int):  # the first element of a list of models
            child = dict(BASES.get(model, {}))
            node.append(child)
            node = child
            continue
        field = model.model_fields[part]
        model, is_list = next(n for n in map(_model_of, _members(field.annotation)) if n)
        child = [] if is_list else dict(BASES.get(model, {}))
        node[part] = child
        node = child
    node[path[-1]] = value
    return root


def test_fields_are_found_and_every_nested_model_can_be_built() -> None:
    assert {"flush_secs", "max_block_secs", "aggregate_timeout", "max_queue"} <= set(KEYS)
    assert {"alerts.stall.seconds", "alerts.delivery.timeout", "alerts.delivery.backoff"} <= set(
        KEYS
    )
    assert {"prometheus.push.every_secs", "prometheus.linger_secs", "alerts.notify.0.port"} <= set(
        KEYS
    )
    for path, _, _ in FIELDS:  # each model on the way builds from its base (or from
        model: type[BaseModel] = MonitorConfig  # nothing): a new required key shows here
        for part in path[:-1]:
            if isinstance(part, str):
                field = model.model_fields[part]
                model = next(n for n in map(_model_of, _members(field.annotation)) if n)[0]
                model.model_validate(BASES.get(model, {}))


DURATION = re.compile(r"secs|seconds|timeout|backoff")


def test_every_duration_has_an_upper_bound_and_says_so() -> None:
    durations = [(p, f) for p, f, k in FIELDS if k == "float" and DURATION.search(str(p[-1]))]
    assert len(durations) >= 9
    for path, field in durations:
        bounds = [getattr(m, a) for m in field.metadata for a in ("le", "lt") if hasattr(m, a)]
        assert bounds, f"{path} has no upper bound"
        assert max(bounds) < threading.TIMEOUT_MAX, path
        assert f"{max(bounds):g}" in (field.description or ""), (path, field.description)


def _bounds(field: Any, kind: str) -> list[Any]:
    """The field's bounds, and the values just inside and outside each."""
    values: list[Any] = []
    for meta in field.metadata:
        for attr in ("gt", "ge", "lt", "le"):
            bound = getattr(meta, attr, None)
            if bound is None:
                continue
            if kind == "int":
                values += [int(bound) - 1, int(bound), int(bound) + 1]
            else:
                values += [
                    float(bound),
                    math.nextafter(float(bound), -math.inf),
                    math.nextafter(float(bound), math.inf),
                ]
    return values


HOSTILE = [
    0, 0.0, -1, -0.5, -(10**30), 10**30, 10**400, -(10**400), 2**63 - 1, 2**63, -(2**63),
    math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, True, False,
    "1", "0.5", "1e3", "nan", "inf", "-inf", "10**3", " 7 ", "1_000",
]  # fmt: skip


def field_and_value() -> st.SearchStrategy[tuple[Path_, str, Any]]:
    def values(index: int) -> st.SearchStrategy[tuple[Path_, str, Any]]:
        path, field, kind = FIELDS[index]
        pool = st.sampled_from(HOSTILE + _bounds(field, kind))
        generic = st.integers() if kind == "int" else st.floats()
        return st.tuples(st.just(path), st.just(kind), st.one_of(pool, pool, generic))

    return st.integers(0, len(FIELDS) - 1).flatmap(values)


def _accepted(path: Path_, value: Any) -> Any:
    """The config built with ``value`` at ``path``, or None if it is refused; a refusal
    must be a ConfigError naming the key path."""
    key = ".".join(map(str, path))
    try:
        config = MonitorConfig.from_dict(config_with(path, value))
    except ConfigError as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        assert key in refused, f"{key} not named in: {refused}"
        return None
    node: Any = config
    for part in path:
        node = node[part] if isinstance(part, int) else getattr(node, part)
    return node


# 400 examples: every field (about 60) several times over its bounds and the hostile
# values; a config costs well under a millisecond to validate, so this takes ~1 s.
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(field_and_value())
def test_every_numeric_field_refuses_or_keeps_a_sane_value(case: tuple[Path_, str, Any]) -> None:
    path, kind, value = case
    got = _accepted(path, value)
    if got is None:
        return
    assert not isinstance(got, bool)
    if kind == "float" and isinstance(got, float):
        assert math.isfinite(got), (path, value, got)
        if DURATION.search(str(path[-1])):
            assert got < threading.TIMEOUT_MAX
    if isinstance(got, int):
        assert -(2**63) <= got < 2**63, (path, value, got)


def _runs(tmp_path: Path, path: Path_, value: Any) -> None:
    """A Monitor with the config logs three steps and closes; they read back."""
    config = config_with(path, value)
    folder = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    done: dict[str, Any] = {}
    every = MonitorConfig.from_dict(config).collect_freq  # the steps it records
    steps = [k * every for k in (1, 2, 3) if k * every < 2**63]

    def train() -> None:
        with mindwatch.Monitor(folder, config) as mon:
            for step in steps:
                mon.log_step(step, loss=1.0 / step)
            mon.close(timeout=10)  # bounds lingering and pushes (prometheus.linger_secs)
        done["ok"] = True

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    thread.join(120)  # a hang detector, not a timing: a healthy run takes ~0.1 s
    assert done.get("ok"), f"a Monitor with {config} did not finish"
    assert json.loads((folder / "run.json").read_text())["status"] == "finished"
    reads_back(folder, {"train/loss": [(step, 1.0 / step) for step in steps]})


# 40 examples that the config accepts, each a real Monitor (~50 ms to build, ~100 ms to
# read back): every run-time use of an extreme but valid value gets a few seconds.
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
@given(field_and_value())
def test_an_accepted_value_gives_a_monitor_that_logs_and_closes(
    tmp_path: Path, case: tuple[Path_, str, Any]
) -> None:
    path, _, value = case
    assume(_accepted(path, value) is not None)
    _runs(tmp_path, path, value)


@pytest.mark.parametrize(
    ("path", "value"),
    [(("flush_secs",), 3600.0), (("max_block_secs",), 600.0), (("max_queue",), 1)],
)
def test_values_at_the_bounds_run(tmp_path: Path, path: Path_, value: Any) -> None:
    _runs(tmp_path, path, value)


# ------------------------------------------------------------------ items 1 and 2


@pytest.mark.parametrize("value", [1e10, math.inf, threading.TIMEOUT_MAX * 2, 3600.5])
def test_a_flush_delay_beyond_an_hour_is_refused_before_training(
    tmp_path: Path, value: float
) -> None:
    with pytest.raises(ConfigError) as info:
        mindwatch.Monitor(tmp_path, {"flush_secs": value})
    config_error(info, "flush_secs")
    assert not list(tmp_path.glob("events.out.tfevents.*"))  # nothing started


def test_an_infinite_flush_delay_in_yaml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("flush_secs: .inf\nalerts:\n  stall:\n    seconds: .nan\n")
    with pytest.raises(ConfigError) as info:
        MonitorConfig.from_yaml(path)
    config_error(info, "flush_secs", "alerts.stall.seconds", "finite", str(path))


def test_a_training_thread_wait_beyond_its_bound_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        mindwatch.Monitor(tmp_path, {"max_block_secs": 1e10, "max_queue": 10})
    config_error(info, "max_block_secs", "600")


# ------------------------------------------------------------------ monitor_on


def _mindformers(tmp_path: Path, on: Any) -> MonitorConfig:
    path = tmp_path / "mf.yaml"
    path.write_text(
        "monitor_config:\n"
        f"  monitor_on: {json.dumps(on)}\n"
        "  step_interval: 5\n"
        "  local_norm_format: ['tensorboard']\n",
        encoding="utf-8",
    )
    return MonitorConfig.from_yaml(path)


@pytest.mark.parametrize("off", ["False", "false", "no", "off", "0", "OFF", " No ", 0, None])
def test_monitor_on_written_as_a_string_false_means_off(tmp_path: Path, off: Any) -> None:
    assert _mindformers(tmp_path, off).layer_norms_every is None


@pytest.mark.parametrize("on", ["True", "true", "yes", "on", "1", 1, True])
def test_monitor_on_written_as_a_string_true_means_on(tmp_path: Path, on: Any) -> None:
    assert _mindformers(tmp_path, on).layer_norms_every == 5


@pytest.mark.parametrize("bad", ["maybe", "Flase", 2, [True], {"on": True}])
def test_monitor_on_that_is_no_boolean_names_the_key(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        _mindformers(tmp_path, bad)
    config_error(info, "monitor_config.monitor_on", "true or false")


# ------------------------------------------------------------------ item 6: encodings

CHINESE = "# 训练监控配置（中文注释）\nrun_name: 实验一\nprint_every: 7\n"


@pytest.mark.parametrize(
    "encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be+bom", "utf-32", "utf-32-be+bom"]
)
def test_unicode_yaml_in_any_encoding_with_a_bom_is_read(
    tmp_path: Path, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cfg.yaml"
    if encoding.endswith("+bom"):
        path.write_bytes("\ufeff".encode(encoding[:-4]) + CHINESE.encode(encoding[:-4]))
    else:
        path.write_bytes(CHINESE.encode(encoding))
    config = MonitorConfig.from_yaml(path)
    assert (config.run_name, config.print_every) == ("实验一", 7)
    assert not mindwatch_warnings(caplog.records)


@pytest.mark.parametrize("encoding", ["gbk", "gb18030", "gb2312"])
def test_a_gbk_yaml_is_read_with_one_warning_naming_the_file(
    tmp_path: Path, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "windows.yaml"
    path.write_bytes(CHINESE.encode(encoding))
    config = MonitorConfig.from_yaml(path)
    assert (config.run_name, config.print_every) == ("实验一", 7)
    one_warning(caplog.records, str(path), "GB18030", "UTF-8")
    with mindwatch.Monitor(tmp_path / "runs", path) as mon:  # and a Monitor takes it
        mon.log_step(1, loss=0.5)
    (folder,) = (tmp_path / "runs").iterdir()  # the run_name's folder
    reads_back(folder, {"train/loss": [(1, 0.5)]})


def test_an_undecodable_yaml_is_an_error_naming_file_position_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes("print_every: 7\nrun_name: café\n".encode("latin-1"))  # é then \n
    with pytest.raises(ConfigError) as info:
        mindwatch.Monitor(tmp_path / "runs", path)
    config_error(info, str(path), "byte 28", "line 2", "UTF-8")


def test_utf16_without_a_bom_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nobom.yaml"
    path.write_bytes(CHINESE.encode("utf-16-le"))
    with pytest.raises(ConfigError) as info:
        MonitorConfig.from_yaml(path)
    config_error(info, str(path), "NUL", "UTF-16", "UTF-8")


ENCODED = [
    CHINESE.encode("utf-8"),
    CHINESE.encode("utf-8-sig"),
    CHINESE.encode("utf-16"),
    CHINESE.encode("utf-32"),
    CHINESE.encode("gbk"),
    CHINESE.encode("gb18030"),
    "# café, déjà vu\nprint_every: 7\nrun_name: Zoë\n".encode("latin-1"),
]


def _mutated(data: bytes, at: int, junk: bytes) -> bytes:
    at %= len(data) + 1
    return data[:at] + junk + data[at:]


# 150 examples: the encodings above whole, cut, and with junk inserted, and random bytes
# (with and without a BOM in front); each read costs ~0.3 ms, so ~1 s in all.
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.one_of(
        st.sampled_from(ENCODED),
        st.builds(lambda d, n: d[:n], st.sampled_from(ENCODED), st.integers(0, 80)),
        st.builds(
            _mutated,
            st.sampled_from(ENCODED),
            st.integers(0, 100),
            st.binary(min_size=1, max_size=8),
        ),
        st.binary(max_size=200),
        st.builds(
            lambda bom, body: bom + body,
            st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xff\xfe\x00\x00"]),
            st.binary(max_size=60),
        ),
    )
)
def test_yaml_bytes_are_read_or_refused_naming_the_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any.yaml"
    path.write_bytes(data)
    logging.getLogger("mindwatch").disabled = True  # a GBK read warns; not the point here
    message = ""
    try:
        MonitorConfig.from_yaml(path)
    except ConfigError as exc:  # anything else (UnicodeDecodeError...) fails the test
        message = str(exc)
    finally:
        logging.getLogger("mindwatch").disabled = False
    assert not message or str(path) in message, message
