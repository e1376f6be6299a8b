"""The report's numbers: smoothed loss, warm-up left out of speed, durations, formatting.

Runs are real event files (mindwatch's writer, with the wall times a run would have),
read back by the same reader ``mindwatch report`` uses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.events.writer import EventFileWriter
from mindwatch.metrics.smoothing import ema
from mindwatch.run.record import RunRecord
from mindwatch.tools.report.formatting import duration, metric_value, milliseconds, number, value
from mindwatch.tools.report.summary import RunSummary, summarize
from mindwatch.tools.report.tables import comparison_table, spread_rows
from mindwatch.tools.report.warmup import warmup_points


def write_run(
    folder: Path,
    points: Mapping[int, Mapping[str, float]],
    *,
    start: float = 1_700_000_000.0,
    seconds_per_step: float = 0.005,
) -> None:
    """A run's event file: ``points`` per step, wall times ``seconds_per_step`` apart."""
    writer = EventFileWriter(folder)
    for step, scalars in points.items():
        wall = start + step * seconds_per_step
        writer.add_scalars(step, tuple((tag, float(v)) for tag, v in scalars.items()), wall)
    writer.close()


def summary_of(logdir: Path) -> dict[str, RunSummary]:
    return {run.name: run for run in summarize(mindwatch.read_scalars(logdir), logdir)}


def step_times(first: float = 881.0, warm: tuple[float, ...] = (), n: int = 300) -> list[float]:
    rng = np.random.default_rng(0)
    steady = 5.0 + 0.4 * rng.random(n - 1 - len(warm))
    return [first, *warm, *steady.tolist()]


# -- compile and warm-up steps -------------------------------------------------------


def test_the_881_ms_compile_step_is_left_out_of_step_time_and_throughput(
    tmp_path: Path,
) -> None:
    times = step_times(881.0, warm=(40.0, 12.0))
    write_run(
        tmp_path / "r",
        {
            s: {"perf/step_time_ms": t, "perf/samples_per_s": 32 / (t / 1000), "train/loss": 1.0}
            for s, t in enumerate(times, start=1)
        },
    )
    run = summary_of(tmp_path)["r"]
    # the compile step ran before the first point's wall time: the run lasted it too
    assert run.facts["duration_s"] == pytest.approx(299 * 0.005 + 0.881, abs=1e-3)
    facts = run.facts["throughput"]
    assert facts["excluded_steps"] == 3
    assert facts["excluded_until_step"] == 3
    reason = facts["excluded_reason"]
    assert "first logged step (step 1, 881 ms) includes compiling the graph" in reason
    assert "steps 2-3 ran more than 2x slower than the median of the rest (warm-up)" in reason
    step = facts["step_time_ms"]
    assert step["max"] < 5.5  # neither the compile step nor the warm-up
    assert step["mean"] == pytest.approx(np.mean(times[3:]))
    assert facts["samples_per_s"]["min"] == pytest.approx(32 / (max(times[3:]) / 1000))
    # With them, the mean would have been 8.6 ms: what the report used to print.
    assert np.mean(times) > 1.5 * step["mean"]


def test_only_leading_outliers_go_and_at_most_a_tenth_of_the_run() -> None:
    steady = [5.0] * 100
    assert warmup_points([881.0, *steady]) == 1
    assert warmup_points([881.0, 50.0, 20.0, 5.5, *steady]) == 3  # stops at a normal step
    assert warmup_points([5.0, *steady]) == 1  # the first logged step always (compile)
    # a slow step later (recompile, checkpoint) is part of the run's speed
    assert warmup_points([881.0, 5.0, 300.0, *steady]) == 1
    # a run slow throughout keeps its numbers beyond the cap (10 %, at most 20)
    assert warmup_points([881.0] + [50.0] * 30 + [5.0] * 70) == 11
    assert warmup_points([881.0] + [50.0] * 500 + [5.0] * 1000) == 21
    assert warmup_points([881.0, 5.0]) == 0  # too few points to tell
    assert warmup_points([881.0, float("nan"), *steady]) == 1


def test_rates_alone_say_which_steps_were_slow(tmp_path: Path) -> None:
    times = step_times(881.0, warm=(30.0,))
    write_run(
        tmp_path / "r",
        {s: {"perf/tokens_per_s": 4096 / (t / 1000)} for s, t in enumerate(times, start=1)},
    )
    facts = summary_of(tmp_path)["r"].facts["throughput"]
    assert facts["excluded_steps"] == 2
    assert "(step 1) includes compiling the graph; step 2 ran more" in facts["excluded_reason"]


