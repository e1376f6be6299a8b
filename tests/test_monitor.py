"""Monitor: the framework-free front door for custom loops."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import mindwatch
from mindwatch import Monitor
from mindwatch.metrics.timing import StepClock, StepTiming
from tests.tbread import scalars


def test_log_step_writes_namespaced_tags_and_derived_perf(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        for step in range(1, 51):
            mon.log_step(
                step,
                loss=1.0 / step,
                lr=np.float32(1e-3),
                grad_norm=np.array(0.5),
                samples=32,
                tokens=32 * 128,
                accuracy=0.25,
                **{"custom/x": step},
            )
        mon.log_eval(50, loss=0.75, perplexity=2.0)
    read = scalars(tmp_path)
    assert set(read) == {
        "train/loss",
        "train/lr",
        "train/grad_norm",
        "train/accuracy",
        "custom/x",
        "perf/step_time_ms",
        "perf/samples_per_s",
        "perf/tokens_per_s",
        "eval/loss",
        "eval/perplexity",
    }
    assert [s for s, _ in read["train/loss"]] == list(range(1, 51))
    assert read["train/loss"][9][1] == pytest.approx(0.1)
    assert read["eval/loss"] == [(50, 0.75)]
    for (_, ms), (_, sps), (_, tps) in zip(
        read["perf/step_time_ms"], read["perf/samples_per_s"], read["perf/tokens_per_s"]
    ):
        assert ms > 0
        assert sps == pytest.approx(32 * 1000 / ms, rel=1e-5)
        assert tps == pytest.approx(128 * sps, rel=1e-5)


# A value logged under a tag mindwatch derives, and what it takes to derive that tag.
OWN_VALUES = [
    ("perf/step_time_ms", {}, {}),
    ("perf/samples_per_s", {"samples": 32}, {}),
    ("perf/tokens_per_s", {"samples": 32, "tokens": 4096}, {}),
    ("perf/tflops_per_device", {"samples": 32}, {"flops_per_sample": 3e9}),
    ("perf/mfu", {"samples": 32}, {"flops_per_sample": 3e9, "peak_tflops": 100.0}),
    ("train/perplexity", {}, {"perplexity": True}),
]


@pytest.mark.parametrize(("tag", "counts", "config"), OWN_VALUES, ids=[t for t, _, _ in OWN_VALUES])
def test_a_value_logged_under_a_derived_tag_is_the_one_point_of_its_step(
    tmp_path: Path, tag: str, counts: dict[str, float], config: dict[str, object]
) -> None:
    with Monitor(tmp_path / "derived", {"print_every": 0, **config}) as mon:
        for step in range(1, 11):
            mon.log_step(step, loss=0.5, **counts)
    derived = set(scalars(tmp_path / "derived"))
    assert tag in derived  # mindwatch derives it with this setup...

    with Monitor(tmp_path / "own", {"print_every": 0, **config}) as mon:
        for step in range(1, 11):
            mon.log_step(step, loss=0.5, **counts, **{tag: 6.4})
    read = scalars(tmp_path / "own")
    # ... and the caller's value replaces it: one point per step, theirs.
    assert read[tag] == [(s, pytest.approx(6.4)) for s in range(1, 11)]
    assert set(read) == derived  # the other derived tags are still written
    for other in derived - {tag}:
        assert [s for s, _ in read[other]] == list(range(1, 11))


def test_a_derived_tag_logged_every_few_steps_is_no_longer_derived_in_between(
    tmp_path: Path,
) -> None:
    """MindFormers' own step time, passed when it prints (every 5 steps): one curve of
    its values, not theirs alternating with mindwatch's."""
    with Monitor(tmp_path, {"print_every": 0, "tag_style": "mindformers"}) as mon:
        for step in range(1, 21):
            own = {"perf/step_time_ms": 6.4} if step % 5 == 0 else {}
            mon.log_step(step, loss=0.5, samples=8, **own)
    read = scalars(tmp_path)
    # Steps 1-4 come before the first value the caller logged: mindwatch's own.
    assert [s for s, _ in read["perf/step_time_ms"]] == [1, 2, 3, 4, 5, 10, 15, 20]
    assert [v for s, v in read["perf/step_time_ms"] if s >= 5] == [pytest.approx(6.4)] * 4
    assert [s for s, _ in read["perf/samples_per_s"]] == list(range(1, 21))
    # MindFormers' iteration-time shows the caller's step time too, once per step.
    iteration = dict(read["iteration-time"])
    assert [iteration[s] for s in (5, 10, 15, 20)] == [pytest.approx(6.4)] * 4
    assert len(read["iteration-time"]) == len(iteration)


