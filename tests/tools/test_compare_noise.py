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
from pathlib import Path

import numpy as np
import pytest
from examples.compare_jitter import STEPS, written_run

from mindwatch.tools.compare import Tolerances, compare_runs, load_run
from mindwatch.tools.compare.noise import autocorrelation_time, spread, standard_error


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
