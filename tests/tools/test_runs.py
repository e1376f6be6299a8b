"""``mindwatch runs``: listing run folders and pruning them by a retention policy.

Run folders are written by the real writer (``mindwatch.Monitor``), foreign ones by
tensorboardX, a crashed one by a process that dies without closing. Ages are set with
``os.utime``, so nothing here depends on how long the test takes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import mindwatch
from mindwatch.cli import main
from mindwatch.tools import runs as runtools
from mindwatch.tools.runs import retention

DAY = 86400.0

# A training process that dies without close(): run.json keeps "running" and its pid.
CRASHING_CHILD = textwrap.dedent(
    """
    import os, sys
    import mindwatch
    mon = mindwatch.Monitor(sys.argv[1], {"print_every": 0})
    for step in range(1, 4):
        mon.log_step(step, loss=1.0 / step, lr=0.1)
    mon.flush()
    os._exit(1)
    """
)


def finished_run(path: Path, steps: int = 5) -> Path:
    with mindwatch.Monitor(path, {"print_every": 0}) as mon:
        for step in range(1, steps + 1):
            mon.log_step(step, loss=1.0 / step, lr=0.1, samples=8)
    return path


def crashed_run(path: Path) -> Path:
    done = subprocess.run([sys.executable, "-c", CRASHING_CHILD, str(path)], timeout=120)
    assert done.returncode == 1
    assert json.loads((path / "run.json").read_text())["status"] == "running"
    return path


def foreign_run(path: Path) -> Path:
    """A folder written by another tool: event files, no run.json."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(path))
    for step in range(3):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.close()
    return path


def age(path: Path, seconds: float) -> None:
    """Make every file and folder below ``path`` last changed ``seconds`` ago."""
    when = time.time() - seconds
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (when, when))
        os.utime(dirpath, (when, when))


def folder_bytes(path: Path) -> int:
    return sum(os.lstat(os.path.join(d, n)).st_size for d, _, names in os.walk(path) for n in names)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["runs", *args], catch_exceptions=False)