def test_step_clock_shares_an_interval_among_the_steps_it_covers() -> None:
    now = [100.0]
    clock = StepClock(clock=lambda: now[0])
    now[0] += 0.5
    assert clock.tick(10) == (0.5, 1)
    now[0] += 2.0  # a sink of 4 steps reported at once
    ticked = clock.tick(14)
    assert ticked is not None
    timing = StepTiming(*ticked)
    assert timing.step_time_ms == 500.0
    assert timing.per_second(32) == 64.0
    clock.restart()  # e.g. an evaluation: its time is not counted, the steps still are
    now[0] += 1.0
    assert clock.tick(18) == (1.0, 4)
    assert clock.tick(18) is None  # no time passed, no step advanced
    clock.rebase(100)
    now[0] += 1.0
    assert clock.tick(102) == (1.0, 2)


def test_nonfinite_values_are_written_and_counted(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_step(1, loss=math.nan, grad_norm=math.inf)
        mon.log_step(2, loss=1.0, grad_norm=-math.inf)
        mon.log_step(3, loss=math.nan)
    assert mon.nonfinite == {"train/loss": 2, "train/grad_norm": 2}
    read = scalars(tmp_path)
    assert math.isnan(read["train/loss"][0][1])
    assert read["train/grad_norm"] == [(1, math.inf), (2, -math.inf)]
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["nonfinite"] == {"train/loss": 2, "train/grad_norm": 2}


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"loss": "0.5"}, "'loss' must be a number, got the string"),
        ({"lr": None, "grad_norm": [1.0, 2.0]}, "'grad_norm' must be a number"),
        ({"accuracy": {"top1": 0.5}}, "'accuracy' must be a number"),
        ({"loss": np.ones((2, 2))}, "ndarray of shape (2, 2)"),
    ],
)
def test_non_numeric_value_is_a_type_error_naming_the_key(
    tmp_path: Path, kwargs: dict[str, object], key: str
) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        with pytest.raises(TypeError) as info:
            mon.log_step(1, **kwargs)  # type: ignore[arg-type]
        assert key in str(info.value)


def test_step_must_be_an_int64(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_step(np.int64(3), loss=np.array([1.5]))  # numpy 2 refuses float() on it
        with pytest.raises(TypeError, match="step must be an int"):
            mon.log_step("4", loss=1.0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="64 bits"):
            mon.log_step(2**64, loss=1.0)
    assert scalars(tmp_path)["train/loss"] == [(3, 1.5)]


def test_run_json_records_the_run(tmp_path: Path) -> None:
    mon = mindwatch.Monitor(tmp_path / "r", {"print_every": 0, "flush_secs": 1.5})
    running = json.loads((tmp_path / "r" / "run.json").read_text())
    assert running["status"] == "running"
    assert running["pid"] == os.getpid()
    assert running["world_size"] == 1
    assert running["config"]["flush_secs"] == 1.5
    assert running["config"]["logdir"] == str(tmp_path / "r")
    assert running["versions"]["mindwatch"] == mindwatch.__version__
    assert {"python", "numpy", "tensorboard"} <= set(running["versions"])
    mon.log_step(7, loss=0.5)
    mon.close()
    done = json.loads((tmp_path / "r" / "run.json").read_text())
    assert done["status"] == "finished"
    assert done["last_step"] == 7
    assert done["points_dropped"] == 0
    assert done["end_time"] >= done["start_time"]


def test_progress_line_every_n_steps_with_eta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 25}, total_steps=100) as mon:
        for step in range(1, 101):
            mon.log_step(step, loss=0.5, lr=0.01, samples=8)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[mindwatch]")]
    assert [ln.split(" | ")[0] for ln in lines] == [
        "[mindwatch] step 25/100",
        "[mindwatch] step 50/100",
        "[mindwatch] step 75/100",
        "[mindwatch] step 100/100",
    ]
    assert "loss 0.5000" in lines[0]
    assert "lr 1.000e-02" in lines[0]
    assert "ETA 0:00:00" in lines[0]


