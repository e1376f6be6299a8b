"""`make mutation`: mutation testing of the modules where a silent bug costs users most.

Every module listed under ``[tool.mindwatch.mutation.modules]`` in pyproject.toml is
mutated by mutmut and its mutants run against that module's OWN tests only (its
``tests``), one module after the other, so that a run stays affordable on two cores. The
module's score is killed / total; below the module's ``floor`` the run fails
(exit 1). How to read and extend it: docs/development.md, "Mutation testing".

Each module gets a work folder, ``build/mutation/<name>/``, wiped at the start of its run:
``src`` and ``tests`` are links to the checkout's (mutmut copies them into
``mutants/``), the other top-level files and folders are linked into ``mutants/`` (tests
read ``docs/`` and ``benchmarks/``), and its ``pyproject.toml`` is the checkout's with a
``[tool.mutmut]`` section for this module. mutmut puts ``mutants/src`` first on the
tests' ``sys.path``; ``PYTHONPATH`` points there too, so a test's subprocess imports the
same mutated code. After a run, ``cd build/mutation/<name> && mutmut show <mutant>``
shows any mutant, and ``mutmut browse`` browses them.

Every mutant that was not killed is written, with its diff, to
``build/mutation/<name>/survivors.txt`` (or ``--survivors-dir``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # pragma: no cover - mutmut 3 itself needs Python 3.10+
    sys.exit("make mutation: needs Python 3.11 or later (tomllib)")

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutation"
# Top-level entries of the checkout that mutmut does not copy itself but tests read.
NOT_LINKED = {"src", "tests", "pyproject.toml", "build", "site", "mutants"}


@dataclass
class Module:
    """One line of the mapping: what to mutate and which tests are its own."""

    name: str
    mutate: list[str]
    tests: list[str]
    floor: float
    skip: list[str] = field(default_factory=list)
    deselect: list[str] = field(default_factory=list)


@dataclass
class Score:
    """Counts of one module's mutants by mutmut's verdict."""

    name: str
    statuses: dict[str, str]  # mutant name -> mutmut status
    seconds: float

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses.values() if s == status)

    @property
    def total(self) -> int:
        return len(self.statuses)

    @property
    def killed(self) -> int:
        return self.count("killed")

    @property
    def score(self) -> float:
        return self.killed / self.total if self.total else 1.0


def load_settings(pyproject: Path) -> tuple[dict[str, Any], list[Module]]:
    """The ``[tool.mindwatch.mutation]`` table and its modules, checked."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    try:
        table = data["tool"]["mindwatch"]["mutation"]
    except KeyError:
        sys.exit(f"make mutation: {pyproject} has no [tool.mindwatch.mutation] table")
    settings = {k: v for k, v in table.items() if k != "modules"}
    modules = []
    for name, entry in table.get("modules", {}).items():
        unknown = set(entry) - {"mutate", "tests", "floor", "skip", "deselect"}
        missing = {"mutate", "tests", "floor"} - set(entry)
        if unknown or missing:
            sys.exit(
                f"make mutation: [tool.mindwatch.mutation.modules.{name}] in {pyproject}: "
                + (f"unknown keys {sorted(unknown)}" if unknown else "")
                + (f"missing keys {sorted(missing)}" if missing else "")
                + "; each module has mutate, tests and floor (skip, deselect optional)"
            )
        if not 0.0 <= float(entry["floor"]) <= 1.0:
            sys.exit(
                f"make mutation: modules.{name}.floor = {entry['floor']!r} in {pyproject}: "
                "a share of killed mutants, from 0 to 1"
            )
        modules.append(Module(name=name, **entry))
    return settings, modules