def listing(root: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    result = invoke(str(root), "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def live_run(path: Path) -> mindwatch.Monitor:
    """A run still being written by this very process: close it when the test is done."""
    mon = mindwatch.Monitor(path, {"print_every": 0})
    for step in range(1, 4):
        mon.log_step(step, loss=1.0, lr=0.1)
    mon.flush()
    return mon


@pytest.fixture
def three_old_runs(tmp_path: Path) -> Path:
    """Finished runs a, b, c (started in that order), last changed days ago."""
    root = tmp_path / "root"
    for n, name in enumerate(["a", "b", "c"]):
        finished_run(root / name, steps=5 * (n + 1))
        age(root / name, (3 - n) * DAY)
    return root


def test_lists_every_kind_of_run_with_status_steps_and_size(tmp_path: Path) -> None:
    root = tmp_path / "root"
    # Started in name order, so start times (whole seconds) and the tie-break agree.
    finished_run(root / "a_finished")
    finished_run(root / "a_finished" / "rank_1")  # belongs to the run, not a run itself
    crashed_run(root / "group" / "b_crashed")
    foreign_run(root / "d_foreign")
    (root / "empty" / "nested").mkdir(parents=True)  # no run files: not a run
    with live_run(root / "z_live"):
        for name in ["a_finished", "group/b_crashed", "d_foreign", "z_live"]:
            age(root / name, 3 * DAY)
        code, runs = listing(root)
        table = invoke(str(root))
        sizes = {name: folder_bytes(root / name) for name in [r["name"] for r in runs]}

    assert code == 0
    by_name = {run["name"]: run for run in runs}
    # Oldest first: the foreign run has no start time and falls back to its last update.
    assert [run["name"] for run in runs] == ["d_foreign", "a_finished", "group/b_crashed", "z_live"]
    assert {name: run["status"] for name, run in by_name.items()} == {
        "a_finished": "finished",
        "group/b_crashed": "crashed",
        "d_foreign": "unknown",
        "z_live": "running",
    }
    assert by_name["a_finished"]["steps"] == 5
    assert by_name["group/b_crashed"]["steps"] is None  # never closed: no last_step
    assert by_name["d_foreign"]["steps"] is None
    for name, run in by_name.items():
        assert run["size_bytes"] == sizes[name], name
        assert run["active"] is (name == "z_live"), name
        assert run["delete"] is False
    assert by_name["a_finished"]["size_bytes"] > folder_bytes(root / "a_finished" / "rank_1")

    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["run", "status", "steps", "last", "update", "size"]
    assert lines[1].split()[:3] == ["d_foreign", "unknown", "-"]
    assert lines[2].split()[:3] == ["a_finished", "finished", "5"]
    assert lines[3].split()[:3] == ["group/b_crashed", "crashed", "-"]
    assert lines[4].split()[:3] == ["z_live", "running", "-"]
    assert "(3 days ago)" in lines[1]
    assert runtools.format_size(by_name["a_finished"]["size_bytes"]) in lines[2]
    assert lines[5] == (
        f"4 runs, {runtools.format_size(sum(r['size_bytes'] for r in runs))}; "
        "1 active (never deleted)"
    )
    assert all(line == line.rstrip() for line in lines)
    assert "\x1b[" not in table.stdout  # no colour outside a terminal


def test_keep_dry_run_marks_old_runs_and_deletes_nothing(three_old_runs: Path) -> None:
    root = three_old_runs
    result = invoke(str(root), "--keep", "1")

    assert result.exit_code == 1
    freed = folder_bytes(root / "a") + folder_bytes(root / "b")
    assert f"Would delete 2 runs, freeing {runtools.format_size(freed)}." in result.stdout
    assert "Add --yes to delete them." in result.stdout
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:4]}
    assert rows["a"].endswith("delete (--keep 1)")
    assert rows["b"].endswith("delete (--keep 1)")
    assert rows["c"].endswith("keep")
    assert all((root / name / "run.json").exists() for name in "abc")


def test_keep_with_yes_deletes_the_old_runs(three_old_runs: Path) -> None:
    root = three_old_runs
    result = invoke(str(root), "--keep", "1", "--yes")

    assert result.exit_code == 0
    assert "deleted a (" in result.stdout
    assert "deleted b (" in result.stdout
    assert "Deleted 2 runs" in result.stdout
    assert sorted(p.name for p in root.iterdir()) == ["c"]
    assert invoke(str(root), "--keep", "1").exit_code == 0  # nothing left to prune


def test_max_size_marks_oldest_until_the_rest_fits(three_old_runs: Path) -> None:
    root = three_old_runs
    limit = folder_bytes(root / "b") + folder_bytes(root / "c")

    code, runs = listing(root, "--max-size", str(limit))
    assert code == 1
    assert [(run["name"], run["delete"]) for run in runs] == [
        ("a", True),
        ("b", False),
        ("c", False),
    ]
    assert runs[0]["note"].startswith("delete (--max-size ")
    assert (root / "a").exists()

    result = invoke(str(root), "--max-size", str(limit), "--yes")
    assert result.exit_code == 0
    assert sorted(p.name for p in root.iterdir()) == ["b", "c"]
    again = invoke(str(root), "--max-size", str(limit))
    assert again.exit_code == 0
    assert "Nothing to delete." in again.stdout


def test_keep_and_max_size_mark_the_union(three_old_runs: Path) -> None:
    code, runs = listing(three_old_runs, "--keep", "2", "--max-size", "1")
    assert code == 1
    assert [run["note"] for run in runs] == [
        "delete (--keep 2)",
        "delete (--max-size 1 B)",
        "delete (--max-size 1 B)",
    ]