def test_progress_bar_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 10, "progress": "bar"}, total_steps=40) as mon:
        for step in range(1, 41):
            mon.log_step(step, loss=0.5)
    out = capsys.readouterr().out
    assert "40/40" in out
    assert "loss 0.5000" in out


def test_missing_logdir_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs a log folder"):
        mindwatch.Monitor()


def test_bad_config_key_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush_sec"):
        mindwatch.Monitor(tmp_path, {"flush_sec": 1})


def test_monitor_histogram_and_text(tmp_path: Path) -> None:
    from tests.tbread import accumulator

    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_histogram("weights/dense", np.arange(100, dtype=np.float32), 3)
        mon.log_text("notes", "hello", 0)
    acc = accumulator(tmp_path)
    assert acc.Histograms("weights/dense")[0].histogram_value.num == 100
    assert acc.Tensors("notes")[0].tensor_proto.string_val == [b"hello"]


def test_log_values_writes_summary_values_at_their_step_and_time(tmp_path: Path) -> None:
    from tensorboard.compat.proto.summary_pb2 import Summary

    from mindwatch.events.summaries import value_bytes
    from tests.tbread import accumulator

    image = Summary.Image(height=1, width=1, colorspace=1, encoded_image_string=b"png?")
    values = [
        value_bytes(Summary.Value(tag="raw/image", image=image)),
        bytearray(value_bytes(Summary.Value(tag="raw/value", simple_value=2.5))),
    ]
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_values(7, values, wall_time=1234.5)
        mon.log_values(8, [])  # nothing to write: no empty event
        with pytest.raises(TypeError, match=r"serialized Summary\.Value"):
            mon.log_values(9, [Summary.Value(tag="x", simple_value=1.0)])  # type: ignore[list-item]
    acc = accumulator(tmp_path)
    [img] = acc.Images("raw/image")
    assert (img.step, img.wall_time, img.encoded_image_string) == (7, 1234.5, b"png?")
    [point] = acc.Scalars("raw/value")
    assert (point.step, point.wall_time, point.value) == (7, 1234.5, 2.5)
    assert "x" not in acc.Tags()["scalars"]


def test_hparams_are_flattened_checked_and_written_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from mindwatch.metrics.hparams import flatten_hparams
    from tests.tbread import accumulator

    assert flatten_hparams({"opt": {"lr": np.float32(0.5), "betas": (0.9, 0.99)}, "x": None}) == {
        "opt.lr": 0.5,
        "opt.betas": "(0.9, 0.99)",
        "x": "None",
    }
    with pytest.raises(TypeError, match=r"hparam 'model\.net' must be a bool, number or string"):
        flatten_hparams({"model": {"net": object()}})

    config = {"print_every": 0, "hparams": {"lr": 0.1}}
    with (
        caplog.at_level(logging.WARNING, logger="mindwatch"),
        mindwatch.Monitor(tmp_path, config) as mon,
    ):
        mon.log_hparams(batch_size=32)
        mon.log_step(1, loss=1.0)
        mon.log_hparams(late=True)
    assert any("after the first step" in r.getMessage() for r in caplog.records)
    content = accumulator(tmp_path).PluginTagToContent("hparams")
    assert set(content) == {"_hparams_/session_start_info", "_hparams_/session_end_info"}
    from tensorboard.plugins.hparams import plugin_data_pb2

    start = plugin_data_pb2.HParamsPluginData.FromString(
        content["_hparams_/session_start_info"]
    ).session_start_info
    assert dict(start.hparams)["lr"].number_value == 0.1
    assert dict(start.hparams)["batch_size"].number_value == 32
    assert "late" not in dict(start.hparams)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["hparams"] == {"lr": 0.1, "batch_size": 32, "late": True}


