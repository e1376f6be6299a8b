"""`make mutation` (scripts/mutation.py): its mapping names real files and tests, its
sample is the one the docs describe, and it fails below a module's floor.

mutmut itself is not run here (hours; the `mutation` extra); the script's scoring and
its exit status are what a CI job or a developer reads, so they are pinned here."""

from __future__ import annotations

import glob
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="scripts/mutation.py reads pyproject.toml with tomllib"
)


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts/mutation.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_module_mutates_real_files_and_runs_real_tests(script: ModuleType) -> None:
    settings, modules = script.load_settings(ROOT / "pyproject.toml")
    names = {m.name for m in modules}
    assert {"forensics", "rules", "aggregate", "tools-compare", "hardware", "summarywriter"} <= (
        names
    )
    assert {"events-write", "events-read"} <= names
    for module in modules:
        for pattern in module.mutate:
            assert glob.glob(str(ROOT / pattern)), f"{module.name}: {pattern} matches nothing"
        for skipped in module.skip:
            assert (ROOT / skipped).is_file(), f"{module.name}: skip {skipped} is no file"
        for arg in module.tests:
            if not arg.startswith("-"):
                assert (ROOT / arg).exists(), f"{module.name}: tests {arg} does not exist"
        for test in module.deselect:
            path, _, name = test.partition("::")
            assert name in (ROOT / path).read_text(encoding="utf-8"), test
        assert 0.0 <= module.floor <= 1.0
    assert settings["sample"] == "0"


def test_the_sample_is_the_mutants_whose_number_ends_in_the_digits(script: ModuleType) -> None:
    assert script.in_sample("m.x__f__mutmut_10", "0")
    assert not script.in_sample("m.x__f__mutmut_11", "0")
    assert script.in_sample("m.x__f__mutmut_15", "05")
    assert script.in_sample("m.x__f__mutmut_7", "all")
    assert script.sample_patterns("0") == ["*__mutmut_*[0]"]
    assert script.sample_patterns("all") == []


def test_a_bad_floor_is_refused_with_the_module_named(script: ModuleType, tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[tool.mindwatch.mutation]\nsample = '0'\n"
        "[tool.mindwatch.mutation.modules.rules]\n"
        "mutate = ['src/x.py']\ntests = ['tests']\nfloor = 76\n",
        encoding="utf-8",
    )
    with pytest.raises(SystemExit, match=r"modules\.rules\.floor = 76 .*from 0 to 1"):
        script.load_settings(pyproject)


def _score(script: ModuleType, name: str, killed: int, survived: int) -> object:
    statuses = {f"m.x__f__mutmut_{i}0": "killed" for i in range(killed)}
    statuses |= {f"m.x__g__mutmut_{i}0": "survived" for i in range(survived)}
    return script.Score(name, statuses, 60.0)


def test_the_report_flags_exactly_the_modules_below_their_floor(
    script: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = {
        "low": script.Module("low", ["a"], ["t"], floor=0.80),
        "equal": script.Module("equal", ["a"], ["t"], floor=0.75),
        "high": script.Module("high", ["a"], ["t"], floor=0.50),
    }
    scores = [
        _score(script, "low", killed=79, survived=21),
        _score(script, "equal", killed=3, survived=1),
        _score(script, "high", killed=9, survived=1),
    ]
    assert script.report(scores, mapping) == ["low"]
    lines = capsys.readouterr().out.splitlines()
    low = next(line for line in lines if line.startswith("low"))
    columns = ["low", "79/100", "79.0%", "80.0%", "21", "0", "0", "0", "1.0m", "BELOW", "FLOOR"]
    assert low.split() == columns
    assert not any("BELOW" in line for line in lines if line.startswith(("equal", "high")))


def test_make_mutation_exits_1_below_a_floor_and_0_at_it(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last run's verdicts, scored again with --report-only against two floors."""
    work = tmp_path / "build" / "mutation"
    (work / "rules" / "mutants").mkdir(parents=True)
    (work / "rules" / "run.json").write_text(json.dumps({"seconds": 90, "sample": "0"}))
    verdicts = {"r.x__a__mutmut_10": "killed", "r.x__b__mutmut_20": "survived"}
    verdicts |= {"r.x__c__mutmut_30": "killed", "r.x__d__mutmut_40": "killed"}
    monkeypatch.setattr(script, "WORK", work)
    monkeypatch.setattr(script, "statuses", lambda folder, digits: dict(verdicts))
    monkeypatch.setattr(script, "write_survivors", lambda score, folder, out: None)

    def with_floor(floor: float) -> int:
        pyproject = tmp_path / "pyproject.toml"
        pyproject.write_text(
            "[tool.mindwatch.mutation]\nsample = '0'\n"
            "[tool.mindwatch.mutation.modules.rules]\n"
            f"mutate = ['src/x.py']\ntests = ['tests']\nfloor = {floor}\n",
            encoding="utf-8",
        )
        monkeypatch.setattr(script, "ROOT", tmp_path)
        return int(script.main(["--report-only", "rules"]))

    assert with_floor(0.76) == 1  # 3 of 4 killed: 75 %
    assert with_floor(0.75) == 0