def test_a_running_run_is_never_pruned(three_old_runs: Path) -> None:
    root = three_old_runs
    with live_run(root / "z_live"):
        age(root / "z_live", 3 * DAY)  # only its status protects it now
        result = invoke(str(root), "--keep", "0", "--max-size", "0", "--yes")

    assert result.exit_code == 0
    assert sorted(p.name for p in root.iterdir()) == ["z_live"]
    live_row = next(line for line in result.stdout.splitlines() if line.startswith("z_live"))
    assert live_row.split()[1] == "running"
    assert live_row.endswith("kept: still running")
    assert "still over --max-size 0 B: the rest is active and never deleted." in result.stdout


def test_a_recently_changed_foreign_run_is_never_pruned(three_old_runs: Path) -> None:
    root = three_old_runs
    foreign_run(root / "tbx")  # just written: within --active-secs

    code, runs = listing(root, "--keep", "0", "--yes")

    assert code == 0
    tbx = next(run for run in runs if run["name"] == "tbx")
    assert tbx["status"] == "unknown"
    assert tbx["active"] is True
    assert tbx["delete"] is False
    assert tbx["note"] == "kept: still running"
    assert sorted(p.name for p in root.iterdir()) == ["tbx"]
    assert [run["deleted"] for run in runs if run["name"] != "tbx"] == [True, True, True]


def test_active_secs_sets_what_counts_as_recent(tmp_path: Path) -> None:
    root = tmp_path / "root"
    foreign_run(root / "tbx")
    age(root / "tbx", 10)
    assert listing(root, "--keep", "0")[1][0]["delete"] is False
    assert listing(root, "--keep", "0", "--active-secs", "5")[1][0]["delete"] is True


def test_root_itself_is_listed_but_never_deleted(tmp_path: Path) -> None:
    root = finished_run(tmp_path / "single")
    age(root, DAY)
    code, runs = listing(root, "--keep", "0", "--yes")
    assert code == 0
    assert [(run["name"], run["note"]) for run in runs] == [(".", "kept: it is ROOT")]
    assert (root / "run.json").exists()


def test_links_out_of_root_are_neither_listed_nor_deleted(tmp_path: Path) -> None:
    outside = finished_run(tmp_path / "outside")
    age(outside, DAY)
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)

    code, runs = listing(root, "--keep", "0", "--yes")
    assert (code, runs) == (0, [])
    assert (outside / "run.json").exists()

    # Even when asked directly (a folder swapped for a link after listing).
    run = runtools.find_runs(outside)[0]
    run.path = root / "link"
    error = runtools.delete_run(root, run)
    assert error is not None
    assert "symlink" in error
    assert (outside / "run.json").exists()


def test_one_failed_deletion_does_not_stop_the_others(
    three_old_runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = three_old_runs
    real_rmtree = retention.shutil.rmtree

    def rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path).name == "a":
            raise PermissionError(13, "Permission denied", str(path))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(retention.shutil, "rmtree", rmtree)
    result = invoke(str(root), "--keep", "0", "--yes")

    assert result.exit_code == 2
    assert sorted(p.name for p in root.iterdir()) == ["a"]
    assert "could not delete a:" in result.stderr
    assert "Permission denied" in result.stderr
    assert "Deleted 2 runs" in result.stdout


def test_prune_without_the_cli_marks_deletes_and_says_what_failed(
    three_old_runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work of ``mindwatch runs`` is one call: what it found, marked and could not
    delete comes back as values, and --json's deleted/error fields only after deleting."""
    root = three_old_runs
    shown = runtools.prune(root, keep=1)
    assert [run.name for run in shown.marked] == ["a", "b"]
    assert shown.policy
    assert sorted(p.name for p in root.iterdir()) == ["a", "b", "c"]
    assert not any("deleted" in item for item in runtools.pruning_json(shown))

    real_rmtree = retention.shutil.rmtree

    def rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path).name == "a":
            raise PermissionError(13, "Permission denied", str(path))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(retention.shutil, "rmtree", rmtree)
    done = runtools.prune(root, keep=1, delete=True)
    assert list(done.failed) == ["a"]
    assert "Permission denied" in done.failed["a"]
    assert sorted(p.name for p in root.iterdir()) == ["a", "c"]
    items = {item["name"]: item for item in runtools.pruning_json(done)}
    assert (items["a"]["deleted"], items["b"]["deleted"], items["c"]["deleted"]) == (
        False,
        True,
        False,
    )
    assert items["b"]["error"] is None
    assert "Permission denied" in items["a"]["error"]
    assert runtools.summary_lines(done)[-1].startswith("Deleted 1 run, freed ")


