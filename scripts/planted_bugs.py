"""`make planted`: the realistic bugs of issue 38, planted one at a time, must each fail a test.

Issue 38 planted 14 one-line bugs in the newest modules and the suite caught 6. This
script keeps that experiment as a check: every bug class the issue names (and a few
more of the same kind) is an exact text edit of a file under ``src/mindwatch``, and the
tests named beside it must fail while it is in place. For each bug, one after the
other, it

1. finds the bug's ``old`` text in its file (exactly once; otherwise it stops and names
   the file and the text, so a change of the code is noticed rather than silently
   tested against nothing) and writes ``new`` in its place;
2. runs the bug's tests: ``python -m pytest -x -q -p no:randomly -p no:xdist`` on the
   node ids given, in one process, with ``PYTHONPATH`` the checkout's ``src`` and a
   time limit;
3. writes every planted file back byte for byte (and its modification time) in a
   ``finally``: on an error, on Ctrl-C and on SIGTERM/SIGHUP too. Before planting, the
   original is also copied to ``build/planted/``; a run killed with SIGKILL leaves it
   there, and the next run puts it back before anything else;
4. records the verdict from pytest's exit status: 1 *caught* (a test failed), 0
   *ESCAPED* (every test passed with the bug in), anything else *error* (a collection
   error, a timeout, an internal error: the bug was not judged).

It prints one row per bug (id, file, what it plants, the test that caught it, seconds)
and exits 1 when any bug escaped or errored. It refuses to start when a file it would
plant in has uncommitted changes (``git status --porcelain``): the restore is byte for
byte, but a file left planted by an earlier run must not be taken for the original.

The planted file's modification time is set to one no source ever had (its own minus
1000 s minus the bug's number) so that a cached ``.pyc`` of the original or of another
bug of the same length can never be taken for it; the restore gives the file its own
time back, which the ``.pyc`` written for the bug does not match.

How to add a bug: docs/development.md, "Planted bugs of issue 38".
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "mindwatch"
BACKUP = ROOT / "build" / "planted"
TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` by ``new`` in ``path`` (relative to src/mindwatch)."""

    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Bug:
    """One planted bug: its edits, what it does, and the tests that must catch it."""

    id: str
    what: str
    edits: tuple[Edit, ...]
    tests: tuple[str, ...]
    issue: bool = True  # one of the classes issue 38 names (False: one of our own)


# The test files most bugs are caught in (their tests are named below).
MERGE = "tests/forensics/test_merge_ranks.py::"
TIES = "tests/aggregate/test_ties.py::"
HOST = "tests/hardware/test_host_values.py::"
STRAGGLER = "tests/rules/test_straggler.py::"
WRITER = "tests/events/test_writer.py::"