# -- smoothed loss -------------------------------------------------------------------


def test_best_and_final_loss_are_read_from_the_smoothed_curve(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    steps = np.arange(1, 301)
    loss = 2.0 / (1 + steps / 30) + 0.3 * rng.random(300)
    loss[48] = 0.0017532  # one lucky batch at step 49
    write_run(tmp_path / "r", {int(s): {"train/loss": v} for s, v in zip(steps, loss)})
    facts = summary_of(tmp_path)["r"].facts["loss"]
    smooth = ema(loss, 0.6)
    assert facts["smoothing"] == 0.6
    assert facts["best_raw"] == pytest.approx(0.0017532)
    assert facts["best_raw_step"] == 49
    assert facts["best"] == pytest.approx(smooth.min())
    assert facts["best_step"] == int(steps[np.argmin(smooth)])
    assert facts["best"] > 0.1  # not the lucky batch
    assert facts["final"] == pytest.approx(smooth[-1])
    assert facts["final_raw"] == pytest.approx(loss[-1])
    assert facts["final"] != pytest.approx(facts["final_raw"])


def test_a_nan_loss_is_reported_not_smoothed_away(tmp_path: Path) -> None:
    write_run(
        tmp_path / "r",
        {s: {"train/loss": 1.0 / s if s < 20 else float("nan")} for s in range(1, 26)},
    )
    facts = summary_of(tmp_path)["r"].facts["loss"]
    assert facts["final"] == "NaN"  # JSON has no NaN: the report says it in words
    assert facts["nonfinite"] == 6
    assert facts["best_step"] == 19


# -- duration ------------------------------------------------------------------------


def test_duration_comes_from_the_runs_own_wall_times(tmp_path: Path) -> None:
    write_run(
        tmp_path / "short", {s: {"train/loss": 1.0} for s in range(1, 301)}, seconds_per_step=0.014
    )
    write_run(
        tmp_path / "long", {s: {"train/loss": 1.0} for s in range(1, 101)}, seconds_per_step=37.5
    )
    runs = summary_of(tmp_path)
    assert runs["short"].facts["duration_s"] == pytest.approx(299 * 0.014, abs=1e-3)
    assert runs["long"].facts["duration_s"] == pytest.approx(99 * 37.5, abs=1e-3)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["report", str(tmp_path), "--out", str(out), "--format", "md"]
    )
    assert result.exit_code == 0, result.output
    text = (out / "report.md").read_text()
    assert "| **4.2 s** |" in text  # the shorter: marked best
    assert "| 1 h 02 min |" in text


def test_the_time_axis_is_the_wall_clock_with_its_pauses(tmp_path: Path) -> None:
    """The interactive report's "x: time" is seconds since the run started, from the
    points' wall times: an evaluation or checkpoint pause shows, the compile step counts."""
    from mindwatch.tools.report.interactive import interactive_plots

    writer = EventFileWriter(tmp_path / "r")
    for step in range(1, 201):
        # steps 101-200 come 60 s later: a pause (an evaluation) in the middle of the run
        wall = 1_700_000_000.0 + step * 0.005 + (60 if step > 100 else 0)
        ms = 881.0 if step == 1 else 5.0
        writer.add_scalars(step, (("train/loss", 1.0), ("perf/step_time_ms", ms)), wall)
    writer.close()
    run = summary_of(tmp_path)["r"]
    timeline = interactive_plots([run])[0].spec
    buttons = [b for m in timeline["layout"]["updatemenus"] for b in m["buttons"]]
    time_button = next(b for b in buttons if b["label"] == "x: time")
    loss_x = time_button["args"][0]["x"][0]  # the first trace: the raw loss
    assert loss_x[0] == pytest.approx(0.881, abs=1e-3)  # step 1 ended after compiling
    assert loss_x[99] == pytest.approx(0.881 + 99 * 0.005, abs=1e-3)
    assert loss_x[100] == pytest.approx(0.881 + 100 * 0.005 + 60, abs=1e-3)  # the pause
    assert loss_x[-1] == pytest.approx(0.881 + 199 * 0.005 + 60, abs=1e-3)
    title = time_button["args"][1]
    assert "wall-clock time since the run started (s)" in title.values()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.35, "0.35 s"),
        (4.186, "4.2 s"),
        (42.0, "42.0 s"),
        (59.96, "1 min 00 s"),
        (185.2, "3 min 05 s"),
        (3599.7, "1 h 00 min"),
        (3720.0, "1 h 02 min"),
        (2 * 86400 + 3 * 3600, "2 d 03 h"),
        (None, "-"),
        (float("nan"), "-"),
        ("NaN", "-"),
    ],
)
def test_duration_text(seconds: Any, text: str) -> None:
    assert duration(seconds) == text