@pytest.mark.parametrize("bad", ["5X", "-1", "1.2.3", "GiB", "", "2 GB of disk"])
def test_a_bad_max_size_is_exit_2_naming_the_flag(tmp_path: Path, bad: str) -> None:
    result = invoke(str(tmp_path), "--max-size", bad)
    assert result.exit_code == 2
    assert "--max-size" in result.stderr
    assert "500M, 2G, 1.5GiB" in result.stderr


def test_a_missing_or_wrong_root_is_exit_2_naming_it(tmp_path: Path) -> None:
    missing = invoke(str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert "nope' does not exist" in missing.stderr
    (tmp_path / "file").write_text("x")
    not_a_folder = invoke(str(tmp_path / "file"))
    assert not_a_folder.exit_code == 2
    assert "is a file, not a folder" in not_a_folder.stderr
    no_policy = invoke(str(tmp_path), "--yes")
    assert no_policy.exit_code == 2
    assert "--keep N and/or --max-size SIZE" in no_policy.stderr


def test_the_installed_command_in_a_real_process(three_old_runs: Path) -> None:
    command = Path(sys.executable).parent / "mindwatch"
    done = subprocess.run(
        [str(command), "runs", str(three_old_runs), "--keep", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["a", "b", "c"]
    assert lines[1].endswith("delete (--keep 2)")
    assert lines[4].startswith("3 runs, ")
    assert lines[5].startswith("Would delete 1 run, freeing ")
    assert lines[5].endswith(" Add --yes to delete it.")
    assert (three_old_runs / "a").exists()

    missing = subprocess.run(
        [str(command), "runs", str(three_old_runs / "nope")], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert "ROOT" in missing.stderr


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1048576", 1048576),
        ("500M", 500 * 2**20),
        ("2G", 2 * 2**30),
        ("1.5GiB", 3 * 2**29),
        ("10MB", 10_000_000),
        ("4 kib", 4096),
        ("12B", 12),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert runtools.parse_size(text) == size


def test_format_size() -> None:
    assert [runtools.format_size(n) for n in (0, 1023, 1536, 3 * 2**30)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "3.0 GiB",
    ]


def test_a_run_on_another_host_is_judged_by_its_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    run = finished_run(root / "remote")
    info = json.loads((run / "run.json").read_text())
    info.update(status="running", host="another-host.invalid", pid=1)  # as if still going
    (run / "run.json").write_text(json.dumps(info))

    age(run, runtools.STALE_SECS / 2)
    assert [(r["status"], r["active"]) for r in listing(root)[1]] == [("running", True)]
    age(run, runtools.STALE_SECS * 2)
    assert [(r["status"], r["active"]) for r in listing(root)[1]] == [("stale", False)]


def test_the_summary_is_chinese_under_a_chinese_locale(
    three_old_runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGUAGE", "zh_CN")
    dry = invoke(str(three_old_runs), "--keep", "1")
    assert dry.exit_code == 1, dry.output
    lines = dry.output.splitlines()
    assert lines[-2].startswith("3 个运行，")
    assert lines[-1].startswith("将删除 2 个运行，释放 ")
    assert lines[-1].endswith("。加上 --yes 即执行删除。")
    done = invoke(str(three_old_runs), "--keep", "1", "--yes")
    assert done.output.splitlines()[-1].startswith("已删除 2 个运行，释放 ")
