"""``mindwatch compare``'s outputs for CI and its baselines: JUnit XML read back by a JUnit
library, the JSON verdict per check, several baselines on the command line or as a
folder, ``--save-baseline`` and the "what changed" table from the runs' ``run.json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner, Result
from examples.compare_jitter import written_run
from junitparser import Failure, JUnitXml, Skipped

from mindwatch.cli import main
from mindwatch.tools.compare import (
    Check,
    RunData,
    checks_lines,
    display_name,
    load_runs,
    report_junit,
)


def compare(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["compare", *args], env=env)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("job")
    runs = {f"seed{s}": written_run(root / f"seed{s}", s, jitter=0.1) for s in range(4)}
    runs["slow"] = written_run(root / "slow", 9, jitter=0.1, speed=0.6)
    return runs


def test_junit_xml_is_read_by_a_junit_library(job: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "compare.xml"
    result = compare(str(job["slow"]), "--baseline", str(job["seed0"]), "--junit-xml", str(out))
    assert result.exit_code == 1, result.output
    xml = JUnitXml.fromfile(str(out))
    (suite,) = list(xml)
    assert suite.name == "mindwatch compare"
    cases = {case.name: case for case in suite}
    assert set(cases) == {
        "final loss",
        "loss at matched step",
        "throughput (samples_per_s)",
        "step time (ms)",
    }
    assert suite.tests == 4
    assert suite.failures == 2
    failed = {
        name for name, case in cases.items() if any(isinstance(r, Failure) for r in case.result)
    }
    assert failed == {"throughput (samples_per_s)", "step time (ms)"}
    message = next(r for r in cases["step time (ms)"].result if isinstance(r, Failure)).message
    assert "limit" in message
    assert "median of 540 steps" in message
    assert cases["final loss"].is_passed
    # a skipped check is a skipped test case
    (tmp_path / "noperf").mkdir()
    import mindwatch

    with mindwatch.Monitor(tmp_path / "noperf", {"print_every": 0}) as mon:
        for step in range(1, 101):
            mon.log_scalars(step, {"train/loss": 1.0 / step})
    compare(
        str(tmp_path / "noperf"), "--baseline", str(tmp_path / "noperf"), "--junit-xml", str(out)
    )
    (suite,) = list(JUnitXml.fromfile(str(out)))
    skipped = [c.name for c in suite if any(isinstance(r, Skipped) for r in c.result)]
    assert skipped == ["throughput", "step time (ms)"]


def test_json_has_each_checks_statistic_noise_limit_and_verdict(job: dict[str, Path]) -> None:
    result = compare(str(job["slow"]), "--baseline", str(job["seed0"]), "--json", "-")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["passed"] is False
    assert data["baselines"] == [str(job["seed0"])]
    by_name = {c["name"]: c for c in data["checks"]}
    throughput = by_name["throughput (samples_per_s)"]
    assert throughput["status"] == "regression"
    assert throughput["statistic"] == "median of 540 steps"
    assert throughput["set_by"] == "tolerance"  # +-10 % jitter: the error is below the floor
    assert 0 < throughput["noise"] < 0.01
    assert throughput["limit"] == pytest.approx(throughput["baseline"] * 0.9)
    assert by_name["final loss"]["status"] == "ok"
    assert by_name["final loss"]["set_by"] in ("standard error", "tolerance")
    assert by_name["final loss"]["sigmas"] == 3.5


def test_several_baselines_by_flag_or_folder(job: dict[str, Path], tmp_path: Path) -> None:
    flags = [a for s in ("seed0", "seed1", "seed2") for a in ("--baseline", str(job[s]))]
    by_flag = compare(str(job["seed3"]), *flags, "--json", "-")
    assert by_flag.exit_code == 0, by_flag.output
    data = json.loads(by_flag.output)
    assert len(data["baselines"]) == 3
    assert {c["set_by"] for c in data["checks"]} <= {"baselines", "standard error", "tolerance"}
    table = compare(str(job["seed3"]), *flags)
    assert "noise: the spread of 3 baseline runs" in table.output
    # a folder of runs is a set of baselines
    folder = tmp_path / "nightly"
    folder.mkdir()
    for s in ("seed0", "seed1", "seed2"):
        shutil.copytree(job[s], folder / s)
    by_folder = json.loads(
        compare(str(job["seed3"]), "--baseline", str(folder), "--json", "-").output
    )
    assert sorted(Path(b).name for b in by_folder["baselines"]) == ["seed0", "seed1", "seed2"]
    assert by_folder["checks"] == data["checks"]
    slow = compare(str(job["slow"]), "--baseline", str(folder))
    assert slow.exit_code == 1
    assert "regression: throughput (samples_per_s), step time (ms)" in slow.output


def test_save_baseline_then_compare_by_name(job: dict[str, Path], tmp_path: Path) -> None:
    store = tmp_path / "baselines"
    env = {"MINDWATCH_BASELINES": str(store)}
    first = compare(str(job["seed0"]), "--save-baseline", "nightly", env=env)
    assert first.exit_code == 0, first.output
    assert f"saved as baseline 'nightly' in {store / 'nightly'} (1 run)" in first.output
    saved = store / "nightly" / "seed0"
    assert (saved / "run.json").is_file()
    assert [p.name for p in saved.iterdir() if "tfevents" in p.name]
    # A passing run joins the set; a regression never does.
    second = compare(
        str(job["seed1"]), "--baseline", "nightly", "--save-baseline", "nightly", env=env
    )
    assert second.exit_code == 0, second.output
    assert "(2 runs)" in second.output
    slow = compare(str(job["slow"]), "--baseline", "nightly", "--save-baseline", "nightly", env=env)
    assert slow.exit_code == 1
    assert "not saved as baseline 'nightly': the run has regressions" in slow.output
    assert sorted(p.name for p in (store / "nightly").iterdir()) == ["seed0", "seed1"]
    # --keep trims to the newest; the set compares as its runs
    third = compare(
        str(job["seed2"]),
        "--save-baseline",
        "nightly",
        "--keep",
        "2",
        "--baselines-dir",
        str(store),
    )
    assert "dropped the oldest: seed0" in third.output
    assert sorted(p.name for p in (store / "nightly").iterdir()) == ["seed1", "seed2"]
    named = compare(str(job["seed3"]), "--baseline", "nightly", "--json", "-", env=env)
    assert len(json.loads(named.output)["baselines"]) == 2
    unknown = compare(str(job["seed3"]), "--baseline", "weekly", env=env)
    assert unknown.exit_code == 2
    assert "--save-baseline weekly" in unknown.output


def test_what_changed_between_runs(tmp_path: Path) -> None:
    import mindwatch

    def run(folder: Path, lr: float) -> Path:
        with mindwatch.Monitor(folder, {"print_every": 0}) as mon:
            mon.log_hparams({"lr": lr, "batch_size": 32, "model": "mlp"})
            for step in range(1, 101):
                mon.log_scalars(step, {"train/loss": 1.0 / step})
        return folder

    base, new = run(tmp_path / "base", 0.1), run(tmp_path / "new", 0.05)
    result = compare(str(new), "--baseline", str(base))
    lines = result.output.splitlines()
    assert lines[0] == "warning: the run differs from its baseline in its config:"
    assert lines[1].split() == ["what", "changed", "baseline", "run"]
    assert lines[2].split() == ["lr", "0.1", "0.05"]
    assert lines[3] == ""  # only the one key that differs
    data = json.loads(compare(str(new), "--baseline", str(base), "--json", "-").output)
    assert data["changes"] == [{"kind": "config", "key": "lr", "baseline": [0.1], "run": 0.05}]
    hashes = {data["facts"]["run"]["config_hash"], data["facts"]["baselines"][0]["config_hash"]}
    assert len(hashes) == 2
    assert None not in hashes
    assert data["facts"]["run"]["device"] is None or isinstance(data["facts"]["run"]["device"], str)
    same = compare(str(base), "--baseline", str(base))
    assert "what changed" not in same.output


def test_the_table_speaks_chinese_under_a_chinese_locale(job: dict[str, Path]) -> None:
    from mindwatch.common.i18n import set_language

    try:
        set_language("zh")
        result = compare(str(job["slow"]), "--baseline", str(job["seed0"]))
    finally:
        set_language(None)
    assert result.exit_code == 1
    assert "回归：吞吐量 (samples_per_s), 单步耗时（毫秒）" in result.output
    assert "最终损失" in result.output
    assert "界限：容差" in result.output
    # JSON keeps the names programs match on
    data = json.loads(
        compare(str(job["slow"]), "--baseline", str(job["seed0"]), "--json", "-").output
    )
    assert "final loss" in {c["name"] for c in data["checks"]}


def test_what_changed_names_versions_device_and_world_size(tmp_path: Path) -> None:
    import mindwatch

    with mindwatch.Monitor(tmp_path / "base", {"print_every": 0}) as mon:
        for step in range(1, 101):
            mon.log_scalars(step, {"train/loss": 1.0 / step})
    new = tmp_path / "new"
    shutil.copytree(tmp_path / "base", new)
    record = json.loads((new / "run.json").read_text())
    record["versions"]["mindspore"] = "2.9.0"
    record["versions"]["mindformers"] = "1.9.0"
    record["world_size"] = 8
    record["ranks"] = [{"rank": 0, "node": "n0", "device": "Ascend", "device_id": 0}]
    (new / "run.json").write_text(json.dumps(record))
    result = compare(str(new), "--baseline", str(tmp_path / "base"))
    assert result.exit_code == 0, result.output  # a difference is not a failure
    lines = result.output.splitlines()
    assert lines[0] == (
        "warning: the run differs from its baseline in MindSpore version, "
        "MindFormers version, device kind, world size:"
    )
    rows = [line.split() for line in lines[2:6]]
    assert rows == [
        ["MindSpore", "version", "2.10.0", "2.9.0"],
        ["MindFormers", "version", "(not", "set)", "1.9.0"],
        ["device", "kind", "(not", "set)", "Ascend"],
        ["world", "size", "1", "8"],
    ]
    assert lines[6] == ""


def test_a_run_in_its_baseline_folder_is_not_its_own_baseline(
    job: dict[str, Path], tmp_path: Path
) -> None:
    folder = tmp_path / "all"
    for name in ("seed0", "seed1", "seed2"):
        shutil.copytree(job[name], folder / name)
    result = compare(str(folder / "seed2"), "--baseline", str(folder), "--json", "-")
    data = json.loads(result.output)
    assert sorted(Path(b).name for b in data["baselines"]) == ["seed0", "seed1"]
    # --json - with --save-baseline: stdout stays JSON, the save is told on stderr
    store = tmp_path / "store"
    saved = compare(
        str(job["seed3"]),
        *("--baseline", str(folder), "--json", "-"),
        *("--save-baseline", "n", "--baselines-dir", str(store)),
    )
    assert json.loads(saved.stdout)["passed"] is True
    assert "saved as baseline 'n'" in saved.stderr


def _check(name: str, status: str, **values: object) -> Check:
    fields: dict[str, object] = {"baseline": 2.0, "run": 2.5, "limit": 2.25, "detail": "why"}
    fields.update(values)
    return Check(name=name, status=status, **fields)  # type: ignore[arg-type]


def test_junit_counts_and_attributes_are_the_checks(tmp_path: Path) -> None:
    # One regression, one skipped and two passing checks of four: every count differs, so
    # a count of the wrong status cannot pass. Parsed with ElementTree, attribute by
    # attribute, as a CI report tool reads them.
    import pandas as pd

    checks = [
        _check("final loss", "regression", baseline=2.0, run=2.5, limit=2.25),
        _check("loss at matched step", "ok", baseline=1.0, run=1.01, limit=1.1),
        _check("throughput", "skipped", baseline=None, run=None, limit=None, detail="no perf"),
        _check("step time (ms)", "ok", baseline=100.0, run=101.0, limit=110.0),
    ]
    empty = pd.DataFrame({"tag": [], "step": [], "value": []})
    run = RunData(tmp_path / "run", empty, {})
    bases = [RunData(tmp_path / "b1", empty, {}), RunData(tmp_path / "b2", empty, {})]
    body = report_junit(checks, run, bases)
    assert body.startswith(b"<?xml version='1.0' encoding='utf-8'?>\n")
    assert body.endswith(b"\n")
    root = ET.fromstring(body)
    assert root.tag == "testsuites"
    assert root.attrib == {"tests": "4", "failures": "1"}
    (suite,) = list(root)
    assert suite.tag == "testsuite"
    assert suite.attrib == {
        "name": "mindwatch compare",
        "tests": "4",
        "failures": "1",
        "errors": "0",
        "skipped": "1",
    }
    properties = suite.find("properties")
    assert properties is not None
    assert [(p.tag, p.attrib) for p in properties] == [
        ("property", {"name": "run", "value": str(tmp_path / "run")}),
        ("property", {"name": "baseline", "value": str(tmp_path / "b1")}),
        ("property", {"name": "baseline", "value": str(tmp_path / "b2")}),
    ]
    cases = suite.findall("testcase")
    assert [c.attrib for c in cases] == [
        {"name": c.name, "classname": "mindwatch.compare", "time": "0"} for c in checks
    ]
    failed, passed, skipped, passed_too = ([(e.tag, e.attrib, e.text) for e in c] for c in cases)
    summary = "baseline 2, run 2.5, limit 2.25; why"
    assert failed == [("failure", {"message": summary, "type": "regression"}, summary)]
    assert passed == [("system-out", {}, "baseline 1, run 1.01, limit 1.1; why")]
    assert skipped == [("skipped", {"message": "no perf"}, None)]
    assert passed_too == [("system-out", {}, "baseline 100, run 101, limit 110; why")]


def test_a_missing_value_shows_as_a_dash_in_the_junit_summary(tmp_path: Path) -> None:
    import pandas as pd

    empty = pd.DataFrame({"tag": [], "step": [], "value": []})
    check = _check("eval/acc", "ok", baseline=0.912345678, run=None, limit=0.8)
    body = report_junit([check], RunData(tmp_path, empty, {}), [RunData(tmp_path, empty, {})])
    out = ET.fromstring(body).find("testsuite/testcase/system-out")
    assert out is not None
    assert out.text == "baseline 0.91235, run -, limit 0.8; why"


def test_check_names_are_translated_in_the_table_but_not_elsewhere() -> None:
    from mindwatch.common.i18n import set_language

    names = {
        "final loss": "最终损失",
        "loss at matched samples": "按样本数对齐的损失",
        "loss at matched tokens": "按 token 数对齐的损失",
        "throughput (samples_per_s)": "吞吐量 (samples_per_s)",
        "step time (ms)": "单步耗时（毫秒）",
        "eval/acc": "eval/acc",  # a tag is shown as logged
    }
    set_language("zh")
    try:
        assert {name: display_name(name) for name in names} == names
        assert display_name("loss at matched step") != "loss at matched step"
    finally:
        set_language(None)
    assert {name: display_name(name) for name in names} == {name: name for name in names}


def test_a_folder_of_runs_lists_each_run_once_not_its_rank_sub_runs(tmp_path: Path) -> None:
    # Two runs, each with per-rank sub-runs (rank_<r>/, as an msrun job leaves): the
    # folder is a set of two baselines, not six.
    import mindwatch
    from mindwatch.events.writer import EventFileWriter

    for name in ("a", "b"):
        with mindwatch.Monitor(tmp_path / name, {"print_every": 0}) as mon:
            for step in range(1, 21):
                mon.log_scalars(step, {"train/loss": 1.0 / step})
        for rank in (0, 1):
            with EventFileWriter(tmp_path / name / f"rank_{rank}") as writer:
                writer.add_scalar("train/loss", 1.0, 1)
    runs = load_runs(tmp_path)
    assert sorted(r.folder for r in runs) == [tmp_path / "a", tmp_path / "b"]
    assert all(set(r.frame["run"]) == {r.folder.name} for r in runs)


def test_the_table_has_a_column_per_value_and_each_detail_below_its_row() -> None:
    # Values of different widths: the baseline and run columns are right-aligned, the
    # change column left-aligned; text in brackets is shown as given, not read as markup.
    checks = [
        _check("final loss", "regression", baseline=2.0, run=2.5, limit=2.25, detail="[b]x[/b]"),
        _check("eval/acc[top1]", "ok", baseline=0.5, run=1012.25, limit=0.45, detail=""),
        _check("throughput", "skipped", baseline=None, run=None, limit=None, detail="no perf"),
    ]
    lines = checks_lines(checks)
    assert [line.split() for line in lines] == [
        ["check", "baseline", "run", "change", "limit", "result"],
        ["final", "loss", "2", "2.5", "+25.0%", "2.25", "REGRESSION"],
        ["[b]x[/b]"],
        ["eval/acc[top1]", "0.5", "1012.2", "+202350.0%", "0.45", "ok"],
        ["throughput", "-", "-", "-", "-", "skipped"],
        ["no", "perf"],
    ]
    heading, first, detail, second, _skipped, _reason = lines
    assert detail == "    [b]x[/b]"  # a check without detail has no detail line

    def end(line: str, word: str) -> int:
        return line.index(f" {word} ") + len(word) + 1

    assert end(heading, "baseline") == end(first, "2") == end(second, "0.5")
    assert end(heading, "run") == end(first, "2.5") == end(second, "1012.2")
    assert heading.index(" change") == first.index(" +25.0%") == second.index(" +202350.0%")
    # wrapped to a width: every line fits, each detail line indented by four
    long = _check("final loss", "ok", detail="median of the last 120 points; limit: tolerance")
    wrapped = checks_lines([long], width=40)
    assert all(len(line) <= 40 for line in wrapped)
    assert len(wrapped) > 3
    assert all(line.startswith("    ") for line in wrapped[2:])
    assert " ".join(line.strip() for line in wrapped[2:]) == long.detail
    assert checks_lines([long])[2] == "    " + long.detail


def test_the_json_names_one_baseline_and_keeps_the_config_out_of_the_facts(
    tmp_path: Path,
) -> None:
    import math

    import pandas as pd

    from mindwatch.tools.compare import Tolerances, report_json

    empty = pd.DataFrame({"tag": [], "step": [], "value": []})
    facts = {"mindspore": "2.10.0", "world_size": 8, "config_hash": "abc", "config": {"lr": 1}}
    run = RunData(tmp_path / "run", empty, facts)
    bases = [RunData(tmp_path / f"b{i}", empty, dict(facts)) for i in range(3)]
    checks = [
        _check("final loss", "regression", run=math.nan),
        _check("throughput", "ok"),
    ]
    one = report_json(checks, Tolerances(), run, bases[:1])
    assert one["run"] == str(tmp_path / "run")
    assert one["baseline"] == str(tmp_path / "b0")
    assert one["baselines"] == [str(tmp_path / "b0")]
    assert one["passed"] is False
    expected = {"mindspore": "2.10.0", "world_size": 8, "config_hash": "abc"}
    assert one["facts"] == {"run": expected, "baselines": [expected]}
    assert one["checks"][0]["run"] == "nan"  # JSON has no NaN
    assert one["checks"][1] == {
        "name": "throughput",
        "baseline": 2.0,
        "run": 2.5,
        "limit": 2.25,
        "status": "ok",
        "detail": "why",
        "noise": None,
        "set_by": None,
        "statistic": "",
        "sigmas": None,
        "change": 0.25,
    }
    three = report_json(checks[1:], Tolerances(), run, bases)
    assert three["baseline"] is None
    assert three["baselines"] == [str(tmp_path / f"b{i}") for i in range(3)]
    assert three["passed"] is True
    assert three["facts"]["baselines"] == [expected] * 3


def test_a_save_that_cannot_write_is_a_clear_error(tmp_path: Path) -> None:
    # The baselines folder is a file: nothing can be created below it; the error names the
    # run, the set and the folder (not a traceback of the clean-up), and the file stays.
    import mindwatch
    from mindwatch.tools.compare import CompareError, save

    run = tmp_path / "run"
    with mindwatch.Monitor(run, {"print_every": 0}) as mon:
        mon.log_scalars(1, {"train/loss": 1.0})
    blocked = tmp_path / "baselines"
    blocked.write_text("not a folder\n")
    with pytest.raises(CompareError) as caught:
        save(run, "nightly", blocked)
    assert str(caught.value).startswith(
        f"cannot save '{run}' as baseline 'nightly' in '{blocked}': "
    )
    assert blocked.read_text() == "not a folder\n"


def test_a_config_key_one_side_lacks_shows_as_not_set() -> None:
    from mindwatch.tools.compare import Change, changes

    run = {"mindspore": "2.10.0", "config": {"lr": 0.1, "warmup": 100}}
    bases = [
        {"mindspore": "2.10.0", "config": {"lr": 0.1, "dropout": 0.1}},
        {"mindspore": "2.10.0", "config": {"lr": 0.2}},
        {"mindspore": "2.10.0", "config": {"lr": 0.1, "dropout": 0.1}},
    ]
    assert changes(run, bases) == [
        Change("config", "dropout", (0.1, None), None),
        Change("config", "lr", (0.1, 0.2), 0.1),
        Change("config", "warmup", (None,), 100),
    ]
    assert [c.to_dict()["baseline"] for c in changes(run, bases)] == [
        [0.1, None],
        [0.1, 0.2],
        [None],
    ]


def test_an_unreadable_tolerances_file_is_named_in_the_error(tmp_path: Path) -> None:
    from mindwatch.tools.compare import CompareError, load_tolerances

    broken = tmp_path / "tol.yaml"
    broken.write_text("loss_rtol: [1\n")
    with pytest.raises(CompareError) as caught:
        load_tolerances(broken, {})
    assert str(caught.value).startswith(f"cannot read tolerances: '{broken}' is not valid YAML")
    result = compare(str(tmp_path), "--baseline", str(tmp_path), "--tolerances", str(broken))
    assert result.exit_code == 2
    assert f"cannot read tolerances: '{broken}' is not valid YAML" in result.output


def _events(folder: Path, last: int = 20) -> Path:
    from mindwatch.events.writer import EventFileWriter

    with EventFileWriter(folder) as writer:
        for step in range(1, last + 1):
            writer.add_scalar("train/loss", 1.0 / step, step)
    return folder


def test_a_folder_mixing_two_runs_is_refused_with_the_command_that_splits_it(
    tmp_path: Path,
) -> None:
    from mindwatch.tools.compare import CompareError, load_run

    mixed = _events(_events(tmp_path / "mixed", 50), 40)
    second = sorted(p.name for p in mixed.iterdir() if "tfevents" in p.name)[1]
    with pytest.raises(CompareError) as caught:
        load_run(mixed)
    assert str(caught.value) == (
        f"'{mixed}': 2 runs mixed in one folder: steps 1-50 (1 file), steps 1-40 (1 file). "
        f"Compare one run, not their mix; to split the folder: mkdir {tmp_path / 'mixed-2'} "
        f"&& mv {mixed / second} {tmp_path / 'mixed-2'}/"
    )


@pytest.mark.parametrize("count", [2, 5, 6])
def test_a_folder_of_several_runs_is_not_one_run(tmp_path: Path, count: int) -> None:
    from mindwatch.tools.compare import CompareError, load_run

    for i in range(count):
        _events(tmp_path / f"r{i}", 5)
    with pytest.raises(CompareError) as caught:
        load_run(tmp_path)
    names = ", ".join(f"r{i}" for i in range(min(count, 5)))
    more = "..." if count > 5 else ""
    assert str(caught.value) == f"'{tmp_path}' holds {count} runs ({names}{more}); pass one of them"


def test_a_run_whose_files_hold_fewer_steps_than_it_logged_is_compared_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import mindwatch
    from mindwatch.common.invocation import command_line
    from mindwatch.tools.compare import load_run

    run = tmp_path / "run"
    with mindwatch.Monitor(run, {"print_every": 0}) as mon:
        for step in range(1, 21):
            mon.log_scalars(step, {"train/loss": 1.0 / step})
    record = json.loads((run / "run.json").read_text())
    record.update(last_step=30, steps_logged=30)
    (run / "run.json").write_text(json.dumps(record))
    caplog.set_level(logging.WARNING, logger="mindwatch")
    loaded = load_run(run)
    assert loaded.folder == run
    assert sorted(set(loaded.frame["step"])) == list(range(1, 21))
    assert [r.getMessage() for r in caplog.records] == [
        f"mindwatch: {run}: run.json says the run finished at step 30 after logging 30 steps, "
        "but its event files hold 20 steps, up to step 20; the comparison uses what they hold "
        f"(`{command_line('doctor', run)}` says why)"
    ]


def test_the_device_kind_is_the_ranks_else_the_hardware_probes() -> None:
    from mindwatch.run.record import RunRecord
    from mindwatch.tools.compare.facts import facts

    probed = {"hardware": {"sources": {"device": "Ascend910B"}}, "world_size": 8}
    assert facts(RunRecord.model_validate(probed))["device"] == "Ascend910B"
    ranks = [{"rank": r, "node": "n0", "device": d} for r, d in enumerate(["GPU", "Ascend", "GPU"])]
    assert facts(RunRecord.model_validate({**probed, "ranks": ranks}))["device"] == "Ascend,GPU"
    assert facts(RunRecord.model_validate({"hardware": {"sources": {}}}))["device"] is None