BUGS: tuple[Bug, ...] = (
    # --- Cross-rank logic tested only with 2 ranks and distinct values ---------------
    Bug(
        "merge-fold",
        "forensics merge folds a layer into one rank-less mover when more than one rank "
        "saw it, not all",
        (
            Edit(
                "forensics/exchange.py",
                "if len(seen) == len(ranks) > 1 and _same(seen):",
                "if len(seen) > 1 and _same(seen):",
            ),
        ),
        (MERGE + "test_a_layer_folds_into_one_rankless_mover_only_when_every_rank_saw_it",),
    ),
    Bug(
        "argmax-tie-numpy",
        "numpy path: an argmax tie goes to the highest rank",
        (
            Edit(
                "aggregate/reductions.py",
                "argmax = np.argmax(outlier_key(values, present), axis=0)",
                "argmax = len(values) - 1 - np.argmax(outlier_key(values, present)[::-1], 0)",
            ),
        ),
        (
            TIES + "test_a_value_equal_on_every_rank_names_rank_0_on_both_paths",
            TIES + "test_a_partial_tie_names_the_lowest_of_the_tied_ranks",
        ),
    ),
    Bug(
        "argmax-tie-allreduce",
        "all-reduce path: an argmax tie goes to the highest rank",
        (
            Edit(
                "aggregate/allreduce.py",
                "cells = np.where(mine, -float(rank), -np.inf)",
                "cells = np.where(mine, float(rank), -np.inf)",
            ),
            Edit(
                "aggregate/allreduce.py",
                "argmax = -got[4:].reshape(n_steps, n_tags)",
                "argmax = got[4:].reshape(n_steps, n_tags)",
            ),
        ),
        (
            TIES + "test_a_value_equal_on_every_rank_names_rank_0_on_both_paths",
            TIES + "test_a_partial_tie_names_the_lowest_of_the_tied_ranks",
        ),
    ),
    Bug(
        "skiplist-step",
        "the skip list de-duplicated on the step alone, not (step, rank)",
        (
            Edit(
                "forensics/skiplist.py",
                'if any((s.get("step"), s.get("rank")) == key for s in self.steps):',
                'if any(s.get("step") == key[0] for s in self.steps):',
            ),
        ),
        (
            MERGE + "test_every_ranks_batch_of_one_step_reaches_the_skip_list",
            MERGE + "test_the_skip_list_keeps_each_ranks_batch_once",
        ),
    ),
    # --- Assertions of existence, not of value ---------------------------------------
    Bug(
        "disk-rates-swapped",
        "hardware: disk read and write rates swapped",
        (
            Edit(
                "hardware/host.py",
                "return counters.read_bytes, counters.write_bytes",
                "return counters.write_bytes, counters.read_bytes",
            ),
        ),
        (HOST + "test_each_rate_is_its_own_counters_over_the_interval",),
    ),
    Bug(
        "add-scalars-walltime",
        "SummaryWriter.add_scalars ignores the caller's walltime",
        (
            Edit(
                "summarywriter.py",
                "wall = time.time() if walltime is None else _walltime(walltime)\n"
                "        values = [(key, number(",
                "wall = time.time()\n        values = [(key, number(",
            ),
        ),
        ("tests/test_summarywriter_values.py::test_every_method_writes_the_callers_walltime",),
    ),
    Bug(
        "writer-walltime-handoff",
        "EventFileWriter.add_scalars drops the caller's wall time on the hand-off's slow path",
        (
            Edit(
                "events/writer.py",
                "self._handoff.put((SCALARS, wall, step, scalars))",
                "self._handoff.put((SCALARS, time.time(), step, scalars))",
            ),
        ),
        (WRITER + "test_the_callers_wall_time_is_kept_on_the_hand_offs_slow_path",),
    ),
    Bug(
        "disk-all-fallback",
        "hardware: the disk holding the path matches, yet the host's totals are read",
        (
            Edit(
                "hardware/host.py",
                "            if key in keys:\n                return key\n",
                "            if key in keys:\n                return None\n",
            ),
        ),
        (
            HOST + "test_the_disk_holding_the_path_from_a_mount_table",
            HOST + "test_the_disk_is_the_one_holding_the_path",
        ),
    ),
    # --- Promises in docstrings that no test pinned ----------------------------------
    Bug(
        "movers-std",
        "first movers' spread: np.std instead of the robust MAD",
        (
            Edit(
                "forensics/analysis.py",
                "spread = _MAD_TO_SIGMA * float(np.median(np.abs(judged_base - center)))",
                "spread = float(np.std(judged_base))",
            ),
        ),
        ("tests/forensics/test_scores.py::test_a_spike_in_the_baseline_does_not_widen_the_spread",),
    ),
    Bug(
        "straggler-any-healthy",
        "straggler: an episode ends at its first healthy interval",
        (Edit("rules/straggler.py", "if sparse or recovered:", "if True:"),),
        (
            STRAGGLER + "test_an_episode_ends_and_the_next_one_alerts_again",
            STRAGGLER
            + "test_a_healthy_interval_inside_an_episode_before_its_alert_does_not_end_it",
        ),
    ),
    Bug(
        "straggler-interval-step",
        "straggler: the score divided by the interval's step, not the run's",
        (
            Edit(
                "rules/straggler.py",
                "max(0.0, gap - base) / base_step)",
                "max(0.0, gap - base) / step_ms)",
            ),
        ),
        (STRAGGLER + "test_the_score_is_the_extra_wait_over_the_runs_step",),
    ),
    # --- Our own, of the same kinds ---------------------------------------------------
    Bug(
        "order-tie-highest",
        "forensics: movers tied between ranks ordered highest rank first",
        (
            Edit(
                "forensics/exchange.py",
                "-1 if rank is None else rank,",
                "-1 if rank is None else -rank,",
            ),
        ),
        (MERGE + "test_ties_between_ranks_own_layers_and_nonfinite_go_to_the_lowest_rank",),
        issue=False,
    ),
    Bug(
        "nonfinite-arrival",
        "forensics merge: the non-finite tie between ranks goes to the first to arrive",
        (
            Edit(
                "forensics/exchange.py",
                'key=lambda a: (a["nonfinite"]["step"], a["rank"]))',
                'key=lambda a: a["nonfinite"]["step"])',
            ),
        ),
        (MERGE + "test_ties_between_ranks_own_layers_and_nonfinite_go_to_the_lowest_rank",),
        issue=False,
    ),
    Bug(
        "mean-absent-ranks",
        "numpy path: the ranks' mean divides by every rank, also those without the value",
        (
            Edit(
                "aggregate/reductions.py",
                "mean = filled.sum(axis=0) / np.maximum(count, 1)",
                "mean = filled.sum(axis=0) / len(values)",
            ),
        ),
        (
            "tests/aggregate/test_reductions.py::test_a_rank_that_did_not_log_the_metric_is_left_out",
            TIES + "test_both_paths_agree_on_random_ranks_with_many_ties",
        ),
        issue=False,
    ),
    Bug(
        "disk-shortest-mount",
        "hardware: the shortest mount holding the path wins (/ before /data)",
        (
            Edit(
                "hardware/host.py",
                "if inside and (best is None or len(mount) > len(best[0])):",
                "if inside and (best is None or len(mount) < len(best[0])):",
            ),
        ),
        (HOST + "test_the_disk_holding_the_path_from_a_mount_table",),
        issue=False,
    ),
    Bug(
        "counter-reset-negative",
        "hardware: a counter that went back gives a negative rate",
        (
            Edit(
                "hardware/host.py",
                "return max(now - before, 0) / MB / elapsed",
                "return (now - before) / MB / elapsed",
            ),
        ),
        (HOST + "test_a_counter_that_went_back_reads_zero_for_that_interval",),
        issue=False,
    ),
    Bug(
        "walltime-zero-is-now",
        "EventFileWriter.add_scalars takes a wall time of 0 (the epoch) for now",
        (
            Edit(
                "events/writer.py",
                "wall = time.time() if wall_time is None else wall_time\n        if len(queue)",
                "wall = wall_time or time.time()\n        if len(queue)",
            ),
        ),
        (WRITER + "test_the_callers_wall_time_is_kept_on_the_hand_offs_slow_path",),
        issue=False,
    ),
    Bug(
        "straggler-persistence-off-by-one",
        "straggler: warns one low interval late (count <= intervals)",
        (
            Edit(
                "rules/straggler.py",
                "if self.raised or count < s.intervals or",
                "if self.raised or count <= s.intervals or",
            ),
        ),
        (STRAGGLER + "test_a_slow_pipeline_is_named_at_every_step_length",),
        issue=False,
    ),
    Bug(
        "straggler-compute-any-rank",
        "straggler: slow micro-benchmark runs add up though they name different ranks",
        (
            Edit(
                "rules/straggler.py",
                "len(slow) < s.bench_rounds or len(set(slow)) > 1:",
                "len(slow) < s.bench_rounds:",
            ),
        ),
        (STRAGGLER + "test_a_compute_straggler_needs_runs_in_a_row_naming_the_same_rank",),
        issue=False,
    ),
    Bug(
        "movers-window-off-by-one",
        "forensics: the judged window one step shorter than lookback",
        (
            Edit(
                "forensics/analysis.py",
                "cut = max(rows - lookback, 0)",
                "cut = max(rows - lookback + 1, 0)",
            ),
        ),
        (
            "tests/forensics/test_analysis.py::test_the_layer_that_moved_first_is_ranked_first_with_its_lead",
        ),
        issue=False,
    ),
)


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stop as Ctrl-C does, restoring the planted files on the way out."""


def _on_signal(signum: int, frame: Optional[FrameType]) -> None:
    raise Interrupted(signal.Signals(signum).name)


def _backup_of(path: Path) -> tuple[Path, Path]:
    """Where the original of ``path`` and its planted text are kept while it is planted."""
    saved = BACKUP / path.relative_to(PACKAGE)
    return saved, saved.with_name(saved.name + ".planted")


def recover() -> list[Path]:
    """Put back the originals a killed run left in build/planted/ (and say so). A file
    that is no longer the planted text (edited since) is left alone: exits naming it."""
    restored = []
    for planted in sorted(BACKUP.rglob("*.py.planted")) if BACKUP.is_dir() else []:
        saved = planted.with_name(planted.name[: -len(".planted")])
        target = PACKAGE / saved.relative_to(BACKUP)
        if not saved.exists():
            planted.unlink()  # killed before the original was saved: nothing was planted
            continue
        now = target.read_bytes() if target.exists() else None
        if now == planted.read_bytes():
            shutil.copy2(saved, target)
            restored.append(target)
        elif now != saved.read_bytes():
            sys.exit(
                f"make planted: {target.relative_to(ROOT)} was left planted by a killed run "
                f"and changed since; its original is {saved.relative_to(ROOT)} (compare, "
                f"then delete {saved.relative_to(ROOT)} and {planted.relative_to(ROOT)})"
            )
        saved.unlink()
        planted.unlink()
    return restored


def dirty(paths: list[Path]) -> list[str]:
    """The lines of ``git status --porcelain`` for ``paths`` (changed, not committed)."""
    rel = [str(p.relative_to(ROOT)) for p in paths]
    done = subprocess.run(
        ["git", "status", "--porcelain", "--", *rel],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"make planted: `git status` failed in {ROOT}: {done.stderr.strip()}")
    return done.stdout.splitlines()


def planted_text(bug: Bug, path: Path, text: str) -> str:
    """``text`` with this bug's edits of ``path``; exits naming the file and the text when
    an ``old`` text is not there exactly once."""
    for edit in bug.edits:
        if PACKAGE / edit.path != path:
            continue
        found = text.count(edit.old)
        if found != 1:
            sys.exit(
                f"make planted: bug {bug.id}: {path.relative_to(ROOT)} holds "
                f"{found} copies of the text to replace, not one:\n    {edit.old!r}\n"
                "The code moved: update the bug's `old` text in scripts/planted_bugs.py."
            )
        text = text.replace(edit.old, edit.new)
    return text


def failed_tests(output: str) -> list[str]:
    """The failing tests pytest names in its short summary, in its order."""
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", output, flags=re.MULTILINE)


def run_tests(tests: tuple[str, ...], timeout: float, *, stop: bool = True) -> tuple[int, str]:
    """pytest on ``tests``: (exit status, its output); -1 on a timeout. ``stop``: at the
    first failure (-x)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src")
    env.setdefault("GLOG_v", "3")
    command = [sys.executable, "-m", "pytest", *(["-x"] if stop else []), "-q", "-rfE"]
    command += ["-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider", *tests]
    # A session of its own, so that a timeout or an interrupt ends every process the
    # tests started, not only pytest.
    child = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        return -1, output + f"\n(timed out after {timeout:.0f} s)"
    except BaseException:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    return child.returncode, output


