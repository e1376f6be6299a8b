"""``mindwatch convert`` on training logs: real MindFormers 1.9 output, real MindSpore
LossMonitor/TimeMonitor output, several workers, and a log still being written."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mindwatch
from mindwatch.cli import main
from mindwatch.tools.convert import convert_logs
from tests.tbread import scalars

FIXTURES = Path(__file__).parents[1] / "fixtures"
MF_LOG = FIXTURES / "logs" / "mindformers-1.9-worker_0.log"
MF_TB = FIXTURES / "mindformers-1.9-tensorboard"


def f32(value: float) -> float:
    return float(np.float32(value))


def test_mindformers_log_gives_the_values_mindformers_wrote_itself(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["convert", str(MF_LOG), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "0 monitor-like lines not understood" in result.output
    ours = scalars(tmp_path / "out")
    theirs = scalars(MF_TB)  # MindFormers' own TensorBoard output of the same job
    for mine, its in (
        ("train/loss", "loss"),
        ("train/grad_norm", "grad-norm"),
        ("train/lr", "learning-rate"),
        ("train/loss_scale", "loss-scale"),
        ("perf/samples_per_s", "throughput"),
    ):
        assert [s for s, _ in ours[mine]] == list(range(1, 121)), mine  # 2 epochs x 60
        expected = dict(theirs[its])
        for step, value in ours[mine]:
            assert value == pytest.approx(expected[step], rel=1e-5), (mine, step)
    loss = dict(ours["train/loss"])
    assert loss[41] > 10 * loss[40]  # the fixture's planted spike survived the trip
    assert [s for s, _ in ours["perf/step_time_ms"]] == list(range(1, 121))


def test_several_workers_give_rank_runs_and_a_reduced_run(tmp_path: Path) -> None:
    logs = tmp_path / "msrun_logs"
    logs.mkdir()
    text = MF_LOG.read_text()
    (logs / "worker_0.log").write_text(text)
    # rank 1: the same job, but its loss doubled
    doubled = []
    for line in text.splitlines():
        changed = line
        if "loss:[" in line:
            head, rest = line.split("loss:[", 1)
            cur, tail = rest.split("/", 1)
            changed = f"{head}loss:[{float(cur) * 2:f}/{tail}"
        doubled.append(changed)
    (logs / "worker_1.log").write_text("\n".join(doubled) + "\n")
    result = CliRunner().invoke(main, ["convert", str(logs), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "into 3 runs" in result.output
    runs = set(mindwatch.read_scalars(tmp_path / "out")["run"])
    assert runs == {".", "rank_0", "rank_1"}
    mean = dict(scalars(tmp_path / "out")["train/loss"])
    own = dict(scalars(tmp_path / "out" / "rank_0")["train/loss"])
    for step in (1, 41, 120):
        assert mean[step] == pytest.approx(f32(own[step] * 1.5), rel=1e-5)
    assert {v for _, v in scalars(tmp_path / "out")["ranks/loss_argmax"]} == {1.0}


def test_follow_converts_a_log_still_being_written(tmp_path: Path) -> None:
    lines = MF_LOG.read_text().splitlines(keepends=True)
    log = tmp_path / "worker_0.log"
    log.write_text("")
    done = threading.Event()
    result: dict[str, object] = {}

    def convert() -> None:
        result["summary"] = convert_logs(
            [log], tmp_path / "out", follow=True, interval=0.1, stop=done.is_set
        )

    thread = threading.Thread(target=convert)
    thread.start()
    half = len(lines) // 2
    with open(log, "a") as handle:
        for line in lines[:half]:
            handle.write(line)
        handle.write(lines[half][:40])  # a line cut in the middle, as a writer leaves it
        handle.flush()
        deadline = time.monotonic() + 30
        seen: list[int] = []
        while time.monotonic() < deadline and len(seen) < 50:
            time.sleep(0.3)
            frame = (
                mindwatch.read_scalars(tmp_path / "out") if (tmp_path / "out").exists() else None
            )
            if frame is not None and not frame.empty:
                seen = frame[frame["tag"] == "train/loss"]["step"].tolist()
        assert 50 <= len(seen) < 120  # converted while the job was still "running"
        handle.write(lines[half][40:])
        for line in lines[half + 1 :]:
            handle.write(line)
    time.sleep(0.5)
    done.set()
    thread.join(30)
    assert not thread.is_alive()
    steps = [s for s, _ in scalars(tmp_path / "out")["train/loss"]]
    assert steps == list(range(1, 121))


def test_bad_input(tmp_path: Path) -> None:
    missing = CliRunner().invoke(main, ["convert", str(tmp_path / "nope.log"), str(tmp_path / "o")])
    assert missing.exit_code == 2
    summaries = tmp_path / "summary"
    summaries.mkdir()
    (summaries / "events.out.events.summary.1.vm_MS").write_bytes(b"")
    ms = CliRunner().invoke(main, ["convert", str(summaries), str(tmp_path / "o")])
    assert ms.exit_code == 2
    assert "summary files below" in ms.output
    assert "hold nothing to convert" in ms.output
    plain = tmp_path / "plain.log"
    plain.write_text("hello\nworld\n")
    nothing = CliRunner().invoke(main, ["convert", str(plain), str(tmp_path / "o")])
    assert nothing.exit_code == 2
    assert "no MFLossMonitor / LossMonitor / TimeMonitor lines" in nothing.output


def test_converting_a_log_again_needs_overwrite(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    assert CliRunner().invoke(main, ["convert", str(MF_LOG), out]).exit_code == 0
    again = CliRunner().invoke(main, ["convert", str(MF_LOG), out])
    assert again.exit_code == 2
    assert "already holds event files" in again.output
    replaced = CliRunner().invoke(main, ["convert", str(MF_LOG), out, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert [s for s, _ in scalars(tmp_path / "out")["train/loss"]] == list(range(1, 121))
