"""`mindwatch tensorboard` on a job with per-rank folders, and the first-screen layout."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import mindwatch
from mindwatch.sinks.board_layout import first_screen_layout
from mindwatch.tools.board import RANKS_HIDDEN, board_url, run_count
from tests.tbread import accumulator

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))


def test_the_layout_puts_health_first_and_leaves_out_what_is_not_a_curve() -> None:
    tags = ["train/loss", "train/lr", "train/epoch", "perf/step_time_ms", "perf/samples_per_s"]
    tags += [
        f"ranks/{m}_{s}"
        for m in ("loss", "compute_ms")
        for s in ("min", "max", "mean", "std", "argmax")
    ]
    layout = first_screen_layout(tags)
    health, ranks, slow, timing = layout.category
    assert [c.title for c in health.chart] == [
        "train/loss",
        "eval",
        "train/lr",
        "perf/samples_per_s",
    ]
    assert [c.title for c in ranks.chart] == ["loss across ranks", "compute_ms across ranks"]
    assert ranks.chart[0].margin.series[0].upper == "ranks/loss_max"
    # The straggler rule's inputs arrive later (every interval): laid out from regexes.
    assert slow.title == "Which rank is slow"
    assert list(slow.chart[0].multiline.tag) == [
        r"^ranks/input_wait_ms_(min|max)$",
        r"^straggler/step_ms$",
    ]
    assert [c.title for c in timing.chart] == ["perf/step_time_ms"]
    text = str(layout)
    assert "argmax" not in text
    assert "epoch" not in text


def test_per_rank_runs_are_filtered_out_of_the_address_unless_asked() -> None:
    runs = ["job", "job/rank_0", "job/rank_1"]
    url = board_url("http://h:1/", layout=True, runs=runs, ranks=False)
    assert url.startswith("http://h:1/?runFilter=")
    assert "#custom_scalars&regexInput=" in url
    assert (
        board_url("http://h:1/", layout=True, runs=runs, ranks=True) == "http://h:1/#custom_scalars"
    )
    assert board_url("http://h:1/", layout=False, runs=["a"], ranks=False) == "http://h:1/"
    hidden = re.compile(RANKS_HIDDEN)
    assert [r for r in [*runs, ".", "rank_0", "x/rank_10", "rank_0x"] if hidden.match(r)] == [
        "job",
        ".",
        "rank_0x",
    ]


def test_the_run_count_says_how_many_per_rank_folders_are_filtered_out() -> None:
    runs = ["job", "job/rank_0", "job/rank_1"]
    assert run_count(runs, ranks=False) == (
        "1 run; 2 per-rank folders filtered out, --ranks shows them"
    )
    assert run_count(runs, ranks=True) == "3 runs"
    assert run_count(["a", "b"], ranks=False) == "2 runs"


def test_a_run_writes_its_layout_once(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        for step in range(1, 6):
            mon.log_step(step, loss=1.0 / step, lr=0.1)
    from tensorboard.plugins.custom_scalar import layout_pb2

    (event,) = accumulator(tmp_path / "run").Tensors("custom_scalars__config__")
    assert event.step == 0
    layout = layout_pb2.Layout.FromString(event.tensor_proto.string_val[0])
    assert [c.title for c in layout.category[0].chart] == ["train/loss", "eval", "train/lr"]


@pytest.mark.slow
def test_a_live_board_on_a_job_with_rank_folders(tmp_path: Path) -> None:
    for folder in ("job", "job/rank_0", "job/rank_1"):
        with mindwatch.Monitor(tmp_path / folder, {"print_every": 0}) as mon:
            mon.log_step(1, loss=1.0)
    proc = subprocess.Popen(
        [MINDWATCH, "tensorboard", str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        head = proc.stdout.readline().strip()
        url = proc.stdout.readline().strip()
        assert head.endswith("(1 run; 2 per-rank folders filtered out, --ranks shows them) at:")
        base = url.split("?")[0]
        with urllib.request.urlopen(base + "data/runs", timeout=10) as response:
            assert json.loads(response.read()) == ["job", "job/rank_0", "job/rank_1"]
        assert "runFilter=" in url
        assert "#custom_scalars&regexInput=" in url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


@pytest.mark.slow
def test_ctrl_c_the_moment_it_says_it_serves_is_a_clean_stop(tmp_path: Path) -> None:
    # Ctrl-C pressed while the address is still being printed (before the wait for
    # TensorBoard begins) stops it as cleanly as one pressed later: exit 0, no "Aborted!".
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)
    proc = subprocess.Popen(
        [MINDWATCH, "tensorboard", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        head = proc.stdout.readline()
        assert head.startswith("TensorBoard serves ")
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    assert "Aborted!" not in rest
    assert rest.rstrip().endswith("Stopping TensorBoard.")