@dataclass
class Result:
    bug: Bug
    verdict: str
    test: str  # the test that caught it (the first), or why the run was no verdict
    seconds: float
    output: str
    failed: list[str]  # every failing test pytest named


def plant(number: int, bug: Bug, timeout: float, survey: tuple[str, ...] = ()) -> Result:
    """Plant ``bug``, run its tests (or every test of ``survey``, not stopping at the
    first failure), and restore its files whatever happens."""
    paths = sorted({PACKAGE / e.path for e in bug.edits})
    originals = {p: (p.read_bytes(), p.stat()) for p in paths}
    texts = {p: planted_text(bug, p, data.decode("utf-8")) for p, (data, _) in originals.items()}
    started = time.monotonic()
    try:
        for path, text in texts.items():
            saved, planted = _backup_of(path)
            saved.parent.mkdir(parents=True, exist_ok=True)
            planted.write_bytes(text.encode("utf-8"))
            shutil.copy2(path, saved)
            path.write_bytes(text.encode("utf-8"))
            stat = originals[path][1]
            fake = stat.st_mtime_ns - (1000 + number) * 1_000_000_000
            os.utime(path, ns=(fake, fake))
        status, output = run_tests(survey or bug.tests, timeout, stop=not survey)
    finally:
        for path, (data, stat) in originals.items():
            path.write_bytes(data)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            for kept in _backup_of(path):
                kept.unlink(missing_ok=True)
    seconds = time.monotonic() - started
    verdict = {1: "caught", 0: "ESCAPED"}.get(status, "error")
    failed = failed_tests(output)
    test = failed[0] if verdict == "caught" and failed else ""
    if verdict == "error":
        last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
        test = f"exit {status}: {last[0][:60]}"
    return Result(bug, verdict, test, seconds, output, failed)


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def clean_run(bugs: list[Bug], timeout: float) -> Optional[str]:
    """Run every chosen bug's tests once on the code as committed: a test that fails
    without a bug would call every bug "caught". None if they pass, else why not."""
    tests = tuple(dict.fromkeys(t for bug in bugs for t in bug.tests))
    status, output = run_tests(tests, timeout * 2, stop=False)
    if status == 0:
        return None
    failed = failed_tests(output)
    if failed:
        return "these tests fail with no bug planted:\n    " + "\n    ".join(failed)
    tail = "\n".join(output.splitlines()[-20:])
    return f"the tests could not run (pytest exit {status}):\n{tail}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description="Plant the bugs of issue 38 one at a time; each must fail its tests.",
        epilog="How to add a bug: docs/development.md, 'Planted bugs of issue 38'.",
    )
    parser.add_argument("--only", nargs="+", metavar="ID", help="plant only these bugs")
    parser.add_argument("--list", action="store_true", help="list the bugs and exit")
    parser.add_argument(
        "--tests",
        nargs="+",
        metavar="TEST",
        help="run these pytest arguments instead of each bug's own tests, without "
        "stopping at the first failure, and list every test that fails (to find the "
        "tests that catch a new bug)",
    )
    parser.add_argument(
        "--no-clean-run",
        action="store_true",
        help="skip the first run of the bugs' tests with no bug planted",
    )
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT_S, help="seconds per bug (default: 600)"
    )
    parser.add_argument("--verbose", action="store_true", help="print pytest's output of every bug")
    args = parser.parse_args(argv)

    known = {bug.id: bug for bug in BUGS}
    if len(known) != len(BUGS):
        sys.exit("make planted: two bugs share an id in scripts/planted_bugs.py")
    if args.list:
        rows = [["id", "file", "issue 38", "plants", "tests"]]
        for bug in BUGS:
            files = ", ".join(sorted({e.path for e in bug.edits}))
            kind = "yes" if bug.issue else "own"
            rows.append([bug.id, files, kind, bug.what, " ".join(bug.tests)])
        print(table(rows))
        return 0
    unknown = [i for i in args.only or () if i not in known]
    if unknown:
        sys.exit(f"make planted: no bug named {', '.join(unknown)}; --list lists them")
    chosen = [known[i] for i in args.only] if args.only else list(BUGS)
    survey: tuple[str, ...] = tuple(args.tests or ())

    for path in recover():
        print(f"make planted: put back {path.relative_to(ROOT)} left planted by a killed run")
    paths = sorted({PACKAGE / e.path for bug in chosen for e in bug.edits})
    changed = dirty(paths)
    if changed:
        sys.exit(
            "make planted: these files have uncommitted changes; commit or stash them first "
            "(the bugs are planted in the committed code):\n    " + "\n    ".join(changed)
        )
    # Every edit is checked before anything is planted: a moved text stops the run early.
    for bug in chosen:
        for path in {PACKAGE / e.path for e in bug.edits}:
            planted_text(bug, path, path.read_text(encoding="utf-8"))

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    results = []
    started = time.monotonic()
    try:
        if not (survey or args.no_clean_run):
            print("make planted: the bugs' tests with no bug planted ...", end=" ", flush=True)
            why = clean_run(chosen, args.timeout)
            print("fail" if why else f"pass ({time.monotonic() - started:.1f} s)", flush=True)
            if why:
                print(f"make planted: {why}")
                return 1
        for bug in chosen:
            number = BUGS.index(bug)
            print(f"make planted: {bug.id} ...", end=" ", flush=True)
            result = plant(number, bug, args.timeout, survey)
            print(f"{result.verdict} ({result.seconds:.1f} s)", flush=True)
            if args.verbose or result.verdict == "error":
                print(result.output)
            if survey and result.failed:
                print("    failed: " + "\n            ".join(result.failed))
            results.append(result)
    except KeyboardInterrupt as exc:  # Ctrl-C, or Interrupted: SIGTERM, SIGHUP
        print(f"\nmake planted: interrupted ({str(exc) or 'Ctrl-C'}); the files are restored")
        return 130

    rows = [["bug", "file", "plants", "caught by", "s"]]
    for r in results:
        files = ", ".join(sorted({e.path for e in r.bug.edits}))
        shown = r.test if r.verdict == "caught" else f"{r.verdict}: {r.test}".rstrip(": ")
        rows.append([r.bug.id, files, r.bug.what, shown, f"{r.seconds:.1f}"])
    print()
    print(table(rows))
    bad = [r.bug.id for r in results if r.verdict != "caught"]
    total = time.monotonic() - started
    print(
        f"\n{len(results) - len(bad)} of {len(results)} planted bugs caught "
        f"in {total:.0f} s" + (f"; not caught: {', '.join(bad)}" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
