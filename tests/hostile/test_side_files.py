"""Hostile side files (issue 20, items 4 and 5): whatever ``run.json``, ``alerts.jsonl``
or watch's state holds, no tool crashes, the real scalars are still reported, and one
warning (or doctor's finding, or exit 2 for watch's state) names the damaged file.

The run folder is written once per module by a real Monitor (20 steps, a NaN loss at
step 15, so there is an alert) and copied for each example. Every example runs the
tools that read side files in-process through click's CliRunner: report (JSON,
Markdown; HTML where alerts are drawn), doctor, compare (against the undamaged copy),
export, runs, watch --once, and in-process watch's Prometheus observer (with a poll in
the far future, so it reads run.json for the stall check) and the demo's summary.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mindwatch
from mindwatch.cli import main
from mindwatch.common.json_values import json_float
from tests.hostile.promise import (
    exit_2,
    mindwatch_warnings,
    no_traceback,
    one_warning,
    reads_back,
)
from tests.tbread import same_float32

STEPS = 20
NAN_STEP = 15
LOSSES = [(s, math.nan if s == NAN_STEP else 1.0 / s) for s in range(1, STEPS + 1)]

# Each example runs ~10 tool invocations over a 20-step run: ~0.1 s. 40 examples draw
# every kind of value at the top level and under most of the keys mindwatch writes,
# in about 4 s; derandomized, so CI runs the same examples every time.
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<root>/exp``: a real run (event files, run.json with hparams, alerts.jsonl)."""
    root = tmp_path_factory.mktemp("side-files")
    config = {"print_every": 0, "hparams": {"lr": 0.1, "optimizer": "adam"}}
    with mindwatch.Monitor(root / "exp", config) as mon:
        for step, loss in LOSSES:
            mon.log_step(step, loss=loss, lr=0.1)
    return root


@pytest.fixture
def copies(base: Path) -> Iterator[Any]:
    """A fresh copy of the run per call (hypothesis examples share one test's fixtures)."""
    with tempfile.TemporaryDirectory(prefix="mw-side-") as scratch:
        counter = iter(range(10**6))

        def copy() -> Path:
            root = Path(scratch) / f"r{next(counter)}"
            shutil.copytree(base, root, symlinks=True)
            return root

        yield copy


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{args[0]} raised {result.exception!r}: {result.output}"
    )
    no_traceback(result.output)
    assert "internal error" not in result.output, result.output
    return result


def run_tools(root: Path, base: Path) -> dict[str, Any]:
    """Every tool that reads the run's side files, on ``root``; what each said."""
    from mindwatch.mindspore.demo_summary import print_summary
    from mindwatch.tools.watch import Watcher, WatchExporter

    run = root / "exp"
    out = {
        "report": invoke("report", str(root), "--format", "json,md,html", "--out", str(root / "o")),
        "doctor": invoke("doctor", str(root)),
        "compare": invoke("compare", str(run), "--baseline", str(base / "exp")),
        "export": invoke("export", str(root), "--out", str(root / "points.csv")),
        "runs": invoke("runs", str(root)),
        "watch": invoke("watch", str(root), "--once", "--state", str(root / "state.json")),
    }
    exporter = WatchExporter(root)
    watcher = Watcher(root, observer=exporter)
    out["stalls"] = [a for a in watcher.poll(now=4e9) if a.rule == "stall"]
    exporter.close()
    print_summary(run, root, 1.0, 1)
    return out


# The exit statuses on the undamaged run: damaged side files must not change them
# (compare gates on the NaN at step 15, watch reports its alert), except doctor's, which
# says so (1).
CLEAN = {"report": 0, "doctor": 0, "compare": 1, "export": 0, "runs": 0, "watch": 1}


def test_the_undamaged_run_exits_as_expected(base: Path, copies: Any) -> None:
    results = run_tools(copies(), base)
    assert {tool: results[tool].exit_code for tool in CLEAN} == CLEAN
    assert results["stalls"] == []


