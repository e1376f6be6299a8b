"""The console under MindSpore: the step count in sink mode, and `mindwatch demo`'s output
at 80 columns, alone and under msrun with 2 workers (rank 0 only, in order, one summary)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

import mindwatch
from mindwatch.metrics.smoothing import ema
from mindwatch.mindspore import TrainingMonitor
from mindwatch.mindspore.demo import follow_rank0, make_dataset, make_network
from mindwatch.mindspore.demo_summary import alert_lines, curve_lines, hardware_tags, print_summary
from tests.mindspore.conftest import run_context

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))
BATCH, STEPS = 32, 120


def _drive_sinks(tmp_path: Path, *, epochs: int, sink_size: int, batch_num: int) -> None:
    """Call the callback as ``Model._train_dataset_sink_process`` does on Ascend: once per
    sink, ``cur_step_num`` jumping by the sink size."""
    opt = nn.Momentum(make_network().trainable_params(), 0.01, 0.9)
    dataset = make_dataset(STEPS * BATCH, BATCH, 0)  # 120 batches
    monitor = TrainingMonitor(logdir=tmp_path, config={"print_every": 25, "progress": "line"})
    params: dict[str, Any] = {
        "optimizer": opt,
        "train_network": None,
        "train_dataset": dataset,
        "epoch_num": epochs,
        "batch_num": batch_num,
        "dataset_sink_mode": True,
        "sink_size": sink_size,
    }
    monitor.on_train_begin(run_context(cur_step_num=0, **params))
    step = 0
    for epoch in range(1, epochs + 1):
        for _ in range(max(STEPS // epochs // sink_size, 1)):
            step += sink_size
            outputs = ms.Tensor(np.float32(1.0 / step))
            fields = {**params, "cur_epoch_num": epoch, "cur_step_num": step}
            monitor.on_train_step_end(run_context(net_outputs=outputs, **fields))
    monitor.on_train_end(run_context(**params))


@pytest.mark.parametrize(
    ("epochs", "sink_size", "batch_num"),
    [
        (1, 120, 120),  # Model.train(1, ds, dataset_sink_mode=True): one sink of 120 steps
        (60, 2, 2),  # MindFormers: sink_size 2, epochs = dataset size / sink size
        (1, 120, 1),  # a launcher that counts sinks in batch_num: the dataset's size wins
    ],
    ids=["one-sink", "mindformers", "batch-num-counts-sinks"],
)
def test_sink_mode_reads_step_120_of_120(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    epochs: int,
    sink_size: int,
    batch_num: int,
) -> None:
    _drive_sinks(tmp_path, epochs=epochs, sink_size=sink_size, batch_num=batch_num)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[mindwatch]")]
    assert lines, "no progress line"
    assert lines[-1].startswith("[mindwatch] step 120/120 | loss 0.0083")
    assert all(re.match(r"\[mindwatch\] step \d+/120 \|", ln) for ln in lines), lines


def test_training_monitor_paces_its_lines_by_time_and_shows_the_last_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Model.train with the default config (print_every left alone): fast CPU steps
    print about a line a second (print_secs), not one every 10 steps, and the total."""
    from mindspore.train import Model

    from mindwatch.config.model import PRINT_SECS

    steps = 1500
    net = make_network(hidden=8)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    monitor = TrainingMonitor(logdir=tmp_path, config={"progress": "line"})
    started = time.monotonic()
    model.train(1, make_dataset(steps * 2, 2, 0), callbacks=[monitor], dataset_sink_mode=False)
    took = time.monotonic() - started
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[mindwatch]")]
    assert 1 <= len(lines) <= took / PRINT_SECS + 3, (took, lines)
    assert len(lines) < steps // 10  # what every 10 steps would print
    assert lines[-1].startswith(f"[mindwatch] step {steps}/{steps} | loss")


