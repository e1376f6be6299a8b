"""``mindwatch compare`` on real MindSpore runs, as a CI gate sees them: against five
baseline runs of ``mindwatch demo`` (seeds 0, 2-5, one folder, as docs/compare.md
recommends), another seed passes although its loss differs by tens of percent at matched
steps; the same job with a 20 times lower learning rate fails on the loss, and with a
slow data source on throughput and step time. A rerun of one seed passes against that
seed's run alone (one baseline: the standard errors of the statistics set the limits).

Each job runs in its own process, as in CI: ``mindwatch demo`` for the seeds,
scripts/compare_job.py (the demo's job with one fault planted) for the regressions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

JOB = Path(__file__).with_name("scripts") / "compare_job.py"
# The baselines' throughput and the regressions' are measured with no other test's
# training job running meanwhile (tests/schedule.py): the limits come from the spread
# of the baselines, and a burst of the suite's own load in one of them hid a tenfold
# slowdown.
pytestmark = pytest.mark.usefixtures("machine_to_itself")
STEPS = 300


def demo(logdir: Path, seed: int) -> Path:
    """Run the demo into ``logdir`` (a folder of runs); the new run's folder."""
    before = set(logdir.glob("*_demo"))
    command = [sys.executable, "-m", "mindwatch", "demo", f"--steps={STEPS}", f"--seed={seed}"]
    subprocess.run([*command, f"--logdir={logdir}"], check=True, capture_output=True, timeout=300)
    (run,) = set(logdir.glob("*_demo")) - before
    return run


def job(run_dir: Path, *options: str) -> Path:
    command = [sys.executable, str(JOB), str(run_dir), f"--steps={STEPS}", *options]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return run_dir


def compare(run: Path, baseline: Path) -> tuple[int, dict[str, Any], str]:
    """Exit status, the JSON result and the table of ``mindwatch compare``."""
    command = [sys.executable, "-m", "mindwatch", "compare", str(run), "--baseline", str(baseline)]
    table = subprocess.run(command, capture_output=True, text=True, timeout=120)
    as_json = subprocess.run(
        [*command, "--json", "-"], capture_output=True, text=True, timeout=120, check=False
    )
    assert as_json.returncode == table.returncode, table.stderr + as_json.stderr
    return table.returncode, json.loads(as_json.stdout), table.stdout


def failed(result: dict[str, Any]) -> set[str]:
    return {c["name"] for c in result["checks"] if c["status"] == "regression"}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of five baseline runs: seeds 0, 2, 3, 4, 5 (the first is seed 0's)."""
    folder = tmp_path_factory.mktemp("baselines")
    for seed in (0, 2, 3, 4, 5):
        demo(folder, seed)
    return folder


def seed0(baseline: Path) -> Path:
    return min(baseline.glob("*_demo"))


def test_another_seed_passes(baseline: Path, tmp_path: Path) -> None:
    code, result, table = compare(demo(tmp_path, 1), baseline)
    assert code == 0, table
    assert result["passed"] is True
    assert len(result["baselines"]) == 5
    names = {c["name"] for c in result["checks"]}
    assert {"final loss", "loss at matched step", "eval/loss", "step time (ms)"} <= names
    assert "throughput (samples_per_s)" in names
    # The seeds really differ, by more than the 5 % floor: their spread set the limit.
    matched = next(c for c in result["checks"] if c["name"] == "loss at matched step")
    assert matched["set_by"] == "baselines"
    assert matched["noise"] > 0


def test_a_rerun_passes_its_loss_checks_against_one_baseline(
    baseline: Path, tmp_path: Path
) -> None:
    # The same seed again: on CPU the loss repeats to the bit, so every loss check passes
    # with one baseline. Its step times differ by what the machine's load did between the
    # runs, which one baseline cannot know (docs/compare.md): not asserted here.
    code, result, table = compare(demo(tmp_path, 0), seed0(baseline))
    by_name = {c["name"]: c for c in result["checks"]}
    for name in ("final loss", "loss at matched step", "eval/loss"):
        assert by_name[name]["status"] == "ok", table
        assert by_name[name]["change"] == 0
    assert by_name["final loss"]["set_by"] == "standard error"
    assert by_name["eval/loss"]["set_by"] == "tolerance"  # one evaluation per run
    assert code == (0 if result["passed"] else 1)


def test_a_20_times_lower_learning_rate_fails_on_the_loss(baseline: Path, tmp_path: Path) -> None:
    code, result, table = compare(job(tmp_path / "low_lr", "--lr-scale=0.05"), baseline)
    assert code == 1, table
    assert {"final loss", "loss at matched step", "eval/loss"} <= failed(result)
    assert not {"throughput (samples_per_s)", "step time (ms)"} & failed(result)


def test_a_slow_data_source_fails_on_throughput_and_step_time(
    baseline: Path, tmp_path: Path
) -> None:
    # The same seed and training, each batch 30 ms late: more than ten times slower, far
    # beyond what even a baseline recorded on a very busy machine can hide.
    code, result, table = compare(job(tmp_path / "slow", "--slow-ms=30"), baseline)
    assert code == 1, table
    assert failed(result) == {"throughput (samples_per_s)", "step time (ms)"}
