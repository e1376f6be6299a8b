"""``mindwatch compare``'s limits come from the noise of each compared statistic between two
runs of a job, not from one step's noise.

Runs are written with :class:`mindwatch.Monitor` as a job would write them
(examples/compare_jitter.py): 600 steps, a falling loss with 30 % relative noise per
step, and throughput of 5,000 samples/s with uniform per-step jitter. Seeds of one job
must pass against each other in every pairing; a 25 % worse final loss, a 40 % lower
throughput (with +-30 % and with +-10 % jitter), and a 15 % lower one against three
baselines of the job must fail. The defaults are not tuned to these cases: each check
allows 3.5 standard errors of the difference, a one-sided false-alarm rate of 2.3e-4
per check for normal noise (docs/compare.md).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import pytest
from examples.compare_jitter import STEPS, written_run

from mindwatch.tools.compare import CompareError, Tolerances, compare_runs, load_run
from mindwatch.tools.compare.noise import (
    autocorrelation_time,
    point_noise,
    spread,
    standard_error,
)


def verdicts(run: Path, *baselines: Path) -> dict[str, str]:
    checks = compare_runs(load_run(run).frame, [load_run(b).frame for b in baselines], Tolerances())
    return {c.name: c.status for c in checks}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("seeds")
    return [written_run(root / f"seed{s}", s) for s in range(10)]


def test_seeds_of_one_job_pass_in_every_pairing(seeds: list[Path]) -> None:
    # 10 runs, 90 ordered pairs, 5 checks each: none may fail, and none may come close
    # to its limit by more than the design allows (a sign the noise is underestimated).
    frames = [load_run(s).frame for s in seeds]
    scores: dict[str, list[float]] = {}
    for run, base in itertools.permutations(range(len(frames)), 2):
        for check in compare_runs(frames[run], [frames[base]], Tolerances()):
            assert check.status == "ok", (run, base, check)
            assert check.baseline is not None
            assert check.run is not None
            if check.noise:
                change = check.run - check.baseline
                if check.name.startswith(("throughput", "step time")):  # in logarithms
                    change = float(np.log(check.run / check.baseline))
                scores.setdefault(check.name, []).append(change / check.noise)
    # The differences of healthy runs spread as their standard errors say: the final
    # loss's difference in standard errors has a standard deviation near 1 (far above:
    # the noise is underestimated and seeds fail; far below: the gate is blind).
    final = np.array(scores["final loss"])
    assert 0.6 < np.std(final) < 1.6, np.std(final)
    throughput = np.array(scores["throughput (samples_per_s)"])
    assert 0.6 < np.std(throughput) < 1.6, np.std(throughput)


def test_the_noise_is_the_statistics_not_one_steps(seeds: list[Path]) -> None:
    # The per-step jitter is +-30 % (17 % standard deviation); the median of 540 steps
    # moves by well under 2 % between runs, and the standard error says so.
    check = next(
        c
        for c in compare_runs(load_run(seeds[1]).frame, [load_run(seeds[0]).frame], Tolerances())
        if c.name.startswith("throughput")
    )
    assert check.noise is not None
    assert 0.005 < check.noise < 0.03
    medians = [np.log(float(np.exp(np.median(np.log(_rates(s)))))) for s in seeds]
    measured = spread(medians)
    assert measured is not None
    # sqrt(2) x se is the noise of a difference of two runs: it matches the measured one
    assert check.noise / np.sqrt(2) == pytest.approx(measured, rel=0.5)


def _rates(run: Path) -> np.ndarray:
    frame = load_run(run).frame
    values = frame[frame["tag"] == "perf/samples_per_s"]["value"].to_numpy()
    return values[len(values) // 10 :]


@pytest.mark.parametrize("jitter", [0.3, 0.1])
def test_a_40_percent_lower_throughput_fails(
    seeds: list[Path], tmp_path: Path, jitter: float
) -> None:
    base = seeds[0] if jitter == 0.3 else written_run(tmp_path / "base", 0, jitter=jitter)
    slow = written_run(tmp_path / "slow", 1, jitter=jitter, speed=0.6)
    found = verdicts(slow, base)
    assert found["throughput (samples_per_s)"] == "regression"
    assert found["step time (ms)"] == "regression"
    assert found["final loss"] == found["loss at matched step"] == "ok"
    # and a run of normal speed with the same jitter passes
    assert verdicts(written_run(tmp_path / "same", 2, jitter=jitter), base)[
        "throughput (samples_per_s)"
    ] == ("ok")


def test_a_15_percent_lower_throughput_fails_against_three_baselines(tmp_path: Path) -> None:
    bases = [written_run(tmp_path / f"b{s}", s, jitter=0.1) for s in range(3)]
    slow = written_run(tmp_path / "slow", 7, jitter=0.1, speed=0.85)
    checks = compare_runs(load_run(slow).frame, [load_run(b).frame for b in bases], Tolerances())
    throughput = next(c for c in checks if c.name.startswith("throughput"))
    assert throughput.status == "regression"
    assert throughput.set_by in ("tolerance", "baselines", "standard error")
    assert throughput.baseline == pytest.approx(5000, rel=0.02)
    same = written_run(tmp_path / "same", 8, jitter=0.1)
    assert verdicts(same, *bases)["throughput (samples_per_s)"] == "ok"


def test_a_25_percent_worse_final_loss_fails(seeds: list[Path], tmp_path: Path) -> None:
    worse = written_run(tmp_path / "worse", 1, final_scale=1.25)
    checks = {
        c.name: c
        for c in compare_runs(load_run(worse).frame, [load_run(seeds[0]).frame], Tolerances())
    }
    final = checks["final loss"]
    assert final.status == "regression"
    assert final.set_by == "standard error"
    assert final.run is not None
    assert final.baseline is not None
    assert final.run / final.baseline == pytest.approx(1.25, abs=0.08)
    assert checks["throughput (samples_per_s)"].status == "ok"


def test_the_final_window_is_the_last_points(seeds: list[Path], tmp_path: Path) -> None:
    # A run that is worse only at its end: the final loss must see it, the early
    # points (identical in scale to the baseline's) must not decide.
    worse = written_run(tmp_path / "late", 0, final_scale=1.5)
    frame = load_run(worse).frame
    (final,) = [
        c
        for c in compare_runs(frame, [load_run(seeds[0]).frame], Tolerances())
        if c.name == "final loss"
    ]
    losses = frame[frame["tag"] == "train/loss"]["value"].to_numpy()
    assert final.run == pytest.approx(float(np.median(losses[-120:])))
    assert final.status == "regression"


def test_a_nan_final_loss_fails_the_final_loss_check(seeds: list[Path], tmp_path: Path) -> None:
    folder = written_run(tmp_path / "nan", 1, nan_from=STEPS - 5)
    checks = {
        c.name: c
        for c in compare_runs(load_run(folder).frame, [load_run(seeds[0]).frame], Tolerances())
    }
    assert checks["final loss"].status == "regression"
    assert checks["final loss"].run is not None
    assert np.isnan(checks["final loss"].run)
    # the last stretch holds them too; the throughput is untouched
    assert checks["loss at matched step"].status == "regression"
    assert checks["throughput (samples_per_s)"].status == "ok"


def test_several_baselines_measure_the_spread(tmp_path: Path) -> None:
    # Three runs of a job whose seeds differ by their whole level (+-10 %), as trajectories
    # of small models do: one baseline cannot see that, three measure it.
    levels = {0: 1.0, 1: 1.1, 2: 0.9, 3: 1.08}
    runs = {s: written_run(tmp_path / f"r{s}", s, loss_scale=k) for s, k in levels.items()}
    one = {
        c.name: c
        for c in compare_runs(load_run(runs[3]).frame, [load_run(runs[0]).frame], Tolerances())
    }
    assert one["final loss"].set_by == "standard error"
    many = compare_runs(
        load_run(runs[3]).frame, [load_run(runs[s]).frame for s in (0, 1, 2)], Tolerances()
    )
    final = next(c for c in many if c.name == "final loss")
    assert final.set_by == "baselines"
    assert final.status == "ok"
    assert final.baseline == pytest.approx(np.mean([one["final loss"].baseline]) * 1.0, rel=0.1)
    assert final.noise is not None
    assert one["final loss"].noise is not None
    assert final.noise > 2 * one["final loss"].noise


def test_standard_error_of_a_median_under_autocorrelation() -> None:
    # Independent points: the textbook 1.2533 sigma / sqrt(n); correlated ones (AR(1),
    # r = 0.8: nine steps make one independent point) three times larger, as the
    # spread of many such medians shows.
    rng = np.random.default_rng(3)
    iid = [standard_error(rng.standard_normal(540)) for _ in range(20)]
    assert np.median(iid) == pytest.approx(1.2533 / np.sqrt(540), rel=0.15)
    series = np.zeros(540 * 60)
    shocks = rng.standard_normal(len(series))
    for i in range(1, len(series)):
        series[i] = 0.8 * series[i - 1] + shocks[i]
    chunks = series.reshape(60, 540)
    true = np.std([np.median(c) for c in chunks])
    estimates = [standard_error(c) for c in chunks[:20]]
    assert np.median(estimates) == pytest.approx(true, rel=0.3)
    assert autocorrelation_time(chunks[0]) == pytest.approx(9.0, rel=0.4)
    assert standard_error([1.0, 2.0, 3.0]) is None
    assert spread([1.0]) is None
    assert spread([1.0, 3.0]) == pytest.approx(np.sqrt(2))


def _frame(
    evals: dict[str, list[float]], *, steps: int = 200, rates: Optional[np.ndarray] = None
) -> pd.DataFrame:
    """A run's scalars as ``load_run`` gives them: a falling train/loss every step, each
    eval tag's values evenly spaced over the run, and ``rates`` as perf/samples_per_s
    (batch 32) with its step time."""
    rows = [("train/loss", s, 2.0 / (1 + s / 20)) for s in range(1, steps + 1)]
    for tag, values in evals.items():
        every = steps // len(values)
        rows += [(tag, every * (i + 1), v) for i, v in enumerate(values)]
    for s, rate in enumerate(() if rates is None else rates, start=1):
        rows += [("perf/samples_per_s", s, rate), ("perf/step_time_ms", s, 32_000.0 / rate)]
    return pd.DataFrame(rows, columns=["tag", "step", "value"])


def test_point_noise_is_one_points_noise_around_the_course() -> None:
    # Independent noise of 0.5 around a falling quadratic: the trend is not noise, and
    # the estimate is the noise's standard deviation (not the differences', sqrt(2) larger).
    rng = np.random.default_rng(11)
    x = np.linspace(0.0, 1.0, 20_000)
    values = 3.0 - 2.0 * x + x * x + 0.5 * rng.standard_normal(len(x))
    assert point_noise(values) == pytest.approx(0.5, rel=0.03)
    assert point_noise(values * 4) == pytest.approx(2.0, rel=0.03)
    # below 8 finite points there is none; non-finite points are left out
    eight = [1.0, 1.2, 0.9, 1.1, 1.0, 0.8, 1.05, 0.95]
    assert point_noise(eight[:7]) is None
    assert point_noise([*eight[:7], math.nan, math.inf]) is None
    assert point_noise([*eight, math.nan]) == point_noise(eight)
    steps = np.diff(eight)
    expected = 1.4826 * np.median(np.abs(steps - np.median(steps))) / math.sqrt(2.0)
    assert point_noise(eight) == pytest.approx(expected)


@pytest.mark.parametrize("count", [8, 20])
def test_an_eval_metric_evaluated_often_enough_has_its_own_noise(count: int) -> None:
    # One baseline, each metric evaluated `count` times: the noise of the difference is
    # sqrt(2) x one evaluation's noise around its course; a loss-like metric may not rise
    # by more than 3.5 of it, an accuracy not fall. A run exactly at its limit passes.
    rng = np.random.default_rng(count)
    course = np.linspace(1.0, 0.0, count)
    base_evals = {
        "eval/loss": list(0.25 + 0.1 * course + 0.02 * rng.standard_normal(count)),
        "eval/acc": list(0.9 - 0.1 * course + 0.02 * rng.standard_normal(count)),
    }
    base = _frame(base_evals)
    checks = {c.name: c for c in compare_runs(base, [base], Tolerances())}
    for tag, sign in (("eval/loss", 1.0), ("eval/acc", -1.0)):
        check = checks[tag]
        noise = point_noise(base_evals[tag])
        assert noise is not None
        assert check.noise == pytest.approx(math.sqrt(2.0) * noise)
        assert check.set_by == "standard error"
        assert check.baseline == check.run == base_evals[tag][-1]
        assert check.limit == pytest.approx(check.baseline + sign * 3.5 * check.noise)
        assert check.detail == f"last value; limit: 3.5 x standard error {check.noise:.3g}"
        assert check.sigmas == 3.5
        assert check.status == "ok"
        # both sides of the limit: at it passes, a hair beyond it fails
        assert check.limit is not None
        for got, status in ((check.limit, "ok"), (check.limit + sign * 1e-9, "regression")):
            run = _frame({**base_evals, tag: [*base_evals[tag][:-1], got]})
            (again,) = [c for c in compare_runs(run, [base], Tolerances()) if c.name == tag]
            assert again.limit == check.limit
            assert (again.run, again.status) == (got, status)


def test_an_eval_metric_evaluated_rarely_is_held_to_its_tolerance_alone() -> None:
    # 7 evaluations: no noise to measure; the 5 % tolerance sets the limit and says why.
    base = _frame({"eval/acc": [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.8]})
    for got, status in ((0.76, "ok"), (0.8 * 0.95, "ok"), (0.759, "regression")):
        run = _frame({"eval/acc": [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, got]})
        (check,) = [c for c in compare_runs(run, [base], Tolerances()) if c.name == "eval/acc"]
        assert (check.noise, check.set_by) == (None, "tolerance")
        assert check.limit == pytest.approx(0.8 * 0.95)
        assert check.detail == (
            "last value; limit: tolerance (one value per run: more baselines measure its noise)"
        )
        assert check.status == status, got
    # an eval tag one run lacks is not compared; the others still are
    other = _frame({"eval/acc": [0.8] * 7, "eval/f1": [0.7] * 7})
    names = [c.name for c in compare_runs(other, [base], Tolerances())]
    assert "eval/acc" in names
    assert "eval/f1" not in names


@pytest.mark.parametrize("count", [2, 3, 5])
def test_several_baselines_measure_an_eval_metrics_noise_as_their_spread(count: int) -> None:
    rng = np.random.default_rng(count)
    lasts = list(0.9 + 0.02 * rng.standard_normal(count))
    bases = [_frame({"eval/acc": [0.5] * 19 + [last]}) for last in lasts]
    run = _frame({"eval/acc": [0.5] * 19 + [0.85]})
    (check,) = [c for c in compare_runs(run, bases, Tolerances()) if c.name == "eval/acc"]
    noise = float(np.std(lasts, ddof=1)) * math.sqrt(1 + 1 / count)
    assert check.noise == pytest.approx(noise)
    assert check.baseline == pytest.approx(np.mean(lasts))
    band = max(3.5 * noise, 0.05 * float(np.mean(lasts)))
    assert check.limit == pytest.approx(np.mean(lasts) - band)
    # tied baselines: no spread, the tolerance holds
    tied = [_frame({"eval/acc": [0.5] * 19 + [0.9]}) for _ in range(count)]
    (check,) = [c for c in compare_runs(run, tied, Tolerances()) if c.name == "eval/acc"]
    assert (check.noise, check.set_by) == (0.0, "tolerance")
    assert check.limit == pytest.approx(0.9 * 0.95)
    assert check.status == "regression"  # 0.85 < 0.855


def test_a_speed_limit_set_by_the_noise_says_it_in_percent() -> None:
    # No explicit tolerance: the limit is 3.5 standard errors of the log median, shown
    # as the relative change it allows.
    rng = np.random.default_rng(5)
    base = _frame({}, steps=400, rates=5000.0 * (1 + 0.3 * rng.uniform(-1, 1, 400)))
    run = _frame({}, steps=400, rates=5000.0 * (1 + 0.3 * rng.uniform(-1, 1, 400)))
    tol = Tolerances(throughput_rtol=0, step_time_rtol=0)
    checks = {c.name: c for c in compare_runs(run, [base], tol)}
    for name in ("throughput (samples_per_s)", "step time (ms)"):
        check = checks[name]
        assert check.set_by == "standard error"
        assert check.noise is not None
        assert 0.005 < check.noise < 0.05
        size = f"{math.expm1(check.noise):.2%}"
        assert check.detail == f"median of 360 steps; limit: 3.5 x standard error {size}"


def _losses(values: list[float], first_step: int = 1) -> pd.DataFrame:
    steps = range(first_step, first_step + len(values))
    return pd.DataFrame({"tag": "train/loss", "step": list(steps), "value": values})


def test_the_final_loss_limit_adds_the_absolute_tolerance_to_the_relative_one() -> None:
    # A noiseless baseline (standard error 0): the limit is ref x (1 + loss_rtol) +
    # loss_atol, at which a run passes and a hair above which it fails.
    base = _losses([1.0] * 100)
    for atol, rtol in ((0.1, 0.05), (0.1, 0.0), (0.0, 0.05)):
        tol = Tolerances(loss_atol=atol, loss_rtol=rtol)
        limit = 1.0 * rtol + atol + 1.0
        for got, status in ((limit, "ok"), (limit + 1e-9, "regression")):
            run = _losses([2.0] * 80 + [got] * 20, first_step=11)
            final = compare_runs(run, [base], tol)[0]
            assert final.name == "final loss"
            assert final.limit == pytest.approx(limit, abs=1e-12)
            assert (final.run, final.status, final.set_by) == (got, status, "tolerance")
            assert final.detail == (
                "median of the last 20 points (run ends at step 110); limit: tolerance"
            )


def test_a_baseline_whose_loss_is_nan_throughout_is_refused() -> None:
    run = _losses([1.0] * 50)
    good = _losses([1.0] * 50)
    for bases in ([_losses([math.nan] * 50)], [good, _losses([math.nan] * 50), good]):
        with pytest.raises(CompareError) as caught:
            compare_runs(run, bases, Tolerances())
        assert str(caught.value) == (
            "a baseline's train/loss is NaN throughout: choose another baseline"
        )


@pytest.mark.parametrize("count", [2, 3, 5, 8])
def test_seeds_that_part_at_one_position_widen_every_position(count: int) -> None:
    # Noiseless baselines at a loss of 0.5 that agree everywhere but in steps 41-60,
    # where one runs 20 % higher: the root mean square of the positions' coefficients
    # of variation (one of ten non-zero) widens the position at steps 121-140, where
    # they agree, too.
    level = 0.5

    def baseline(bump: float) -> pd.DataFrame:
        return _losses([level * bump if 40 <= i < 60 else level for i in range(200)])

    bases = [baseline(1.2)] + [baseline(1.0) for _ in range(count - 1)]
    part = [1.2] + [1.0] * (count - 1)
    relative = float(np.std(part, ddof=1) / np.mean(part)) / math.sqrt(10)
    noise = relative * level * math.sqrt(1 + 1 / count)
    sigmas = 4.0724  # 3.5 standard errors for the worst of ten positions
    for rise, status in ((0.04, "ok"), (sigmas * noise / level + 0.005, "regression")):
        run = _losses([level * (1 + rise) if 120 <= i < 140 else level for i in range(200)])
        check = compare_runs(run, bases, Tolerances())[1]
        assert check.name == "loss at matched step"
        assert (check.baseline, check.run) == (level, pytest.approx(level * (1 + rise)))
        assert check.statistic == "mean of the stretch before step 140"
        assert check.noise == pytest.approx(noise)
        assert check.set_by == "baselines"
        assert check.sigmas == pytest.approx(sigmas, abs=1e-4)
        assert check.limit == pytest.approx(level + check.sigmas * noise)
        assert check.status == status
        assert check.detail == (
            f"worst of 10 positions: step 140; limit: 4.07 x spread of {count} baselines "
            f"{noise:.3g} (3.5 sigma for the worst of 10)"
        )


def test_runs_that_share_no_positions_skip_the_matched_check() -> None:
    base = _losses([1.0] * 100)  # steps 1-100
    for first, status in ((101, "skipped"), (100, "skipped"), (99, "ok")):
        run = _losses([1.0] * 100, first_step=first)
        check = compare_runs(run, [base], Tolerances())[1]
        assert check.status == status, first
        if status == "skipped":
            assert check.detail == "the runs share no positions"
            assert (check.name, check.baseline, check.run, check.limit) == (
                "loss at matched step",
                None,
                None,
                None,
            )


def test_a_baseline_without_a_finite_loss_where_the_runs_meet_skips_quietly() -> None:
    # Finite only before the run's first step: nothing to hold the run to at any
    # position, said so, without a numpy warning of an empty mean on the console.
    import warnings

    base = _losses([1.0] * 100 + [math.nan] * 100)
    run = _losses([1.0] * 100, first_step=101)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check = compare_runs(run, [base], Tolerances())[1]
    assert (check.name, check.status) == ("loss at matched step", "skipped")
    assert check.detail == "the baselines have no finite loss"


def test_a_matched_positions_noise_is_the_standard_error_of_its_mean() -> None:
    # Uniform noise of +-0.3 around a flat loss, 600 steps, ten stretches of 60: the
    # mean of a stretch has a standard error of 0.3 / sqrt(3 x 60), the difference of
    # two runs' sqrt(2) that. (The median's would be sqrt(3) times larger for uniform
    # noise: the statistic must be the one the check compares.)
    expected = math.sqrt(2) * 0.3 / math.sqrt(3 * 60)
    ratios = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        base = _losses(list(1.0 + 0.3 * rng.uniform(-1, 1, 600)))
        run = _losses(list(1.0 + 0.3 * rng.uniform(-1, 1, 600)))
        check = compare_runs(run, [base], Tolerances())[1]
        assert check.status == "ok"
        assert check.set_by == "standard error"
        assert check.noise is not None
        ratios.append(check.noise / expected)
    # each estimate is itself uncertain by about a tenth
    assert 0.75 < min(ratios) <= max(ratios) < 1.3, ratios


def test_a_quadratic_course_is_trend_not_noise() -> None:
    # A loss falling along a parabola with noise 0.1: the standard error of the mean is
    # the noise's, 0.1 / sqrt(n), not the course's spread.
    x = np.linspace(0.0, 1.0, 300)
    ratios = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        values = 5.0 - 4.0 * x + 2.0 * x * x + 0.1 * rng.standard_normal(len(x))
        error = standard_error(values, np.mean, trend="quadratic")
        assert error is not None
        ratios.append(error / (0.1 / math.sqrt(len(x))))
    assert 0.7 < min(ratios) <= max(ratios) < 1.35, ratios


def test_the_resampling_in_chunks_does_not_change_the_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The chunk bounds memory (long runs resample in several); the replicates, and so the
    # estimate, are the same however many chunks they take.
    from mindwatch.tools.compare import noise

    rng = np.random.default_rng(2)
    values = rng.standard_normal(600)
    whole = [standard_error(values), standard_error(values, np.mean, trend="quadratic")]
    monkeypatch.setattr(noise, "_CHUNK", 50_000)  # chunks of 83 replicates, the last 68
    assert [standard_error(values), standard_error(values, np.mean, trend="quadratic")] == whole


def test_a_constant_series_has_no_noise_and_warns_of_nothing() -> None:
    # Constant stretches happen (a step time the timer rounds, a loss held at a value):
    # no noise, no numpy warning of a division by zero on the console.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat = np.full(50, 3.0)
        assert autocorrelation_time(flat) == 1.0
        assert standard_error(flat) == 0.0
        assert standard_error(flat, np.mean, trend="quadratic") == pytest.approx(0.0, abs=1e-12)
        assert point_noise(flat) == 0.0


def test_non_finite_speeds_are_left_out_of_the_speed_checks() -> None:
    # A step too short for the timer gives an infinite rate, a failed one a NaN: they are
    # not steps of the median, which is the finite steps' after the first tenth.
    rates = np.full(200, 5000.0)
    rates[100:120:2], rates[101:120:2] = math.nan, math.inf
    run = _frame({}, steps=200, rates=rates)
    base = _frame({}, steps=200, rates=np.full(200, 5000.0))
    checks = {c.name: c for c in compare_runs(run, [base], Tolerances())}
    throughput = checks["throughput (samples_per_s)"]
    assert throughput.statistic == "median of 162 steps"  # 180 finite, less 18
    assert throughput.run == pytest.approx(5000.0)
    assert throughput.status == "ok"