def mutmut_table(module: Module, settings: dict[str, Any]) -> str:
    """The ``[tool.mutmut]`` section of one module's work folder."""
    selection = list(module.tests)
    for test in module.deselect:
        selection += ["--deselect", test]
    values: dict[str, Any] = {
        "source_paths": ["src"],
        "only_mutate": module.mutate,
        "do_not_mutate": module.skip,
        "pytest_add_cli_args_test_selection": selection,
        # The same examples on every run (the tests' own Hypothesis settings stay), no
        # cache files in the checkout.
        "pytest_add_cli_args": [
            "-p",
            "no:cacheprovider",
            "--hypothesis-seed=0",
            *settings.get("pytest_args", []),
        ],
        "timeout_multiplier": float(settings.get("timeout_multiplier", 15.0)),
        "timeout_constant": float(settings.get("timeout_constant", 1.0)),
        # A fresh folder each run: nothing cached to invalidate.
        "use_git_change_detection": False,
    }
    lines = ["", "[tool.mutmut]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def prepare(module: Module, settings: dict[str, Any]) -> Path:
    """A fresh work folder for one module's run."""
    work = WORK / module.name
    if work.exists():
        shutil.rmtree(work)
    # mutants/src exists before mutmut starts: Python skips, for the whole process, a
    # PYTHONPATH entry that was missing when it started, and mutmut's own sys.path entry
    # is the same string, so the tests would import the checkout's code instead.
    (work / "mutants" / "src").mkdir(parents=True)
    (work / "src").symlink_to(ROOT / "src")
    (work / "tests").symlink_to(ROOT / "tests")
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in NOT_LINKED:
            continue
        (work / "mutants" / entry.name).symlink_to(entry)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (work / "pyproject.toml").write_text(text + mutmut_table(module, settings), encoding="utf-8")
    return work


def in_sample(name: str, digits: str) -> bool:
    """Whether mutant ``name`` (``...__mutmut_<N>``) is in the sample of the numbers
    ending in one of ``digits`` ("" or "all": every mutant)."""
    return digits in ("", "all") or name[-1] in digits


def sample_patterns(digits: str) -> list[str]:
    """mutmut's mutant-name patterns for the sample (none: every mutant)."""
    return [] if digits in ("", "all") else [f"*__mutmut_*[{digits}]"]


def statuses(work: Path, digits: str) -> dict[str, str]:
    """mutmut's verdict on every mutant of the sample, read from its ``.meta`` files."""
    from mutmut.stats import status_by_exit_code

    found: dict[str, str] = {}
    for meta in sorted((work / "mutants" / "src").rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        found.update(
            {
                name: status_by_exit_code[code]
                for name, code in codes.items()
                if in_sample(name, digits)
            }
        )
    return found


def run_module(module: Module, settings: dict[str, Any], jobs: int, digits: str) -> Score:
    """Mutate one module and run its mutants against its tests; mutmut's output goes to
    ``mutmut.log`` in the work folder."""
    work = prepare(module, settings)
    env = dict(os.environ)
    # Subprocesses the tests start import the mutated code too (mutmut itself only
    # changes sys.path in its own process); the checkout's src must not come first.
    env["PYTHONPATH"] = str(work / "mutants" / "src")
    mutmut = Path(sys.executable).with_name("mutmut")
    started = time.monotonic()
    with (work / "mutmut.log").open("w", encoding="utf-8") as log:
        done = subprocess.run(
            [str(mutmut), "run", "--max-children", str(jobs), *sample_patterns(digits)],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        tail = (work / "mutmut.log").read_text(encoding="utf-8", errors="replace")[-3000:]
        sys.exit(
            f"make mutation: mutmut failed on {module.name} (exit {done.returncode}); "
            f"the end of {work / 'mutmut.log'}:\n{tail}"
        )
    score = Score(module.name, statuses(work, digits), seconds)
    (work / "run.json").write_text(
        json.dumps({"seconds": round(seconds), "sample": digits}) + "\n", encoding="utf-8"
    )
    return score


def write_survivors(score: Score, work: Path, out: Path) -> None:
    """Every mutant not killed, with its status and diff, for a reviewer to classify."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    paths = {}
    for meta in (work / "mutants" / "src").rglob("*.py.meta"):
        source = str(meta.relative_to(work / "mutants"))[: -len(".meta")]
        for name in json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]:
            paths[name] = source
    left = sorted(name for name, status in score.statuses.items() if status != "killed")
    parts = [
        f"# {score.name}: {score.killed}/{score.total} killed; {len(left)} not killed "
        "(survived, no test, timeout, ...), each with its diff\n"
    ]
    here = Path.cwd()
    os.chdir(work)  # mutmut reads mutants/<path> relative to the folder it ran in
    try:
        for name in left:
            diff = get_diff_for_mutant(name, path=paths[name])
            parts.append(f"## {name}: {score.statuses[name]}\n{diff.rstrip()}\n")
    finally:
        os.chdir(here)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts), encoding="utf-8")


def report(scores: list[Score], modules: dict[str, Module]) -> list[str]:
    """Print the table; return the modules below their floor."""
    header = (
        f"{'module':<18} {'killed/total':>13} {'score':>6} {'floor':>6} {'survived':>8} "
        f"{'no test':>7} {'timeout':>7} {'other':>5} {'time':>7}"
    )
    print(header)
    print("-" * len(header))
    below = []
    for s in scores:
        floor = modules[s.name].floor
        other = s.total - sum(s.count(k) for k in ("killed", "survived", "no tests", "timeout"))
        mark = ""
        if s.score < floor:
            below.append(s.name)
            mark = "  BELOW FLOOR"
        print(
            f"{s.name:<18} {f'{s.killed}/{s.total}':>13} {s.score:>6.1%} {floor:>6.1%} "
            f"{s.count('survived'):>8} {s.count('no tests'):>7} {s.count('timeout'):>7} "
            f"{other:>5} {s.seconds / 60:>6.1f}m{mark}"
        )
    return below


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Modules and floors: [tool.mindwatch.mutation] in pyproject.toml.",
    )
    parser.add_argument("modules", nargs="*", help="the modules to run (default: all)")
    parser.add_argument(
        "--jobs", type=int, default=2, help="mutants tested at once (default 2: two cores)"
    )
    parser.add_argument(
        "--sample",
        metavar="DIGITS",
        help="test the mutants whose number ends in one of DIGITS ('all': every mutant); "
        "default: sample in [tool.mindwatch.mutation]",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="do not run: score what the last run left in build/mutation/",
    )
    parser.add_argument(
        "--survivors-dir",
        type=Path,
        help="write <module>.txt there instead of build/mutation/<module>/survivors.txt",
    )
    args = parser.parse_args(argv)
    settings, listed = load_settings(ROOT / "pyproject.toml")
    modules = {m.name: m for m in listed}
    unknown = [name for name in args.modules if name not in modules]
    if unknown:
        parser.error(
            f"no module {', '.join(unknown)} in pyproject.toml; known: {', '.join(modules)}"
        )
    chosen = [modules[name] for name in args.modules] if args.modules else listed

    digits = str(args.sample if args.sample is not None else settings.get("sample", "all"))
    if digits != "all" and not (digits.isdigit() and len(set(digits)) == len(digits)):
        parser.error(f"--sample {digits!r}: distinct digits such as 0 or 05, or 'all'")
    scores = []
    for module in chosen:
        work = WORK / module.name
        if args.report_only:
            if not (work / "mutants").is_dir():
                sys.exit(f"make mutation: no run of {module.name} in {work}; run it first")
            ran_file = work / "run.json"
            ran = json.loads(ran_file.read_text()) if ran_file.exists() else {}
            score = Score(
                module.name,
                statuses(work, ran.get("sample", digits)),
                float(ran.get("seconds", 0)),
            )
        else:
            print(f"make mutation: {module.name} ...", flush=True)
            score = run_module(module, settings, args.jobs, digits)
        out = (
            args.survivors_dir / f"{module.name}.txt"
            if args.survivors_dir
            else work / "survivors.txt"
        )
        write_survivors(score, work, out)
        scores.append(score)

    below = report(scores, modules)
    if below:
        print(
            f"\nmake mutation: {', '.join(below)} below the floor: a change let mutants "
            "live that the tests killed before. The survivors, with their diffs, are in "
            "build/mutation/<module>/survivors.txt; kill them with a test (or, if a mutant "
            "is equivalent, say why in docs/development.md and lower the floor there and "
            "in pyproject.toml)."
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