def test_the_summary_names_the_alerts_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        for step in range(1, 41):
            loss = math.nan if step in (12, 30) else 1.0 / step
            mon.log_step(step, loss=loss, samples=32)
    capsys.readouterr()
    print_summary(tmp_path / "run", tmp_path, elapsed=1.0, world=1)
    out = capsys.readouterr().out
    assert "  1 alert (all in alerts.jsonl):\n    critical nonfinite at step 12, rank 0\n" in out
    assert "  non-finite values: {'train/loss': 2}" in out
    assert "step time: median" in out
    assert "; step 1 compiled for " in out
    assert all(len(ln) <= 80 for ln in out.splitlines() if str(tmp_path) not in ln), out


def test_the_summary_reads_the_loss_as_tensorboard_smooths_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One lucky batch (0.001 at step 5) is not the run's best loss: the summary says the
    best of the smoothed curve, as the report does."""
    losses = [1.0, 0.9, 0.8, 0.7, 0.001, 0.6, 0.5, 0.45, 0.4, 0.38]
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        for step, loss in enumerate(losses, start=1):
            mon.log_step(step, loss=loss, samples=32)
    capsys.readouterr()
    print_summary(tmp_path / "run", tmp_path, elapsed=1.0, world=1)
    out = " ".join(capsys.readouterr().out.split())
    smooth = ema(losses)
    best = int(np.argmin(smooth))
    assert best == 9
    expected = f"loss {smooth[0]:.4f} -> {smooth[-1]:.4f}, best {smooth[best]:.4f} at step 10"
    assert expected in out, out
    assert "(smoothed as TensorBoard does, weight 0.6)" in out


def test_the_summary_shows_the_first_alerts_and_counts_the_rest() -> None:
    alerts = [{"rule": "spike", "severity": "warning", "step": s, "rank": s % 2} for s in range(5)]
    assert alert_lines(alerts) == [
        "5 alerts (all in alerts.jsonl):",
        "  warning spike at step 0, rank 0",
        "  warning spike at step 1, rank 1",
        "  warning spike at step 2, rank 0",
        "  ... and 2 more",
    ]
    assert alert_lines([]) == ["alerts: none"]


def test_rank_0s_log_is_followed_without_mindspores_log_lines(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """What the launcher prints of a worker log written while it runs (a real process
    writing it slowly, MindSpore's glog lines among its own)."""
    log = tmp_path / "worker_0.log"
    writer = (
        "import sys, time\n"
        "lines = ['first', '[INFO] DISTRIBUTED(12224,7f9d,python):2026-11-30 [tcp_client.cc:367]"
        " Start] Event base dispatch success!', '[WARNING] ME(1,2,python):x [a.cc:1] y',"
        " '[ERROR] ME(1,2,python):x [a.cc:1] kept', 'second']\n"
        "with open(sys.argv[1], 'w') as f:\n"
        "    for line in lines:\n"
        "        f.write(line + '\\n'); f.flush(); time.sleep(0.05)\n"
        "    f.write('no newline at the end')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", writer, str(log)])
    follow_rank0(process, log, period=0.01)
    assert capfd.readouterr().out.splitlines() == [
        "first",
        "[ERROR] ME(1,2,python):x [a.cc:1] kept",
        "second",
        "no newline at the end",
    ]