def test_resume_hides_the_crashed_attempts_tail_for_every_tensorboard_reader(
    tmp_path: Path,
) -> None:
    from tensorboard.backend.event_processing import plugin_event_accumulator

    crashed = mindwatch.Monitor(tmp_path, {"print_every": 0})
    for step in range(1, 251):
        crashed.log_step(step, loss=1.0)
    crashed.flush()
    crashed._session.run.update(status="running")  # as a SIGKILL would leave it
    crashed._session.run.data["attempts"][-1]["process"] = "an earlier process"
    crashed._session.run.write()
    crashed._closed = True  # the process "died": nothing more is written by it
    with mindwatch.Monitor(tmp_path, {"print_every": 0}, resume_step=201) as resumed:
        for step in range(201, 301):
            resumed.log_step(step, loss=2.0)
    legacy = scalars(tmp_path)["train/loss"]  # EventAccumulator, as programs read
    assert [s for s, _ in legacy] == list(range(1, 301))
    assert {v for s, v in legacy if s > 200} == {2.0}
    # The TensorBoard server's own (Python) loader: only a second START purges there.
    server = plugin_event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    server.Reload()
    assert [t.step for t in server.Tensors("train/loss")] == list(range(1, 301))
    attempts = json.loads((tmp_path / "run.json").read_text())["attempts"]
    assert [a["resumed_at"] for a in attempts] == [None, 201]
    assert attempts[1]["status"] == "finished"
    # Same pid, another process (a restarted container): the earlier attempt crashed.
    assert attempts[0]["status"] == "crashed"


def test_reopening_a_folder_in_the_same_process_is_one_attempt(tmp_path: Path) -> None:
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as first:
        first.log_step(1, loss=1.0)
    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as again:
        again.log_step(2, loss=1.0)
    info = json.loads((tmp_path / "run.json").read_text())
    assert len(info["attempts"]) == 1
    assert info["start_time"] == json.loads(json.dumps(info["attempts"][0]))["start_time"]


def test_every_n_steps_survives_sink_jumps_and_restarts() -> None:
    from mindwatch.metrics.timing import Every

    every = Every(64)
    assert [s for s in range(100, 1700, 100) if every(s)] == list(range(100, 1700, 100))
    one = Every(5)
    assert [s for s in range(1, 13) if one(s)] == [5, 10]
    assert [s for s in range(1, 7) if one(s)] == [5]  # a new run from step 1
    assert not Every(None)(10)


