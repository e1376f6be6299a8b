"""``mindwatch compare``: passes a run against itself, catches regressions, refuses bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner, Result

import mindwatch
from mindwatch.cli import main
from mindwatch.tools.compare import Tolerances, compare_runs


def make_run(
    folder: Path,
    *,
    steps: int = 200,
    loss: Callable[[int], float] = lambda s: 2.0 / (1 + s / 20),
    batch: int = 32,
    step_ms: float = 100.0,
    evals: Optional[dict[str, float]] = None,
    seed: Optional[int] = None,
    loss_noise: float = 0.0,
    jitter: float = 0.0,
    eval_losses: Optional[dict[int, float]] = None,
) -> Path:
    """A run whose loss follows ``loss``; with ``seed``, each step's loss gets relative
    normal noise ``loss_noise`` and its step time lognormal jitter ``jitter``, as small
    batches and a shared machine give. ``eval_losses``: an eval loss at those steps."""
    rng = np.random.default_rng(seed)
    with mindwatch.Monitor(folder, {"print_every": 0}) as mon:
        for step in range(1, steps + 1):
            value = loss(step) * (1 + loss_noise * rng.standard_normal())
            ms = step_ms * float(np.exp(jitter * rng.standard_normal()))
            mon.log_scalars(
                step,
                {
                    "train/loss": value,
                    "perf/step_time_ms": ms,
                    "perf/samples_per_s": batch * 1000.0 / ms,
                },
            )
            if eval_losses and step in eval_losses:
                mon.log_eval(step, loss=eval_losses[step])
        if evals:
            mon.log_eval(steps, **evals)
    return folder


def compare(*args: str) -> Result:
    return CliRunner().invoke(main, ["compare", *args])


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return make_run(tmp_path / "base", evals={"loss": 0.5, "acc": 0.9})


def test_a_run_passes_against_itself(base: Path) -> None:
    result = compare(str(base), "--baseline", str(base))
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("within tolerance")
    assert "limit: tolerance" in result.output  # identical runs: the floor sets every limit
    for name in ("final loss", "loss at matched step", "eval/acc", "eval/loss", "throughput"):
        assert name in result.output


def test_a_worse_loss_fails_with_exit_1(base: Path, tmp_path: Path) -> None:
    worse = make_run(tmp_path / "worse", loss=lambda s: 1.5 * 2.0 / (1 + s / 20))
    result = compare(str(worse), "--baseline", str(base))
    assert result.exit_code == 1, result.output
    assert "regression: final loss, loss at matched step" in result.output
    assert "REGRESSION" in result.output
    better = make_run(tmp_path / "better", loss=lambda s: 0.5 * 2.0 / (1 + s / 20))
    assert compare(str(better), "--baseline", str(base)).exit_code == 0
    # A looser tolerance lets the worse run pass, from a YAML file or a flag.
    loose = tmp_path / "tol.yaml"
    loose.write_text("loss_rtol: 0.6\n")
    assert compare(str(worse), "--baseline", str(base), "--tolerances", str(loose)).exit_code == 0
    assert compare(str(worse), "--baseline", str(base), "--loss-rtol", "0.6").exit_code == 0


def test_a_diverged_run_fails(base: Path, tmp_path: Path) -> None:
    nan = make_run(tmp_path / "nan", loss=lambda s: float("nan") if s > 150 else 2.0 / (1 + s / 20))
    assert compare(str(nan), "--baseline", str(base)).exit_code == 1


def test_slower_steps_lower_throughput_and_worse_evals_fail(base: Path, tmp_path: Path) -> None:
    slow = make_run(tmp_path / "slow", step_ms=130.0, evals={"loss": 0.5, "acc": 0.9})
    result = compare(str(slow), "--baseline", str(base))
    assert result.exit_code == 1
    assert "regression: throughput (samples_per_s), step time (ms)" in result.output
    evals = make_run(tmp_path / "evals", evals={"loss": 0.6, "acc": 0.8})
    result = compare(str(evals), "--baseline", str(base))
    assert "regression: eval/acc, eval/loss" in result.output


def test_json_output(base: Path, tmp_path: Path) -> None:
    worse = make_run(tmp_path / "worse", loss=lambda s: 3.0)
    result = compare(str(worse), "--baseline", str(base), "--json", "-")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["passed"] is False
    final = next(c for c in data["checks"] if c["name"] == "final loss")
    assert final["status"] == "regression"
    assert final["run"] == pytest.approx(3.0)
    assert data["tolerances"]["loss_rtol"] == 0.05
    out = tmp_path / "result.json"
    assert compare(str(base), "--baseline", str(base), "--json", str(out)).exit_code == 0
    assert json.loads(out.read_text())["passed"] is True


def test_runs_with_different_batch_sizes_align_by_samples(base: Path, tmp_path: Path) -> None:
    # Half the batch, twice the steps of half the time: the same loss per sample seen.
    half = make_run(
        tmp_path / "half", steps=400, batch=16, step_ms=50.0, loss=lambda s: 2.0 / (1 + s / 40)
    )
    by_samples = compare(str(half), "--baseline", str(base), "--align", "samples")
    assert by_samples.exit_code == 0, by_samples.output
    assert "loss at matched samples" in by_samples.output
    by_step = compare(str(half), "--baseline", str(base))  # step 200 saw half the data
    assert by_step.exit_code == 1
    assert "regression: loss at matched step\n" in by_step.output


def test_bad_input_exits_2(base: Path, tmp_path: Path) -> None:
    missing = compare(str(tmp_path / "nope"), "--baseline", str(base))
    assert missing.exit_code == 2
    assert "is not a folder" in missing.output
    (tmp_path / "empty").mkdir()
    empty = compare(str(tmp_path / "empty"), "--baseline", str(base))
    assert "no TensorBoard event files" in empty.output
    with mindwatch.Monitor(tmp_path / "no_loss", {"print_every": 0}) as mon:
        mon.log_scalars(1, {"train/acc": 1.0})
    no_loss = compare(str(tmp_path / "no_loss"), "--baseline", str(base))
    assert no_loss.exit_code == 2
    assert "the run has no train/loss scalars" in no_loss.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("loss_rtl: 0.1\n")
    typo = compare(str(base), "--baseline", str(base), "--tolerances", str(bad))
    assert typo.exit_code == 2
    assert "loss_rtl" in typo.output
    assert "known keys: loss_rtol" in typo.output


def test_a_nan_stretch_in_the_baseline_does_not_hide_a_regression(tmp_path: Path) -> None:
    base = make_run(
        tmp_path / "nanbase",
        steps=600,
        loss=lambda s: float("nan") if 495 <= s <= 505 else 2.0 / (1 + s / 20),
    )
    worse = make_run(tmp_path / "worse", steps=600, loss=lambda s: 3 * 2.0 / (1 + s / 20))
    result = compare(str(worse), "--baseline", str(base))
    assert result.exit_code == 1
    assert "loss at matched step" in result.output.split("regression:")[1]


def noisy(folder: Path, seed: int, *, scale: float = 1.0, step_ms: float = 100.0) -> Path:
    """One seed of a noisy job: 30 % loss noise per step, 15 % step time jitter, and an
    eval loss every 30 steps with 30 % noise of its own (a small eval set)."""
    rng = np.random.default_rng(seed + 1000)
    # In the run's own session: a second Monitor on a finished run writes a new run.
    evals = {s: scale * 0.25 * (1 + 0.3 * rng.standard_normal()) for s in range(30, 301, 30)}
    return make_run(
        folder,
        steps=300,
        seed=seed,
        loss=lambda s: scale * (0.2 + 2.0 / (1 + s / 20)),
        loss_noise=0.3,
        step_ms=step_ms,
        jitter=0.15,
        eval_losses=evals,
    )


def test_another_seed_passes_where_a_fixed_10_percent_line_fails(tmp_path: Path) -> None:
    base = noisy(tmp_path / "seed0", 0)
    for seed in (1, 2, 3):
        other = noisy(tmp_path / f"seed{seed}", seed)
        result = compare(str(other), "--baseline", str(base))
        assert result.exit_code == 0, result.output
        assert "x standard error" in result.output
        # ten evaluations: the eval loss's limit is its own noise, not the 5 % tolerance
        assert "last value; limit: 3.5 x standard error" in result.output
    # Without the noise criterion (the explicit tolerances alone) some seed fails.
    strict = [
        compare(
            str(tmp_path / f"seed{s}"),
            "--baseline",
            str(base),
            "--loss-sigmas",
            "0",
            "--perf-sigmas",
            "0",
        ).exit_code
        for s in (1, 2, 3)
    ]
    assert 1 in strict


def test_a_regression_larger_than_the_noise_fails(tmp_path: Path) -> None:
    base = noisy(tmp_path / "base", 0)
    worse = compare(str(noisy(tmp_path / "worse", 1, scale=2.0)), "--baseline", str(base))
    assert worse.exit_code == 1, worse.output
    # (the eval loss, noisy by 30 % per evaluation, may stay inside its own noise)
    assert "regression: final loss, loss at matched step" in worse.output
    slow = compare(str(noisy(tmp_path / "slow", 1, step_ms=200.0)), "--baseline", str(base))
    assert slow.exit_code == 1, slow.output
    assert "regression: throughput (samples_per_s), step time (ms)\n" in slow.output


def test_an_explicit_tolerance_is_a_floor_under_the_noise(tmp_path: Path) -> None:
    base = noisy(tmp_path / "base", 0)
    worse = noisy(tmp_path / "worse", 1, scale=2.0)
    # A tolerance above the noise band decides; one below it leaves the noise band.
    loose = ("--loss-rtol", "3", "--eval-rtol", "3")
    assert compare(str(worse), "--baseline", str(base), *loose).exit_code == 0
    data = json.loads(
        compare(str(worse), "--baseline", str(base), "--loss-rtol", "0", "--json", "-").output
    )
    final = next(c for c in data["checks"] if c["name"] == "final loss")
    assert final["noise"] > 0
    assert final["limit"] == pytest.approx(final["baseline"] + 3.5 * final["noise"])
    assert final["set_by"] == "standard error"
    assert data["tolerances"]["loss_sigmas"] == 3.5
    # More sigmas in a tolerances file widen the band.
    wide = tmp_path / "wide.yaml"
    wide.write_text("loss_sigmas: 100\n")
    assert compare(str(worse), "--baseline", str(base), "--tolerances", str(wide)).exit_code == 0


def scalars(
    *, steps: int, every: int = 1, batch: int = 32, seq: int = 0, scale: float = 1.0
) -> pd.DataFrame:
    """A run's scalars as ``load_run`` gives them, logged every ``every`` steps: the loss
    per sample seen falls alike for every batch size; 100 ms per step of 32 samples."""
    rows = []
    for step in range(every, steps + 1, every):
        ms = 100.0 * batch / 32
        seen = step * batch
        rows += [
            ("train/loss", step, scale * 2.0 / (1 + seen / 640)),
            ("perf/step_time_ms", step, ms),
            ("perf/samples_per_s", step, batch * 1000.0 / ms),
        ]
        if seq:
            rows.append(("perf/tokens_per_s", step, seq * batch * 1000.0 / ms))
    return pd.DataFrame(rows, columns=["tag", "step", "value"])


@pytest.mark.parametrize("align", ["samples", "tokens"])
def test_matched_positions_count_samples_and_tokens_from_the_first_step(align: str) -> None:
    # Batch 32 for 200 steps and batch 16 for 400, logged every step or every 10 steps:
    # all saw 6,400 samples (x 128 tokens each), the last position is there, and the same
    # loss per sample seen passes while a worse one fails.
    unit = 128 if align == "tokens" else 1
    base = scalars(steps=200, seq=128)
    half = scalars(steps=400, batch=16, every=10, seq=128)
    tol = Tolerances(align=align, checkpoints=1)  # type: ignore[arg-type]
    (check,) = [c for c in compare_runs(half, [base], tol) if c.name.startswith("loss at")]
    assert check.name == f"loss at matched {align}"
    assert check.status == "ok"
    assert check.statistic == f"mean of the stretch before {6400 * unit:,} {align}"
    assert check.detail.startswith(f"worst of 1 positions: {6400 * unit:,} {align}; ")
    worse = scalars(steps=400, batch=16, every=10, seq=128, scale=1.5)
    (check,) = [c for c in compare_runs(worse, [base], tol) if c.name.startswith("loss at")]
    assert check.status == "regression"
    # by step, the half batch's step 200 saw half the samples: a higher loss
    by_step = Tolerances(checkpoints=1)
    (check,) = [c for c in compare_runs(half, [base], by_step) if c.name.startswith("loss at")]
    assert (check.statistic, check.status) == ("mean of the stretch before step 200", "regression")
    # a run without the rate to align by is skipped, and says why
    bare = half[half["tag"] != f"perf/{align}_per_s"]
    (check,) = [c for c in compare_runs(bare, [base], tol) if c.name.startswith("loss at")]
    assert (check.status, check.detail) == ("skipped", f"no perf/{align}_per_s to align by")
    no_time = half[half["tag"] != "perf/step_time_ms"]
    (check,) = [c for c in compare_runs(no_time, [base], tol) if c.name.startswith("loss at")]
    assert (check.status, check.detail) == ("skipped", f"no perf/{align}_per_s to align by")
