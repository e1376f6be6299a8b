"""Which rank holds a data-parallel job up: real ``msrun`` jobs with 2 and 4 CPU workers.

``scripts/straggler_train.py`` trains data-parallel under ``Model.train`` with
``TrainingMonitor`` and its default alert settings, the compute micro-benchmark run more
often than its default 30 s; one rank's input pipeline is made 3x slower for real (its
store answers 3x slower from a given batch on), or one rank's process shares its core
with busy processes, or nothing is planted. Rank 0's ``alerts.jsonl`` must name that
rank and the part soon after, and healthy jobs must raise no straggler alert.

At fast steps (a 4 ms store, steps of a few ms) the rule must gather many more
intervals to span its ``min_seconds`` than its ``intervals``: the job whose one rank's
store slows from 4 ms to 3x the job's pace mid-run (issue 38: a rule that kept the last
``intervals + 1`` judgements never spanned its 1 s below 25 ms steps and stayed
silent; the default is 2 s since).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mindwatch.rules.straggler import StragglerSettings
from tests.mindspore.test_multicard import msrun_command, msrun_env
from tests.tbread import scalars

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

SCRIPT = Path(__file__).with_name("scripts") / "straggler_train.py"
ONSET = 150
# Per-batch read time of a healthy store: about the compute time of a step at this
# world size on 2 cores, so that 3x is the job's bottleneck (a pipeline 3x slower that
# still keeps up with compute slows nothing, and nothing is to be named).
INPUT_MS = {2: 20.0, 4: 30.0}


# The default alert settings (the micro-benchmark every 30 s: not within these jobs of
# a few seconds), reducing every 10 steps. Healthy jobs run the benchmark every 2 s
# (6 to 15 runs), the compute tests at every reduction (every 10 steps, at
# least 0.3 s apart: the first two runs are not judged, the next three in a row name
# the rank within 100 steps). The interval of data waits after each run is left out
# (mindwatch.metrics.straggler), so the input tests keep the default.
def needed(store_ms: float) -> int:
    """The slow 10-step intervals the default settings need: ``intervals`` (3), and
    enough to span ``min_seconds`` at steps no faster than the slow store."""
    defaults = StragglerSettings()
    seconds = math.ceil(defaults.min_seconds * 1000.0 / (10 * store_ms))
    return max(defaults.intervals, seconds)


def config(bench_every_s: float, stop: bool, **straggler_settings: float) -> dict[str, Any]:
    straggler = {"bench_every_s": bench_every_s, **straggler_settings}
    alerts: dict[str, Any] = {"straggler": straggler, "stop_on": ["straggler"] if stop else []}
    return {"flush_secs": 0.2, "aggregate_every": 10, "alerts": alerts}


def job(
    out: Path,
    world: int,
    *args: str,
    bench_every_s: float = 30.0,
    stop: bool = False,
    **straggler: float,
) -> list[dict[str, Any]]:
    """The job under msrun with ``world`` CPU workers; rank 0's alerts. ``stop``: the
    job stops at its first straggler alert (every rank at the same step)."""
    settings = f"--config={json.dumps(config(bench_every_s, stop, **straggler))}"
    command = msrun_command(out, settings, *args, script=SCRIPT, workers=world)
    done = subprocess.run(command, env=msrun_env(), capture_output=True, text=True, timeout=300)
    log = (out / "log" / "worker_0.log").read_text(errors="replace")
    assert done.returncode == 0, log[-3000:]
    alerts = out / "run" / "alerts.jsonl"
    return [json.loads(line) for line in alerts.read_text().splitlines()] if alerts.exists() else []


@pytest.mark.parametrize("world", [2, 4])
def test_a_slow_input_pipeline_is_named_with_its_rank(tmp_path: Path, world: int) -> None:
    slow = world - 1
    alerts = job(
        tmp_path,
        world,
        "--steps=260",
        f"--input-ms={INPUT_MS[world]}",
        f"--slow-input={slow}",
        f"--slow-from={ONSET}",
    )
    found = [a for a in alerts if a["rule"] == "straggler"]
    assert found, alerts
    first = found[0]
    assert first["rank"] == slow, first
    assert first["part"] == "input pipeline"
    # The 16 prefetched batches, then the intervals the rule needs, one of them partly
    # healthy (the onset inside it), and one healthy interval tolerated.
    assert ONSET < first["step"] <= ONSET + 20 + 10 * (needed(3 * INPUT_MS[world]) + 2), first
    assert first["value"] < 0.4  # the score
    assert f"rank {slow} is the straggler" in first["message"]
    assert all(a["rank"] == slow for a in found), found


@pytest.mark.parametrize(("world", "busy"), [(2, 5), (4, 8)])
def test_a_slow_compute_rank_is_named_by_the_micro_benchmark(
    tmp_path: Path, world: int, busy: int
) -> None:
    """The last rank shares its core with ``busy`` spinning processes, the others share
    the other core(s): with 4 ranks on 2 cores three ranks share one core, so the slow
    rank needs more neighbours to get clearly less of its core (8: a ninth against a
    third). The job stops at the alert (``stop_on``): the spinners hold a whole core
    while it runs, which the rest of a shared machine (this suite) needs."""
    slow = world - 1
    planted = (f"--slow-compute={slow}", f"--busy={busy}")
    alerts = job(tmp_path, world, "--steps=150", *planted, bench_every_s=0.3, stop=True)
    found = [a for a in alerts if a["rule"] == "straggler"]
    assert found, alerts
    first = found[0]
    assert (first["rank"], first["part"]) == (slow, "compute"), first
    assert first["step"] <= 100, first  # five runs: two not judged, three in a row
    assert first["value"] < 0.5  # the score
    assert f"rank {slow} is the straggler: its compute is slower" in first["message"]


@pytest.mark.parametrize(("world", "steps"), [(2, 1500), (4, 400)])
def test_healthy_jobs_raise_no_straggler_alert(tmp_path: Path, world: int, steps: int) -> None:
    """30 s and 12 s and more (2 ranks take 20 ms a step, 4 ranks 30 ms on 2 cores), the
    micro-benchmark every 2 s, every interval judged.

    One long job for each world size, as many steps as the five and two jobs of 300 and
    200 steps it replaced: each msrun job spends about 9 s of CPU starting (the launcher,
    the scheduler and every worker import MindSpore), a third of a short job. A job's
    start, where a transient is likeliest, is judged in the four input-pipeline jobs of
    this module too, none of which may name a rank before its onset.

    The micro-benchmark runs every 2 s, not every 1 s: three slow runs in a row then
    span 6 s, not 3. In a fresh clone's run this machine took CPU from rank 0 alone for
    3 s (its MatMul 1.04 ms against 0.43 on rank 1, three runs in a row at step 1091),
    which the rule rightly said; by default the runs are 30 s apart, and the compute
    tests above name a rank whose neighbours spin for the whole job with runs 0.3 s
    apart."""
    store = f"--input-ms={INPUT_MS[world]}"
    alerts = job(tmp_path, world, f"--steps={steps}", store, bench_every_s=2.0)
    assert [a for a in alerts if a["rule"] == "straggler"] == [], alerts
    # Both parts were judged: interval medians, and micro-benchmark runs beyond the two
    # that are not judged.
    points = scalars(tmp_path / "run")
    assert len(points["ranks/input_wait_ms_max"]) >= steps // 20, points.keys()
    assert len(points["ranks/bench_ms_max"]) >= 4


FAST_ONSET = 120
# The old rule's blind spot: it kept 4 judgements, spanning 4 intervals; below
# min_seconds / (4 * interval) per step it could not warn. With the defaults of then (1
# s, 10-step intervals) that was 25 ms: a slow store of 12 ms a batch on an idle machine.
# The job keeps the defaults, as users do. 2-step intervals would put the blind spot
# below 125 ms steps whatever the load, but there a pause of every rank (a busy host)
# lets the slow store refill its 16-batch prefetch buffer, and the 20-odd steps that
# wait for nothing are 10 healthy intervals in a row, more than an episode tolerates:
# on this shared machine the job then warned late or not at all. The rule at every step
# length and interval, the old blind spot included: tests/rules/test_straggler.py and
# test_straggler_ranks.py, where the steps are given, not measured.
FAST: dict[str, float] = {}
FAST_INTERVAL = 10
FAST_STEPS = 420


def test_a_slow_input_pipeline_is_named_at_fast_steps(tmp_path: Path) -> None:
    """Rank 1's store answers in 4 ms, then, from batch 120, 3x slower than the job's
    pace (12 ms on an idle machine, where the steps take about 4 ms; on a busy one the
    compute sets a longer pace and the store must be 3x that to hold the job up: the
    mechanism, not the machine's load, makes the straggler).

    The bound counts intervals, not seconds: the steps cannot be faster than the slow
    store, so the rule's 2 s of slow intervals takes at most ceil(2000 / (10 * store
    ms)) 10-step intervals (at least its 3), with up to one healthy interval for every 3
    of them tolerated in between (a pause on a busy host lets the slow store fill its
    buffer); before them, 20 steps for the 16 prefetched batches and the onset."""
    alerts = job(
        tmp_path,
        2,
        f"--steps={FAST_STEPS}",
        "--input-ms=4",
        "--slow-input=1",
        f"--slow-from={FAST_ONSET}",
        "--slow-pace",
        **FAST,
    )
    log = (tmp_path / "log" / "worker_1.log").read_text(errors="replace")
    found_store = re.search(r"slow store: ([0-9.]+) ms per batch \(pace ([0-9.]+) ms\)", log)
    assert found_store, log[-3000:]
    store_ms = float(found_store.group(1))
    count = needed(store_ms)
    bound = FAST_ONSET + 20 + FAST_INTERVAL * (count + 1 + count // 3)
    points = scalars(tmp_path / "run")
    steps = {s: round(v, 1) for s, v in points["straggler/step_ms"] if s > FAST_ONSET}
    found = [a for a in alerts if a["rule"] == "straggler"]
    context = (found_store.group(0), steps, alerts)
    assert found, context
    first = found[0]
    assert (first["rank"], first["part"]) == (1, "input pipeline"), context
    assert FAST_ONSET < first["step"] <= bound, context
    assert first["value"] < 0.4  # the score
    assert first["intervals"] >= 3
    assert first["seconds"] >= StragglerSettings().min_seconds
    assert "rank 1 is the straggler: its input pipeline" in first["message"]
    assert all(a["rank"] == 1 for a in found), found


# A healthy rank's loader starved for a moment: rank 1's store 3x slower than the job's
# pace for this long, then as fast as before. On the busy host where the default was 1 s,
# a healthy rank's loader stalled for 1.06 s and was named; this is longer than that and
# shorter than the 2 s default (at 1 s this job names rank 1: checked by hand).
BLIP_S = 1.3


def test_a_healthy_fast_job_raises_no_straggler_alert(tmp_path: Path) -> None:
    """The same job, its rank 1's store slowed only for BLIP_S seconds from batch 150:
    every interval judged, none named."""
    blip = ("--slow-input=1", "--slow-from=150", "--slow-pace", f"--slow-for-s={BLIP_S}")
    alerts = job(tmp_path, 2, f"--steps={FAST_STEPS}", "--input-ms=4", *blip, **FAST)
    log = (tmp_path / "log" / "worker_1.log").read_text(errors="replace")
    assert "slow store: " in log, log[-3000:]  # the blip was planted
    assert [a for a in alerts if a["rule"] == "straggler"] == [], alerts
    points = scalars(tmp_path / "run")
    assert len(points["ranks/input_wait_ms_max"]) == FAST_STEPS // FAST_INTERVAL