def test_model_flops_give_tflops_per_device_and_mfu(tmp_path: Path) -> None:
    """A custom loop gives the FLOPs per sample in the config; a framework adapter may
    give its count per step instead (the config wins)."""
    config = {"print_every": 0, "flops_per_sample": 3e9, "peak_tflops": 200.0}
    with mindwatch.Monitor(tmp_path / "config", config) as mon:
        mon.set_model_flops(1.0, source="ignored: the config says")
        for step in range(1, 6):
            mon.log_step(step, loss=1.0, samples=16)
    read = scalars(tmp_path / "config")
    step_ms = dict(read["perf/step_time_ms"])
    mfu = dict(read["perf/mfu"])
    for step, achieved in read["perf/tflops_per_device"]:
        assert achieved == pytest.approx(3e9 * 16 / (step_ms[step] / 1000) / 1e12, rel=1e-5)
        assert mfu[step] == pytest.approx(achieved / 200.0, rel=1e-6)
    run = json.loads((tmp_path / "config" / "run.json").read_text())
    assert run["flops"] == {
        "per_sample": 3e9,
        "source": "config",
        "peak_tflops": 200.0,
        "peak_source": "config",
    }

    with mindwatch.Monitor(tmp_path / "counted", {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)  # nothing known yet: no TFLOPS
        mon.set_model_flops(5e10, source="the framework's count")
        mon.set_peak_tflops(100.0, source="a table")
        for step in range(2, 5):
            mon.log_step(step, loss=1.0)
    read = scalars(tmp_path / "counted")
    step_ms = dict(read["perf/step_time_ms"])
    assert [s for s, _ in read["perf/tflops_per_device"]] == [2, 3, 4]
    for step, achieved in read["perf/tflops_per_device"]:
        assert achieved == pytest.approx(5e10 / (step_ms[step] / 1000) / 1e12, rel=1e-5)
    assert [s for s, _ in read["perf/mfu"]] == [2, 3, 4]
    run = json.loads((tmp_path / "counted" / "run.json").read_text())
    assert run["flops"] == {
        "per_step": 5e10,
        "source": "the framework's count",
        "peak_tflops": 100.0,
        "peak_source": "a table",
    }


def test_a_stalled_disk_costs_log_step_only_bounded_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung disk: the writer's queue fills, then the pipeline's; the training thread
    waits for room at most max_block_secs at a time, then new steps are dropped and
    counted (run.json), each place warning once. What was written stays in order."""
    import threading

    from mindwatch.events.event_file import EventFile

    disk = threading.Event()  # a hung network file system: writes block until set
    in_write = threading.Event()
    real_write = EventFile.write

    def hung_write(self: EventFile, records: object) -> None:
        in_write.set()
        disk.wait(60)
        real_write(self, records)  # type: ignore[arg-type]

    main_waits: list[Optional[float]] = []
    real_wait = threading.Event.wait

    def wait(self: threading.Event, timeout: Optional[float] = None) -> bool:
        if threading.current_thread() is threading.main_thread():
            main_waits.append(timeout)
        return real_wait(self, timeout)

    config = {"print_every": 0, "max_queue": 20, "max_block_secs": 0.2, "flush_secs": 0.05}
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        mon = mindwatch.Monitor(tmp_path, config)  # writes the file's header, checking it
        monkeypatch.setattr(EventFile, "write", hung_write)
        mon.log_step(1, loss=1.0)
        assert in_write.wait(30)  # within flush_secs the writer reaches the disk and hangs
        monkeypatch.setattr(threading.Event, "wait", wait)
        for step in range(2, 3001):
            mon.log_step(step, loss=1.0 / step, lr=0.1)
        monkeypatch.setattr(threading.Event, "wait", real_wait)
        assert main_waits  # it did wait for room: a burst is not dropped at once
        assert all(t is not None and t <= 0.2 + 1e-6 for t in main_waits), main_waits
        disk.set()
        mon.close()
    dropped = json.loads((tmp_path / "run.json").read_text())["points_dropped"]
    assert dropped > 0
    assert dropped == mon.stats.points_dropped
    steps = [s for s, _ in scalars(tmp_path)["train/loss"]]
    assert steps[0] == 1
    assert steps == sorted(set(steps))  # what was written is in order, nothing twice
    assert len(steps) < 3000
    drops = [r.getMessage() for r in caplog.records if "dropp" in r.getMessage()]
    assert drops, caplog.text
    assert all("max_queue" in message for message in drops), drops
    assert len(drops) == len(set(drops)), drops


def test_a_queued_step_is_numbers_and_tuples_the_collector_can_untrack(tmp_path: Path) -> None:
    """docs/dev/architecture.md, "The hot path": a dict or list in a queued record, or a
    tuple wrapped around it, keeps the collector tracking it, and a backlog of those sets
    off full collections that cost the training thread tens of milliseconds."""
    import collections
    import gc

    def untrackable(value: object) -> bool:
        if isinstance(value, tuple):
            return all(untrackable(item) for item in value)
        return value is None or type(value) in (int, float, str, bool)

    with mindwatch.Monitor(tmp_path, {"print_every": 0}) as mon:
        queued: collections.deque[tuple[object, ...]] = collections.deque()
        mon._route._queue, mon._route._fast = queued, 1_000  # catch what the pipeline would get
        for step in range(1, 4):
            mon.log_step(step, loss=0.5, lr=np.float32(0.1), samples=8, accuracy=1, **{"a/b": 2.0})
        mon.log_step(4)
        assert len(queued) == 4
        assert all(type(entry[0]) is int for entry in queued)  # the step itself: no wrapper
        assert all(untrackable(entry) for entry in queued), list(queued)
        gc.collect()
        gc.collect()
        assert not any(gc.is_tracked(entry) for entry in queued)


def test_logging_after_close_is_counted_not_lost_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"print_every": 0, "alerts": {"stop_on": ["nonfinite"]}}  # it waits per step
    mon = mindwatch.Monitor(tmp_path, config)
    mon.log_step(1, loss=1.0)
    mon.close()
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        mon.log_step(2, loss=0.5, lr=0.1)  # no wait for a verdict that cannot come
        mon.log_step(3, loss=0.25)
    assert mon.stats.points_dropped == 3
    assert sum("after close()" in r.getMessage() for r in caplog.records) == 1
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == [1]


@pytest.mark.parametrize("where", ["step", "eval"])
def test_a_stop_is_seen_right_after_the_call_that_raised_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """alerts.stop_on in a single process: should_stop turns true right after the
    log_step (or log_eval) whose value raised it; the warning is logged once."""
    config = {"print_every": 0, "alerts": {"stop_on": ["nonfinite"]}}
    with caplog.at_level(logging.WARNING, logger="mindwatch"), Monitor(tmp_path, config) as mon:
        for step in range(1, 11):
            mon.log_step(step, loss=math.nan if (where == "step" and step == 5) else 1.0)
            assert mon.should_stop is (where == "step" and step >= 5)
        mon.log_eval(10, loss=math.nan if where == "eval" else 1.0)
        assert mon.should_stop
        for step in range(11, 14):  # a loop that goes on regardless: no new warnings
            mon.log_step(step, loss=math.nan)
    assert "nonfinite" in (mon.stop_reason or "")
    assert sum("stopping training" in r.getMessage() for r in caplog.records) == 1


def test_a_burst_beyond_max_queue_waits_for_room_and_loses_nothing(tmp_path: Path) -> None:
    """A small max_queue and a loop far faster than the disk: the caller waits for room
    (back-pressure), and every step reaches the file."""
    with Monitor(tmp_path, {"print_every": 0, "max_queue": 50}) as mon:
        for step in range(1, 5001):
            mon.log_step(step, loss=1.0 / step, lr=0.1, a=1.0, b=2.0)
    assert mon.stats.points_dropped == 0
    assert [s for s, _ in scalars(tmp_path)["train/loss"]] == list(range(1, 5001))
    assert json.loads((tmp_path / "run.json").read_text())["points_dropped"] == 0


def test_nonfinite_and_alerts_answer_for_what_was_logged_so_far(tmp_path: Path) -> None:
    with Monitor(tmp_path, {"print_every": 0}) as mon:
        mon.log_step(1, loss=1.0)
        mon.log_step(2, loss=math.nan)
        assert mon.nonfinite == {"train/loss": 1}  # no flush needed
        assert [(a.rule, a.step) for a in mon.alerts] == [("nonfinite", 2)]