# -- number formatting ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "digits", "text"),
    [
        (0.6755183786153793, 3, "0.676"),
        (2580.457763671875, 3, "2,580"),
        (14735.2, 3, "14,700"),
        (9.996, 3, "10.0"),
        (0.0017532, 4, "0.001753"),
        (3e-5, 3, "3.00e-5"),
        (1234567, 3, "1,234,567"),
        (np.float32(0.5), 3, "0.500"),
        (np.int64(7), 3, "7"),
        (0.0, 3, "0"),
        (float("nan"), 3, "NaN"),
        (float("-inf"), 3, "-inf"),
        (None, 3, "-"),
    ],
)
def test_numbers_to_significant_digits(x: Any, digits: int, text: str) -> None:
    assert number(x, digits) == text


def test_units() -> None:
    assert milliseconds(5.2123) == "5.21 ms"
    assert milliseconds(881.3) == "881 ms"
    assert milliseconds(12_345.0) == "12.3 s"
    assert metric_value("samples_per_s", 2580.457763671875) == "2,580 samples/s"
    assert metric_value("tokens_per_s", None) == "-"
    assert value("finished") == "finished"
    assert value(0.6755183786153793) == "0.676"


def test_no_raw_float_reaches_any_format(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    times = step_times(881.0)
    write_run(
        tmp_path / "r",
        {
            s: {
                "train/loss": 1 / s + 0.01 * rng.random(),
                "perf/step_time_ms": t,
                "perf/samples_per_s": 32 / (t / 1000),
                "ranks/samples_per_s_argmax": float(s % 2),
                "ranks/samples_per_s_min": 2580.457763671875,
                "ranks/samples_per_s_max": 2580.457763671875 + 0.6755183786153793,
            }
            for s, t in enumerate(times, start=1)
        },
    )
    (run,) = summary_of(tmp_path).values()
    assert spread_rows(run) == [("samples_per_s", "0", "0.676 samples/s")]
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["report", str(tmp_path), "--out", str(out), "--format", "md"]
    )
    assert result.exit_code == 0, result.output
    from mindwatch.tools.report.rows import summary_rows, throughput_rows

    shown = [v for _, v in summary_rows(run)]
    shown += [v for _, stats in throughput_rows(run) for v in stats.values()]
    shown.append((out / "report.md").read_text())
    for static in ([], ["--static"]):  # the HTML's text, not its charts' data
        args = ["report", str(tmp_path), "--out", str(out), "--format", "html", *static]
        assert CliRunner().invoke(main, args).exit_code == 0
        html = (out / "report.html").read_text()
        shown.append(re.sub(r"<(script|svg)\b.*?</\1>", "", html, flags=re.DOTALL))
    long_floats = [_long_float(t) for t in shown if _long_float(t)]
    assert long_floats == []


def _long_float(text: str) -> Optional[str]:
    import re

    for found in re.findall(r"\d[\d,]*\.\d+", text):  # more than 4 significant digits
        if len(found.replace(",", "").replace(".", "").lstrip("0")) > 4:
            return str(found)
    return None


# -- comparison table ----------------------------------------------------------------