def _demo(tmp_path: Path, *args: str) -> str:
    env = {**os.environ, "GLOG_v": "3", "COLUMNS": "80"}
    done = subprocess.run(
        [MINDWATCH, "demo", "--logdir", str(tmp_path), "--steps", "60", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _check_console(out: str, tmp_path: Path) -> list[str]:
    lines = out.splitlines()
    steps = [ln.split(" | ")[0] for ln in lines if ln.startswith("[mindwatch] step")]
    assert steps == [f"[mindwatch] step {s}/60" for s in (25, 50, 60)]  # the last one too
    assert all("ETA" in ln for ln in lines if re.match(r"\[mindwatch\] step (25|50)/", ln))
    assert "elapsed" in next(ln for ln in lines if ln.startswith("[mindwatch] step 60/60"))
    for line in lines:  # 80 columns, but for a long path that cannot be cut
        assert len(line) <= 80 or str(tmp_path) in line, line
    assert out.count("Run folder:") == 1
    assert out.count("View it in TensorBoard:") == 1
    assert "step time: median" in out
    assert "; step 1 compiled for " in out
    assert "alerts: none" in out or re.search(r"\d alerts? \(all in ", out)
    assert re.search(r"\d+ curves: train/ \d+, perf/ \d+, layers/ \d+", out), out
    return lines


@pytest.mark.slow
def test_demo_at_80_columns(tmp_path: Path) -> None:
    out = _demo(tmp_path)
    lines = _check_console(out, tmp_path)
    assert lines[0].startswith("mindwatch demo: a 64-128-128-10 MLP")
    assert lines.index("Run folder: " + str(next(tmp_path.iterdir()))) > 4


@pytest.mark.slow
def test_demo_with_two_workers_prints_rank_0_in_order_without_mindspore_logs(
    tmp_path: Path,
) -> None:
    out = _demo(tmp_path, "--workers", "2")
    lines = _check_console(out, tmp_path)
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert lines[:2] == [
        "mindwatch demo: starting 2 workers with msrun; their logs:",
        f"  {run / 'msrun_logs'}",
    ]
    assert lines[2].startswith("mindwatch demo: a 64-128-128-10 MLP")  # rank 0, once
    assert out.count("mindwatch demo: a 64-128-128-10 MLP") == 1
    assert "  GRAPH mode, 2 CPU workers (msrun, data parallel)" in lines
    assert "values reduced across 2 ranks" in out
    assert "rank_0/, rank_1/" in out
    # MindSpore's own log lines and msrun's stay in the log files, out of the console
    assert "[INFO]" not in out
    assert "DISTRIBUTED" not in out
    assert "Start worker process" not in out
    logs = run / "msrun_logs"
    assert "Start worker process with rank id:1" in (logs / "msrun.log").read_text()
    worker0 = (logs / "worker_0.log").read_text()
    assert "[mindwatch] step 60/60" in worker0
    assert "[mindwatch]" not in (logs / "worker_1.log").read_text()  # rank 1 prints nothing


TRAINING = ["eval/loss", "layers/a", "perf/step_time_ms", "train/grad_norm", "train/loss"]
HW = ["hw/cpu_percent", "hw/rss_mb"]


@pytest.mark.parametrize("world", [1, 3, 8])
def test_hardware_curves_are_counted_apart_from_training_ones(world: int) -> None:
    """The first line is the same whether or not the run lasted one hardware period."""
    ranks = [f"ranks/loss_{end}" for end in ("min", "max", "mean", "std", "argmax")]
    hw_ranks = [f"ranks/{n}_{e}" for n in ("cpu_percent", "rss_mb") for e in ("min", "max")]
    hw_ranks += [f"ranks/{n}_{e}" for n in ("cpu_percent", "rss_mb") for e in ("mean", "std")]
    hw_ranks += ["ranks/cpu_percent_argmax", "ranks/rss_mb_argmax"]
    spread = ranks if world > 1 else []
    without = curve_lines(sorted(TRAINING + spread), samples=0)
    with_hw = curve_lines(sorted(TRAINING + spread + HW + (hw_ranks if world > 1 else [])), 3)
    assert without[0] == with_hw[0]
    expected = "layers/ 1, ranks/ 5" if world > 1 else "layers/ 1"
    assert with_hw[0] == f"{len(TRAINING + spread)} curves: train/ 2, eval/ 1, perf/ 1, {expected}"
    assert without[1].startswith("hardware: no sample in a run this short")
    if world > 1:
        assert with_hw[1] == "hardware: 12 curves (ranks/ 10, hw/ 2), 3 samples"
    else:
        assert with_hw[1] == "hardware: 2 curves (hw/ 2), 3 samples"
    assert curve_lines(sorted(TRAINING + HW), 1)[1] == "hardware: 2 curves (hw/ 2), 1 sample"


def test_a_spread_of_a_training_curve_named_like_hardware_stays_training() -> None:
    """Only spreads of a logged hw/ curve are hardware: ranks/rss_mb_max of a user's own
    train/rss_mb is not, when no hw/rss_mb was sampled."""
    tags = ["ranks/rss_mb_max", "train/rss_mb", "hw/cpu_percent"]
    assert hardware_tags(tags) == ["hw/cpu_percent"]