def assert_real_scalars_reported(root: Path, results: dict[str, Any]) -> dict[str, Any]:
    """Exit statuses as documented, and the report holds the event files' numbers."""
    for tool, code in CLEAN.items():
        allowed = (0, 1) if tool == "doctor" else (code,)
        assert results[tool].exit_code in allowed, f"{tool}: {results[tool].output}"
    report = json.loads((root / "o" / "report.json").read_text(encoding="utf-8"))
    (facts,) = report["runs"]
    assert facts["steps"] == STEPS
    assert facts["loss"]["first"] == 1.0
    assert same_float32(facts["loss"]["final_raw"], 1.0 / STEPS)
    assert facts["loss"]["nonfinite"] == 1
    assert f"{STEPS}" in (root / "o" / "report.md").read_text(encoding="utf-8")
    reads_back(root / "exp", {"train/loss": [p for p in LOSSES if p[0] != NAN_STEP]})
    return dict(facts)


def canonical(value: Any) -> Any:
    """JSON data as the readers keep it: non-finite numbers as protobuf's strings (the
    report's JSON), integers of more than 64 digits as JSON's doubles, lone surrogates
    as ``?``."""
    if isinstance(value, float) and not math.isfinite(value):
        return json_float(value)
    if isinstance(value, int) and not isinstance(value, bool) and len(str(abs(value))) > 64:
        return canonical(float(str(value)))  # inf beyond a double, as JSON reads it
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {canonical(k): canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def warnings_naming(records: list[logging.LogRecord], path: Path) -> list[str]:
    return [w for w in mindwatch_warnings(records) if str(path) in w]


# ---------------------------------------------------------------------- strategies

MAX_INT = st.sampled_from([2**31, 2**63, -(2**63) - 1, 10**30, 10**400])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | MAX_INT
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _keys(base: Path) -> list[tuple[str | int, ...]]:
    """Every key mindwatch wrote into the base run's run.json, and some below them."""
    data = json.loads((base / "exp" / "run.json").read_text(encoding="utf-8"))
    keys: list[tuple[str | int, ...]] = [(key,) for key in data]
    keys += [("attempts", 0, key) for key in data["attempts"][0]]
    keys += [("config", "collect_freq"), ("hparams", "lr"), ("config", "alerts")]
    return keys


KEY_LIST = [
    ("format",), ("status",), ("start_time",), ("end_time",), ("host",), ("pid",),
    ("argv",), ("cwd",), ("logdir",), ("world_size",), ("rank",), ("versions",),
    ("config",), ("process",), ("attempts",), ("hparams",), ("points_dropped",),
    ("write_errors",), ("event_files",), ("event_file_bytes",), ("event_files_vanished",),
    ("steps_out_of_order",), ("alerts",), ("last_step",),
    ("steps_logged",), ("nonfinite",), ("previous_run",), ("next_runs",),
    ("attempts", 0, "pid"), ("attempts", 0, "status"), ("attempts", 0, "last_step"),
    ("attempts", 0, "host"), ("config", "collect_freq"), ("hparams", "lr"),
    ("hardware",), ("hardware", "sources"), ("ranks",), ("ranks", 0, "node"),
]  # fmt: skip
KEYS = st.sampled_from(KEY_LIST)


def _put(data: Any, key: tuple[str | int, ...], value: Any) -> Any:
    node = data
    for part in key[:-1]:
        node = node[part]
    node[key[-1]] = value
    return data


def under(*pairs: Any) -> tuple[list[tuple[Any, Any]]]:
    """``content`` for values placed under keys: ``under(("hparams",), [1, 2], ...)``."""
    return (list(zip(pairs[::2], pairs[1::2])),)


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")  # ensure_ascii: lone surrogates as \ud800


def test_the_strategy_covers_every_key_mindwatch_writes(base: Path) -> None:
    """KEYS is written out for hypothesis; it must not fall behind what the writer writes."""
    assert {k for k in _keys(base) if len(k) == 1} <= set(KEY_LIST)


# ---------------------------------------------------------------------- run.json


@PROPERTY
@given(
    content=st.one_of(
        st.tuples(st.lists(st.tuples(KEYS, JSON), min_size=1, max_size=3)),  # under keys
        JSON.map(_dumps),  # any JSON value as the whole file
        st.binary(max_size=200),  # any bytes
    )
)
@example(content=b"\xff\xfe\x00binary\n")
@example(content=b"[" * 100_000)
@example(content=b'{"status": "finished", "last_step": ' + b"9" * 5000 + b"}")
@example(content=under(("hparams",), [1, 2], ("config",), "x"))
@example(content=under(("status",), 3, ("attempts",), {"a": 1}, ("world_size",), "4"))
@example(content=under(("nonfinite",), [1], ("hparams", "lr"), "\ud800", ("pid",), 2**40))
def test_any_run_json_never_breaks_a_tool(
    content: Any, base: Path, copies: Any, caplog: pytest.LogCaptureFixture
) -> None:
    root = copies()
    path = root / "exp" / "run.json"
    if isinstance(content, tuple):  # values placed under keys of the real run.json
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, value in content[0]:
            _put(data, key, value)
        content = _dumps(data)
    path.write_bytes(content)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        results = run_tools(root, base)
    facts = assert_real_scalars_reported(root, results)
    assert facts["status"] in (None, "running", "finished", "failed", "terminated")
    assert isinstance(facts["hparams"], dict)
    assert isinstance(facts["world_size"], int)
    named = warnings_naming(caplog.records, path)
    assert len(named) <= 1, named  # at most one warning per file, whoever reads it
    try:
        whole = json.loads(content)
    except (ValueError, RecursionError):
        whole = None
    if not isinstance(whole, dict):  # not a JSON object: said, by the reader and doctor
        assert len(named) == 1, mindwatch_warnings(caplog.records)
        assert str(path) in results["doctor"].output
        assert results["doctor"].exit_code == 1


def test_hparams_a_list_and_config_a_string_are_named_and_the_rest_read(
    base: Path, copies: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 4: report and doctor crashed (AttributeError) on these."""
    root = copies()
    path = root / "exp" / "run.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(hparams=[1, 2], config="x", world_size="4", status="finished")
    path.write_text(json.dumps(data), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        results = run_tools(root, base)
    facts = assert_real_scalars_reported(root, results)
    assert facts["status"] == "finished"  # the good keys are still read
    assert facts["hparams"] == {}
    (warning,) = warnings_naming(caplog.records, path)
    assert "hparams: an array, not an object" in warning
    assert "config: a string, not an object" in warning
    assert "world_size: a string, not an integer" in warning
    doctor = results["doctor"]
    assert doctor.exit_code == 1
    assert f"{path}: world_size: a string, not an integer" in doctor.output


def test_a_fifo_or_a_folder_named_run_json_blocks_nothing(
    base: Path, copies: Any, caplog: pytest.LogCaptureFixture
) -> None:
    for make in (os.mkfifo, os.mkdir):
        root = copies()
        path = root / "exp" / "run.json"
        path.unlink()
        make(path)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            results = run_tools(root, base)
        assert_real_scalars_reported(root, results)
        (warning,) = warnings_naming(caplog.records, path)
        assert "is a FIFO" in warning or "is a directory" in warning


# ---------------------------------------------------------------------- alerts.jsonl

ALERT_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "rule": SCALARS,
        "severity": st.sampled_from(["info", "warning", "critical", "fatal", 2]),
        "metric": SCALARS,
        "step": SCALARS,
        "message": SCALARS,
        "value": SCALARS,
        "rank": SCALARS,
    },
)
LINES = st.lists(
    st.one_of(
        st.just("good"),  # the run's real alert line
        ALERT_VALUES.map(_dumps),  # an object whose fields may have wrong types
        JSON.map(_dumps),  # any JSON value
        st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),  # any bytes
    ),
    max_size=8,
)


@PROPERTY
@given(lines=LINES)
@example(lines=[b"\xff\xfe\x00\x01binary", "good"])
@example(lines=[b"[" + b"2" * 320 + b"]", b'{"step": ' + b"9" * 5000 + b"}", "good"])
@example(lines=["good", b'{"rule": "x", "severity": "info", "metric": "m", "step": "3"}'])
@example(lines=[b'{"rule": "x", "severity": "fatal", "metric": "m", "step": 3, "message": ""}'])
@example(lines=[b'{"rule": "x", "severity": "info", "metric": "m", "step": 3, "value": null}'])
def test_any_alerts_jsonl_keeps_its_good_lines(
    lines: list[Any], base: Path, copies: Any, caplog: pytest.LogCaptureFixture
) -> None:
    root = copies()
    path = root / "exp" / "alerts.jsonl"
    good = path.read_bytes().rstrip(b"\n")
    written = [good if line == "good" else line for line in lines]
    path.write_bytes(b"".join(line + b"\n" for line in written))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        results = run_tools(root, base)
    facts = assert_real_scalars_reported(root, results)
    kept = facts["alerts"]
    real = canonical(json.loads(good))
    assert [a for a in kept if a == real] == [real] * lines.count("good")
    # every kept alert is a line of the file, in order; the others were counted
    texts = [line for line in written if line.strip()]
    position, bad = 0, []
    for number, line in enumerate(written, start=1):
        if not line.strip():
            continue
        try:
            same = position < len(kept) and canonical(json.loads(line)) == kept[position]
        except ValueError:
            same = False
        if same:
            position += 1
        else:
            bad.append(number)
    assert position == len(kept)
    assert len(bad) == len(texts) - len(kept)
    named = warnings_naming(caplog.records, path)
    if bad:
        (warning,) = named
        assert f"{len(bad)} bad line(s) skipped (the first: line {bad[0]}: " in warning
    else:
        assert named == []


def test_a_binary_alerts_jsonl_is_reported_not_a_crash(
    base: Path, copies: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 5: report crashed (UnicodeDecodeError) on this."""
    root = copies()
    path = root / "exp" / "alerts.jsonl"
    good = path.read_bytes()
    path.write_bytes(b"\xff\xfe\x00\x01" + os.urandom(64).replace(b"\n", b"") + b"\n" + good)
    with caplog.at_level(logging.WARNING):
        results = run_tools(root, base)
    facts = assert_real_scalars_reported(root, results)
    assert [a["rule"] for a in facts["alerts"]] == ["nonfinite"]  # the good line is kept
    (warning,) = warnings_naming(caplog.records, path)
    assert "1 bad line(s) skipped (the first: line 1: not UTF-8 (byte 1))" in warning
    assert "nonfinite" in (root / "o" / "report.html").read_text(encoding="utf-8")


def test_a_last_line_still_being_written_is_not_damage(
    base: Path, copies: Any, caplog: pytest.LogCaptureFixture
) -> None:
    root = copies()
    path = root / "exp" / "alerts.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"rule": "spike", "sev')  # the writer is half-way through a line
    with caplog.at_level(logging.WARNING):
        results = run_tools(root, base)
    assert [a["rule"] for a in assert_real_scalars_reported(root, results)["alerts"]] == [
        "nonfinite"
    ]
    assert warnings_naming(caplog.records, path) == []


# ---------------------------------------------------------------------- watch's state

STATES = st.one_of(
    st.binary(max_size=100),
    JSON.map(_dumps),
    st.dictionaries(st.sampled_from(["version", "runs"]), JSON).map(_dumps),
    st.fixed_dictionaries(
        {
            "version": st.just(1),
            "runs": st.dictionaries(
                st.sampled_from(["exp", "other"]),
                st.dictionaries(
                    st.sampled_from(
                        ["offsets", "plugins", "engine", "last_wall", "last_step", "stalled"]
                    ),
                    JSON,
                ),
            ),
        }
    ).map(_dumps),
)


@settings(PROPERTY, max_examples=200)  # watch --once alone: ~5 ms each, 200 in ~1.5 s
@given(state=STATES)
@example(state=b'{"version": 1, "runs": {"exp": {"offsets": "x"}}}')
@example(state=b'{"version": 1, "runs": {"exp": {"engine": {"rules": {"spike": 3}}}}}')
@example(state=b'{"version": 1, "runs": {"exp": {"offsets": {"../../x": 10000000000000000000}}}}')
def test_any_watch_state_is_used_or_named(state: bytes, base: Path, copies: Any) -> None:
    """A state watch cannot trust is exit 2 naming it (and the fix); never a traceback."""
    root = copies()
    path = root / "state.json"
    path.write_bytes(state)
    result = invoke("watch", str(root), "--once", "--state", str(path))
    assert result.exit_code in (0, 1, 2)
    if result.exit_code == 2:
        exit_2(result, str(path), "delete it to start over")


def test_a_watch_state_of_the_wrong_shape_is_exit_2(base: Path, copies: Any) -> None:
    """offsets a string crashed watch --once with a traceback (AttributeError)."""
    root = copies()
    path = root / "state.json"
    path.write_text('{"version": 1, "runs": {"exp": {"offsets": "x"}}}', encoding="utf-8")
    result = CliRunner().invoke(main, ["watch", str(root), "--once", "--state", str(path)])
    text = exit_2(result, str(path))
    assert "runs.exp.offsets: a string, not an object" in text


# ---------------------------------------------------------------------- writing over one

QUIET = {"print_every": 0, "alerts": {"enabled": False}}


def _train(folder: Path, steps: range, **kwargs: Any) -> None:
    with mindwatch.Monitor(folder, QUIET, **kwargs) as mon:
        for step in steps:
            mon.log_step(step, loss=1.0 / step)


def test_a_resume_over_a_damaged_run_json_starts_afresh_and_keeps_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The damaged file is kept as run.json.damaged; the new one keeps the attempt that
    could be read, and says what it could not."""
    folder = tmp_path / "exp"
    _train(folder, range(1, 11))
    path = folder / "run.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["attempts"][0]["process"] = "an earlier process"  # not this one's
    data["attempts"].append("garbage")
    data["hparams"] = [1, 2]
    path.write_text(json.dumps(data), encoding="utf-8")
    damaged = path.read_bytes()
    with caplog.at_level(logging.WARNING):
        _train(folder, range(11, 21), resume_step=11)
    warning = one_warning(caplog.records, str(path), "run.json.damaged")
    assert "attempts.1: a string, not an object; hparams: an array, not an object" in warning
    assert "this run writes a fresh one, keeping 1 earlier attempt(s)" in warning
    assert (folder / "run.json.damaged").read_bytes() == damaged
    info = json.loads(path.read_text(encoding="utf-8"))
    assert info["status"] == "finished"
    assert [(a["last_step"], a["resumed_at"]) for a in info["attempts"]] == [(10, None), (20, 11)]
    reads_back(folder, {"train/loss": [(s, 1.0 / s) for s in range(1, 21)]})


@settings(PROPERTY, max_examples=40)  # a Monitor per example (~25 ms): 40 in ~1 s
@given(content=st.one_of(JSON.map(_dumps), st.binary(max_size=100)))
@example(content=b"\xff\xfe\x00binary")
def test_any_run_json_under_a_resumed_run_is_never_made_worse(
    content: bytes, copies: Any, caplog: pytest.LogCaptureFixture
) -> None:
    folder = copies() / "exp"
    path = folder / "run.json"
    path.write_bytes(content)
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING),
        mindwatch.Monitor(folder, QUIET, resume_step=STEPS + 1) as m,
    ):
        m.log_step(STEPS + 1, loss=0.5)
    info = json.loads(path.read_text(encoding="utf-8"))
    assert info["status"] == "finished"
    assert info["attempts"][-1]["resumed_at"] == STEPS + 1
    kept = folder / "run.json.damaged"
    try:
        whole = json.loads(content)
    except (ValueError, RecursionError):
        whole = None
    if not isinstance(whole, dict):
        assert kept.exists()
    if kept.exists():  # what it held is all still there, and said once
        assert kept.read_bytes() == content
        assert len(warnings_naming(caplog.records, path)) == 1
    points = [p for p in LOSSES if p[0] != NAN_STEP] + [(STEPS + 1, 0.5)]
    reads_back(folder, {"train/loss": points})


def test_a_new_run_next_to_a_damaged_one_only_adds_its_link(tmp_path: Path) -> None:
    """link_runs rewrites the earlier run.json with next_runs and nothing else changed:
    what the schema refused or does not know stays as it was."""
    folder = tmp_path / "exp"
    _train(folder, range(1, 6))
    path = folder / "run.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(hparams=[1, 2], custom={"from": "another tool"}, next_runs="x")
    path.write_text(json.dumps(data), encoding="utf-8")
    _train(folder, range(1, 6))  # not a resume: a new folder next to it
    after = json.loads(path.read_text(encoding="utf-8"))
    assert after == {**data, "next_runs": [str(tmp_path / "exp-2")]}
    assert json.loads((tmp_path / "exp-2" / "run.json").read_text())["previous_run"] == str(folder)


def test_a_path_with_a_nul_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    """os.open raised ValueError ("embedded null byte"), which escaped read_side_file."""
    from mindwatch.common.side_files import read_side_file

    found = read_side_file(tmp_path / "a\0b" / "run.json", 1000)
    assert found.data is None
    assert found.problem == "cannot be opened (its path holds a NUL character)"