def test_comparison_table_marks_the_best_value_per_column(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    for name, scale, ms, per_step in (
        ("a", 1.0, 5.0, 0.01),
        ("b", 0.8, 8.0, 0.02),
        ("c", 1.2, 4.0, 0.005),
    ):
        write_run(
            tmp_path / name,
            {
                s: {
                    "train/loss": scale * (2 / (1 + s / 30) + 0.2 * rng.random()),
                    "perf/step_time_ms": 881.0 if s == 1 else ms,
                    "perf/samples_per_s": 32 / (ms / 1000) if s > 1 else 36.3,
                }
                for s in range(1, 201)
            },
            seconds_per_step=per_step,
        )
    runs = list(summary_of(tmp_path).values())
    table = comparison_table(runs)
    assert table.header == [
        "run",
        "final loss (smoothed)",
        "best loss (smoothed)",
        "samples/s (median)",
        "duration",
    ]
    assert [row[0] for row in table.rows] == ["a", "b", "c"]
    assert table.best == {1: 1, 2: 1, 3: 2, 4: 2}  # b's loss, c's speed and duration
    assert table.rows[2][3] == "8,000 samples/s"  # median without the compile step
    assert table.rows[2][4] == "1.9 s"  # 199 x 5 ms apart, after the 881 ms first step
    assert table.rows[1][4] == "4.9 s"
    assert any("weight 0.6)" in note for note in table.notes)
    assert any("steps left out: 1 in each run." in note for note in table.notes)
    md = CliRunner().invoke(
        main, ["report", str(tmp_path), "--out", str(tmp_path / "o"), "--format", "md"]
    )
    assert md.exit_code == 0, md.output
    text = (tmp_path / "o" / "report.md").read_text()
    assert "| **8,000 samples/s** | **1.9 s** |" in text


def test_one_run_marks_nothing() -> None:
    run = RunSummary(
        "solo", Path("."), RunRecord(), {}, facts={"loss": {"final": 1.0, "best": 0.5}}
    )
    table = comparison_table([run])
    assert table.best == {}
    assert table.rows == [["solo", "1.000", "0.5000", "-", "-"]]


def test_a_step_logged_again_keeps_its_last_value_in_step_order() -> None:
    """Each tag's series: step order, the later point of a step logged twice (a resumed
    run writes steps again from an earlier one), tags in the order they first appear."""
    import pandas as pd

    from mindwatch.tools.report.summary import _tag_series

    rows = [("b", 1, 1.0), ("a", 1, 10.0), ("b", 2, 2.0), ("b", 3, 3.0), ("b", 2, 20.0)]
    rows += [("a", 2, 11.0), ("b", 3, 30.0), ("b", 4, 40.0)]
    frame = pd.DataFrame(rows, columns=["tag", "step", "value"])
    frame["wall_time"] = np.arange(len(frame), dtype=np.float64)
    series = _tag_series(frame)
    assert list(series) == ["b", "a"]
    assert series["b"].steps.tolist() == [1, 2, 3, 4]
    assert series["b"].values.tolist() == [1.0, 20.0, 30.0, 40.0]
    walls = series["b"].walls
    assert walls is not None
    assert walls.tolist() == [0.0, 4.0, 6.0, 7.0]
    assert series["a"].values.tolist() == [10.0, 11.0]


def test_values_printed_alike_are_marked_alike() -> None:
    """1.96 s and 2.01 s both print "2.0 s": marking one of them would mark a difference
    the reader cannot see."""
    from mindwatch.tools.report.tables import Table

    table = Table(["run", "duration"], [["a", "2.0 s"], ["b", "2.0 s"], ["c", "3.1 s"]])
    table.best = {1: 0}
    assert [table.is_best(r, 1) for r in range(3)] == [True, True, False]


def test_the_band_across_ranks_is_on_the_jobs_scale() -> None:
    """The job's samples/s is the sum over ranks; the band is its slowest and fastest
    rank times the ranks, so the job's line lies in it (the ranks' own values, half of
    it with 2 ranks, drew the band far below the line)."""
    from mindwatch.tools.report.summary import Series, throughput_band

    steps = np.arange(1, 4)
    run = RunSummary(
        name="job",
        folder=Path("."),
        info=RunRecord(world_size=2),
        series={
            "perf/samples_per_s": Series(steps, np.array([1000.0, 1010.0, 990.0])),
            "ranks/samples_per_s_min": Series(steps, np.array([450.0, 500.0, 480.0])),
            "ranks/samples_per_s_max": Series(steps, np.array([550.0, 510.0, 510.0])),
        },
        facts={"world_size": 2},
    )
    band = throughput_band(run, "samples_per_s")
    assert band is not None
    _at, low, high, ranks = band
    assert ranks == 2
    assert low.tolist() == [900.0, 1000.0, 960.0]
    assert high.tolist() == [1100.0, 1020.0, 1020.0]
    job = run.series["perf/samples_per_s"].values
    assert (low <= job).all()
    assert (job <= high).all()
    assert throughput_band(run, "tokens_per_s") is None
