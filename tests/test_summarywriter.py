"""mindwatch.SummaryWriter against tensorboardX's and torch's for the same inputs.

Every method's summaries are read back with TensorBoard's own loaders and compared as
decoded protos: the raw ``Summary.Value`` (``LegacyEventFileLoader``) and what the
plugins get after TensorBoard's migration (``EventFileLoader``). A reference writer is
an independent implementation, so a difference in a bucket, a metadata field or a tag
name fails here (STYLE lesson 12).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mindwatch
from mindwatch import SummaryWriter

Values = dict[str, list[tuple[int, Any]]]
Case = Callable[[Any], None]

RNG = np.random.default_rng(7)
WEIGHTS = RNG.normal(size=1000)
IMAGE_CHW = RNG.random((3, 12, 10), dtype=np.float32)
IMAGE_HWC_U8 = RNG.integers(0, 256, (9, 7, 3), dtype=np.uint8)
IMAGE_HW = RNG.random((6, 5), dtype=np.float32)
BATCH_NCHW = RNG.random((5, 3, 8, 8), dtype=np.float32)
BATCH_NHWC = RNG.random((3, 8, 6, 1), dtype=np.float32)
LABELS = RNG.integers(0, 2, 200)
PREDICTIONS = RNG.random(200)
PR_WEIGHTS = RNG.random(200)


def summary_values(folder: Path, *, migrated: bool) -> Values:
    """``{tag: [(step, Summary.Value)]}`` of the event files directly in ``folder``."""
    from tensorboard.backend.event_processing.event_file_loader import (
        EventFileLoader,
        LegacyEventFileLoader,
    )

    loader = EventFileLoader if migrated else LegacyEventFileLoader
    found: Values = {}
    for path in sorted(folder.glob("*tfevents*")):
        for event in loader(str(path)).Load():
            if event.HasField("summary"):
                for value in event.summary.value:
                    found.setdefault(value.tag, []).append((event.step, value))
    return found


def write_both(tmp_path: Path, case: Case, peer: str = "tensorboardX") -> tuple[Path, Path]:
    """Run ``case`` on a mindwatch writer and on the peer's, each in its own folder."""
    if peer == "torch":
        from torch.utils.tensorboard import SummaryWriter as Peer
    else:
        from tensorboardX import SummaryWriter as Peer
    ours, theirs = tmp_path / "mindwatch", tmp_path / peer
    with SummaryWriter(ours, config={"print_every": 0}) as writer:
        case(writer)
    with Peer(str(theirs)) as writer:
        case(writer)
    return ours, theirs


def assert_same(ours: Path, theirs: Path) -> set[str]:
    """The peer's tags, each with the same steps and values in our folder; returns them."""
    tags: set[str] = set()
    for migrated in (False, True):
        mine, peer = (
            summary_values(ours, migrated=migrated),
            summary_values(theirs, migrated=migrated),
        )
        assert peer, f"the peer wrote nothing in {theirs}"
        for tag, points in peer.items():
            assert tag in mine, f"{tag} missing; we wrote {sorted(mine)}"
            got = [(step, value) for step, value in mine[tag]]
            assert [s for s, _ in got] == [s for s, _ in points], tag
            for (_, a), (_, b) in zip(got, points):
                assert _same_value(a, b), f"{tag}:\nours   {a}\ntheirs {b}"
        tags |= set(peer)
    return tags


def _same_value(a: Any, b: Any) -> bool:
    """Equal protos; NaN equal to NaN (protobuf's pure-Python comparison, which
    MindSpore's import can select, says NaN != NaN; its JSON form says "NaN")."""
    from google.protobuf.json_format import MessageToDict

    return bool(a == b) or MessageToDict(a) == MessageToDict(b)


CASES: dict[str, Case] = {
    "add_scalar": lambda w: [w.add_scalar("loss", 1.0 / (i + 1), i) for i in range(5)],
    "add_scalar int, numpy, NaN, no step": lambda w: (
        w.add_scalar("Loss/train", 3, 1),
        w.add_scalar("Loss/train", np.float32(0.25), 2),
        w.add_scalar("Loss/train", np.array(2.5), 3),
        w.add_scalar("Loss/train", float("nan"), 4),
        w.add_scalar("acc", 0.5),
    ),
    "add_histogram tensorflow bins": lambda w: w.add_histogram("w", WEIGHTS, 3),
    "add_histogram auto": lambda w: w.add_histogram("w", WEIGHTS, 4, bins="auto"),
    "add_histogram fd": lambda w: w.add_histogram("w", WEIGHTS * 3 + 1, 5, bins="fd"),
    "add_histogram int bins, max_bins": lambda w: (
        w.add_histogram("a", WEIGHTS, 1, bins=50),
        w.add_histogram("b", WEIGHTS, 1, bins=50, max_bins=7),
        w.add_histogram("c", np.arange(10), 2, bins=[0, 2, 5, 9]),
    ),
    "add_histogram_raw": lambda w: w.add_histogram_raw(
        "raw", 0.0, 9.0, 10, 45.0, 285.0, [3.0, 6.0, 9.0], [3, 3, 4], global_step=2
    ),
    "add_image CHW, HWC, HW": lambda w: (
        w.add_image("chw", IMAGE_CHW, 1),
        w.add_image("hwc", IMAGE_HWC_U8, 1, dataformats="HWC"),
        w.add_image("hw", IMAGE_HW, 2, dataformats="HW"),
    ),
    "add_images NCHW, NHWC": lambda w: (
        w.add_images("nchw", BATCH_NCHW, 1),
        w.add_images("nhwc", BATCH_NHWC, 1, dataformats="NHWC"),
    ),
    "add_text": lambda w: (w.add_text("notes", "**bold** 你好", 3), w.add_text("notes", "x")),
    "add_pr_curve": lambda w: (
        w.add_pr_curve("pr", LABELS, PREDICTIONS, 1),
        w.add_pr_curve("pr", LABELS, PREDICTIONS, 2, num_thresholds=20, weights=PR_WEIGHTS),
        w.add_pr_curve("pr_capped", LABELS, PREDICTIONS, 1, num_thresholds=500),
    ),
    "add_pr_curve_raw": lambda w: w.add_pr_curve_raw(
        "prr",
        [5, 3, 0],
        [4, 1, 0],
        [0, 3, 4],
        [0, 2, 5],
        [0.55, 0.75, 1.0],
        [1.0, 0.6, 0.0],
        4,
        num_thresholds=3,
    ),
    "add_custom_scalars": lambda w: w.add_custom_scalars(
        {
            "Training": {"loss": ["Multiline", ["loss/train", "loss/eval"]]},
            "Bounds": {"band": ["Margin", ["m", "m_low", "m_high"]]},
        }
    ),
    "add_custom_scalars shorthands": lambda w: (
        w.add_custom_scalars_multilinechart(["a", "b"], category="c", title="t"),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_method_decodes_like_tensorboardx(tmp_path: Path, name: str) -> None:
    ours, theirs = write_both(tmp_path, CASES[name])
    assert assert_same(ours, theirs)


def test_add_figure_decodes_like_tensorboardx(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def case(w: Any) -> None:
        for step in (1, 2):
            fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
            ax.plot([0, 1, 2], [step, 0, step])
            w.add_figure("fig", fig, step)
        figs = [plt.figure(figsize=(1, 1), dpi=40) for _ in range(2)]
        w.add_figure("figs", figs, 3)
        assert not plt.get_fignums()  # close=True closed them all

    ours, theirs = write_both(tmp_path, case)
    assert assert_same(ours, theirs) == {"fig", "figs"}


def test_new_style_scalars_and_audio_decode_like_torch(tmp_path: Path) -> None:
    t = np.linspace(0, 1, 800)

    def case(w: Any) -> None:
        w.add_scalar("ns", 0.125, 1, new_style=True)
        w.add_scalar("ns64", 1 / 3, 1, new_style=True, double_precision=True)
        w.add_audio("tone", np.sin(2 * np.pi * 440 * t), 1, sample_rate=8000)
        w.add_audio("loud", 3 * np.sin(2 * np.pi * 110 * t), 2)  # clipped to [-1, 1]

    ours, theirs = write_both(tmp_path, case, peer="torch")
    assert assert_same(ours, theirs) == {"ns", "ns64", "tone", "loud"}


def test_add_scalars_writes_torch_sub_runs(tmp_path: Path) -> None:
    def case(w: Any) -> None:
        for step in range(3):
            w.add_scalars("loss/both", {"train": 1.0 + step, "eval": 2.0 * step}, step)

    ours, theirs = write_both(tmp_path, case, peer="torch")
    subs = sorted(p.name for p in theirs.iterdir() if p.is_dir())
    assert subs == ["loss_both_eval", "loss_both_train"]
    assert sorted(p.name for p in ours.iterdir() if p.is_dir()) == subs
    for sub in subs:
        assert assert_same(ours / sub, theirs / sub) == {"loss/both"}


def test_add_hparams_writes_a_session_like_torch_and_tensorboardx(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter as X

    hparams = {"lr": 0.1, "bsize": 32, "optimizer": "adam", "nesterov": True, "skip": None}
    metrics = {"hparam/accuracy": 0.75, "hparam/loss": 0.5}
    with SummaryWriter(tmp_path / "ours", config={"print_every": 0}) as w:
        w.add_hparams(hparams, metrics, run_name="trial")
        w.add_hparams(
            {"lr": 0.1, "opt": "sgd"},
            {"hparam/accuracy": 0.5},
            hparam_domain_discrete={"opt": ["sgd", "adam"]},
            run_name="discrete",
        )
    with X(str(tmp_path / "x")) as w:
        w.add_hparams(hparams, metrics, name="trial")
    assert assert_same(tmp_path / "ours" / "trial", tmp_path / "x" / "trial") == {
        "_hparams_/experiment",
        "_hparams_/session_start_info",
        "_hparams_/session_end_info",
        *metrics,
    }
    # torch's hparam_domain_discrete: the experiment lists the values an hparam takes.
    from tensorboard.plugins.hparams import plugin_data_pb2

    [(_, value)] = summary_values(tmp_path / "ours" / "discrete", migrated=False)[
        "_hparams_/experiment"
    ]
    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    info = {i.name: i for i in data.experiment.hparam_infos}
    assert [v.string_value for v in info["opt"].domain_discrete.values] == ["sgd", "adam"]
    assert not info["lr"].HasField("domain_discrete")


def test_add_embedding_writes_the_projector_files_as_torch_does(tmp_path: Path) -> None:
    import torch
    from google.protobuf import text_format
    from PIL import Image
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig
    from torch.utils.tensorboard import SummaryWriter as Torch

    mat = RNG.normal(size=(9, 4)).astype(np.float32)
    images = RNG.random((9, 3, 6, 6), dtype=np.float32)
    rows = [[f"w{i}", i % 3] for i in range(9)]

    def case(w: Any, imgs: Any) -> None:
        w.add_embedding(mat, metadata=[str(i) for i in range(9)], label_img=imgs, global_step=2)
        w.add_embedding(mat[:, :2], metadata=rows, metadata_header=["word", "class"], tag="w/2")

    with SummaryWriter(tmp_path / "ours", config={"print_every": 0}) as w:
        case(w, images)
    with Torch(str(tmp_path / "torch")) as w:
        case(w, torch.from_numpy(images))
    ours, theirs = tmp_path / "ours", tmp_path / "torch"
    config = text_format.Parse((ours / "projector_config.pbtxt").read_text(), ProjectorConfig())
    peer = text_format.Parse((theirs / "projector_config.pbtxt").read_text(), ProjectorConfig())
    assert config == peer
    assert len(config.embeddings) == 2
    for info in config.embeddings:
        for path in (info.tensor_path, info.metadata_path):
            assert (ours / path).read_text() == (theirs / path).read_text(), path
    sprite = config.embeddings[0].sprite.image_path
    ours_png = np.asarray(Image.open(ours / sprite))
    assert np.array_equal(ours_png, np.asarray(Image.open(theirs / sprite)))
    assert ours_png.shape == (18, 18, 3)  # 9 images of 6x6 in a 3x3 square


def test_methods_without_meaning_here_raise_and_name_the_alternative(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path, config={"print_every": 0}) as w:
        with pytest.raises(NotImplementedError, match=r"mindspore\.export"):
            w.add_graph(object())
        with pytest.raises(NotImplementedError, match="ONNX"):
            w.add_onnx_graph("net.onnx")
        with pytest.raises(NotImplementedError, match="moviepy"):
            w.add_video("v", np.zeros((1, 2, 3, 4, 4)))
        with pytest.raises(NotImplementedError, match="add_image"):
            w.add_image_with_boxes("b", IMAGE_CHW, np.zeros((1, 4)))
        with pytest.raises(NotImplementedError, match="meshes"):
            w.add_mesh("m", np.zeros((1, 3, 3)))
        with pytest.raises(ValueError, match="dataformats 'NCHW'"):
            w.add_image("bad", IMAGE_CHW, 0, dataformats="NCHW")
        with pytest.raises(ValueError, match="10 channels"):
            w.add_image("bad", IMAGE_CHW, 0, dataformats="HWC")
        with pytest.raises(TypeError, match="'x'"):
            w.add_scalar("x", "0.5", 1)  # text is not a number, as in log_step
        with pytest.raises(ValueError, match="NaN or Inf"):
            w.add_histogram("h", np.array([1.0, np.nan]), 1)


def test_default_log_dir_is_torchs_and_comment_is_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1", config={"print_every": 0}) as w:
        w.add_scalar("x", 1.0, 0)
        folder = Path(w.get_logdir())
    assert folder.parent == tmp_path / "runs"
    stamp, rest = folder.name.split("_", 1)
    assert len(stamp) == 5  # Dec03
    assert stamp[:3].isalpha()
    assert rest.endswith(f"_{socket.gethostname()}_lr0.1")
    assert json.loads((folder / "run.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("stop_on", [True, False])
def test_a_nan_loss_fires_the_rules_exactly_as_through_monitor(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stop_on: bool
) -> None:
    # With stop_on each value is judged before add_scalar returns; without it a step's
    # values go to the rules together, as log_step's do.
    config: dict[str, Any] = {"print_every": 0}
    if stop_on:
        config["alerts"] = {"stop_on": ["nonfinite"]}
    losses = [2.0, 1.5, 1.2, float("nan"), 1.0]
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        with mindwatch.Monitor(tmp_path / "monitor", config) as mon:
            for step, loss in enumerate(losses, start=1):
                mon.log_step(step, loss=loss, lr=0.5)
                if mon.should_stop:
                    break
        monitor_stop = step
        with SummaryWriter(tmp_path / "writer", config=config) as w:
            for step, loss in enumerate(losses, start=1):
                w.add_scalar("loss", loss, step)
                w.add_scalar("lr", 0.5, step)
                if w.monitor.should_stop:
                    break
        writer_stop = step

    def alerts(folder: Path) -> list[tuple[Any, ...]]:
        lines = (folder / "alerts.jsonl").read_text().splitlines()
        return [
            (a["rule"], a["severity"], a["metric"], a["step"], a["message"])
            for a in map(json.loads, lines)
        ]

    assert alerts(tmp_path / "monitor") == [
        ("nonfinite", "critical", "train/loss", 4, "train/loss is NaN")
    ]
    assert alerts(tmp_path / "writer") == alerts(tmp_path / "monitor")
    assert writer_stop == monitor_stop == (4 if stop_on else 5)  # stop_on: at the very step
    lines = [r.getMessage() for r in caplog.records if "nonfinite" in r.getMessage()]
    assert len(lines) == (4 if stop_on else 2)  # the alert (and the stop), logged by each
    assert lines[: len(lines) // 2] == lines[len(lines) // 2 :]
    for name in ("monitor", "writer"):
        run = json.loads((tmp_path / name / "run.json").read_text())
        assert run["alerts"] == 1, name
        assert run["last_step"] == writer_stop, name
        assert run["nonfinite"] == {"train/loss": 1}, name
    # TensorBoard shows the tag the user logged, one point per step, NaN included.
    from tests.tbread import scalars

    written = scalars(tmp_path / "writer")
    assert [s for s, _ in written["loss"]] == list(range(1, writer_stop + 1))
    assert math.isnan(written["loss"][3][1])
    assert "train/loss" not in written


def test_scalars_reach_console_and_keep_namespaced_tags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="mindwatch"),
        SummaryWriter(tmp_path, config={"print_every": 2, "progress": "line"}) as w,
    ):
        for step in range(1, 5):
            w.add_scalar("loss", 1.0 / step, step)
            w.add_scalar("lr", 0.125, step)
            w.add_scalar("Accuracy/train", 0.5, step)
            w.add_scalar("train/lr", 0.25, step)  # the same name as "lr" for the rules
    out = capsys.readouterr().out
    warned = [r.getMessage() for r in caplog.records if "both train/lr" in r.getMessage()]
    assert warned == [
        "mindwatch: the tags 'train/lr' and 'lr' are both train/lr for the anomaly rules and "
        "the console; 'train/lr' is written to TensorBoard only"
    ]
    assert "loss 0.2500" in out  # the console knows "loss" as the Monitor's loss
    from tests.tbread import scalars

    written = scalars(tmp_path)
    assert set(written) >= {"loss", "lr", "Accuracy/train", "train/lr"}
    assert [v for _, v in written["train/lr"]] == [0.25] * 4
    assert [v for _, v in written["lr"]] == [0.125] * 4


def test_purge_step_hides_what_a_crashed_attempt_wrote_from_that_step(tmp_path: Path) -> None:
    from tests.tbread import scalars

    with SummaryWriter(tmp_path, config={"print_every": 0}) as w:
        for step in range(1, 11):
            w.add_scalar("loss", float(step), step)
    with SummaryWriter(tmp_path, purge_step=6, config={"print_every": 0}) as w:
        assert w.get_logdir() == str(tmp_path)
        for step in range(6, 9):
            w.add_scalar("loss", 100.0 + step, step)
    assert scalars(tmp_path)["loss"] == [(s, float(s)) for s in range(1, 6)] + [
        (s, 100.0 + s) for s in range(6, 9)
    ]


def test_logging_after_close_reopens_the_run_as_torch_does(tmp_path: Path) -> None:
    from tests.tbread import accumulator

    w = SummaryWriter(tmp_path, config={"print_every": 0})
    w.add_scalar("loss", 1.0, 1)
    w.close()
    w.close()  # twice: nothing more
    w.add_scalar("loss", 2.0, 2)  # PyTorch's tutorial goes on after close()
    w.add_text("notes", "after", 2)
    w.close()
    w.add_pr_curve("pr", LABELS, PREDICTIONS, 3)
    w.close()
    assert w.get_logdir() == str(tmp_path)
    acc = accumulator(tmp_path)
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(1, 1.0), (2, 2.0)]
    # The first step after the reopen starts the new Monitor's clock: no step time for it.
    assert [e.step for e in acc.Scalars("perf/step_time_ms")] == [1]
    assert [e.step for e in acc.Tensors("pr")] == [3]
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "finished"
    assert run["last_step"] == 2
    assert not [p for p in tmp_path.parent.iterdir() if p.name.startswith(f"{tmp_path.name}-")]


def test_flush_hands_on_the_step_being_gathered(tmp_path: Path) -> None:
    from tests.tbread import scalars

    with SummaryWriter(tmp_path, config={"print_every": 0}) as w:
        w.add_scalar("loss", 0.5, 1)
        w.add_scalar("loss", 0.25, 1)  # the same tag again at a step: both points kept
        w.flush()
        assert scalars(tmp_path)["loss"] == [(1, 0.5), (1, 0.25)]


def test_a_second_run_in_the_same_log_dir_goes_next_to_it(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "exp", config={"print_every": 0}) as w:
        w.add_scalar("loss", 1.0, 1)
    with SummaryWriter(tmp_path / "exp", config={"print_every": 0}) as w:
        w.add_scalar("loss", 2.0, 1)
        assert w.get_logdir() == str(tmp_path / "exp-2")


def test_flush_secs_and_max_queue_are_checked(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "a", flush_secs=5, config={"print_every": 0}) as w:
        assert w.monitor.config.flush_secs == 5
    with pytest.raises(mindwatch.ConfigError, match="flush_secs"):
        SummaryWriter(tmp_path / "b", flush_secs=-1)
    with pytest.raises(ValueError, match="max_queue"):
        SummaryWriter(tmp_path / "c", max_queue=0)


def test_under_reduction_each_step_is_one_reduced_row(tmp_path: Path) -> None:
    """Two simulated ranks (threads sharing a LocalGroup): rank 0 writes each step once,
    its scalars averaged across the ranks, as Monitor.log_step's would be."""
    import threading

    from mindwatch.testing import LocalGroup
    from tests.tbread import scalars

    group = LocalGroup(2)
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        config = {"print_every": 0, "aggregate_every": 10}
        try:
            with SummaryWriter(tmp_path, config=config, collective=group.member(rank)) as w:
                for step in range(1, 26):  # the last 5 are reduced at close()
                    w.add_scalar("loss", 1.0 / step + 0.25 * rank, step)
                    w.add_scalar("Accuracy/train", 0.5 + 0.25 * rank, step)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,), daemon=True) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a simulated rank hung"
    assert not errors, errors
    curves = scalars(tmp_path)
    assert [s for s, _ in curves["loss"]] == list(range(1, 26))
    assert all(v == float(np.float32(1.0 / s + 0.125)) for s, v in curves["loss"]), curves["loss"]
    assert [v for _, v in curves["Accuracy/train"]] == [0.625] * 25
    assert "ranks/loss_max" in curves  # the spread across ranks, as Monitor writes it


def test_each_step_gets_its_step_time_and_an_eval_behind_it_leaves_the_clock_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``perf/step_time_ms`` as ``log_step`` derives it: one point per training step. An
    evaluation logged at its epoch number (a step behind) is not timed, and the next
    training step is timed from the previous one, not split over the steps between."""
    import time

    from tests.tbread import scalars

    pause = 0.05  # a lower bound only: sleep never returns early
    with SummaryWriter(tmp_path, config={"print_every": 1, "progress": "line"}) as w:
        for step in range(1, 6):
            time.sleep(pause)
            w.add_scalar("loss", 1.0 / step, step)
        w.add_scalar("eval/accuracy", 0.5, 1)  # epoch 1's evaluation
        time.sleep(pause)
        w.add_scalar("loss", 0.1, 6)
    written = scalars(tmp_path)
    times = dict(written["perf/step_time_ms"])
    assert sorted(times) == [1, 2, 3, 4, 5, 6]  # none for the evaluation's step
    assert all(ms >= pause * 1000 for ms in times.values()), times
    assert [s for s, _ in written["perf/step_time_ms"]] == [1, 2, 3, 4, 5, 6]
    assert "ms/step" in capsys.readouterr().out


@pytest.mark.parametrize("on_disk", [True, False])
def test_a_step_beyond_int64_is_refused_by_add_scalar_as_by_every_method(
    tmp_path: Path, on_disk: bool
) -> None:
    """TensorBoard's steps are int64. A plain int out of that range took add_scalar's
    fast path unchecked: the rules judged step 2**63 and the writer's thread dropped the
    point with a warning. It is the TypeError naming ``global_step`` that every other
    method and every other step type gives; the edges themselves are written."""
    from tests.tbread import scalars

    calls: dict[str, Callable[[Any, int], None]] = {
        "add_scalar": lambda w, s: w.add_scalar("loss", 0.5, s),
        "add_scalar new_style": lambda w, s: w.add_scalar("ns", 0.5, s, new_style=True),
        "add_scalars": lambda w, s: w.add_scalars("pair", {"a": 1.0}, s),
        "add_text": lambda w, s: w.add_text("notes", "x", s),
    }
    with SummaryWriter(tmp_path, write_to_disk=on_disk, config={"print_every": 0}) as w:
        for name, call in calls.items():
            for step, shown in [(2**63, "9.223e+18"), (-(2**63) - 1, "-9.223e+18")]:
                with pytest.raises(TypeError) as caught:
                    call(w, step)
                assert str(caught.value) == (
                    f"mindwatch: global_step must fit in 64 bits (TensorBoard's int64), got {shown}"
                ), name
        with pytest.raises(TypeError, match=r"global_step must fit .* over 300 digits"):
            w.add_scalar("loss", 0.5, 10**400)
        w.add_scalar("loss", 1.0, -(2**63))
        w.add_scalar("loss", 2.0, 2**63 - 1)
    if on_disk:
        assert scalars(tmp_path)["loss"] == [(-(2**63), 1.0), (2**63 - 1, 2.0)]
        run = json.loads((tmp_path / "run.json").read_text())
        assert run["last_step"] == 2**63 - 1
    else:
        assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_the_hparams_go_with_the_first_step_and_run_json_counts_steps_as_log_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer keeps the Monitor's step bookkeeping as log_step does: the hparams
    collected before the first step are TensorBoard's set (a later one is run.json's
    only, with a warning), and run.json's ``last_step`` and ``steps_logged`` are
    log_step's for the same steps (an evaluation at an earlier step counts as one)."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    steps = [1, 2, 3, 1, 4]  # step 1 again: its evaluation
    runs = {}
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        with SummaryWriter(tmp_path / "writer", config={"print_every": 0}) as w:
            w.monitor.log_hparams(lr=0.5)
            for i, step in enumerate(steps):
                w.add_scalar("loss", 1.0 / step, step)
                w.add_scalar("acc", 0.5, step)
                if i == 0:
                    w.monitor.log_hparams(late=1)
        with mindwatch.Monitor(tmp_path / "monitor", {"print_every": 0}) as mon:
            for step in steps:
                mon.log_step(step, loss=1.0 / step, acc=0.5)
        for name in ("writer", "monitor"):
            run = json.loads((tmp_path / name / "run.json").read_text())
            runs[name] = (run["last_step"], run["steps_logged"])
    assert runs["writer"] == runs["monitor"] == (4, 5)
    late = [r.getMessage() for r in caplog.records if "after the first step" in r.getMessage()]
    assert late == [
        "mindwatch: hparams ['late'] arrived after the first step; they are in run.json, "
        "but TensorBoard's HPARAMS dashboard keeps the set written first"
    ]
    [(step, value)] = summary_values(tmp_path / "writer", migrated=False)[
        "_hparams_/session_start_info"
    ]
    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    hparams = {key: v.number_value for key, v in data.session_start_info.hparams.items()}
    assert (step, hparams) == (0, {"lr": 0.5})


def test_a_value_of_the_last_step_after_close_reopens_with_its_walltime(tmp_path: Path) -> None:
    """close(), then more values of the step logged last (its evaluation, say): the run
    reopens, the first value keeps the caller's walltime and the next one, given none,
    is written at the time it was logged, not the first one's."""
    w = SummaryWriter(tmp_path, config={"print_every": 0})
    w.add_scalar("loss", 1.0, 3, walltime=1000.0)
    w.close()
    w.add_scalar("eval/loss", 2.0, 3, walltime=2000.0)
    w.add_scalar("eval/acc", 0.5, 3)
    w.close()
    from tests.test_summarywriter_values import read_events

    found = read_events(tmp_path)
    assert [(s, wall, v.simple_value) for s, wall, v in found["eval/loss"]] == [(3, 2000.0, 2.0)]
    assert [(s, wall) for s, wall, _ in found["loss"]] == [(3, 1000.0)]
    [(step, wall, _)] = found["eval/acc"]
    assert step == 3
    assert wall > 1_000_000_000  # now


def test_each_method_without_meaning_here_says_what_to_do_instead(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path, config={"print_every": 0}) as w:
        for call, message in [
            (
                lambda: w.add_graph(object()),
                "add_graph is not supported: it traces a torch.nn.Module. For a MindSpore "
                "network's graph, export it with mindspore.export(net, *inputs, "
                "file_name='net', file_format='MINDIR') and open net.mindir in Netron, or set "
                "mindspore.set_context(save_graphs=True)",
            ),
            (
                lambda: w.add_onnx_graph("net.onnx"),
                "add_onnx_graph is not supported: export a MindSpore network with "
                "mindspore.export(net, *inputs, file_name='net', file_format='ONNX') and open "
                "net.onnx in Netron",
            ),
            (
                lambda: w.add_video("v", np.zeros((1, 2, 3, 4, 4))),
                "add_video is not supported: encoding video needs moviepy, which mindwatch "
                "does not depend on; log frames with add_images(tag, frames, step, "
                "dataformats='NCHW') instead",
            ),
            (
                lambda: w.add_mesh("m", np.zeros((1, 3, 3))),
                "add_mesh is not supported: mindwatch writes no meshes; log their statistics "
                "as scalars",
            ),
            (
                lambda: w.add_image_with_boxes("b", IMAGE_CHW, np.zeros((1, 4))),
                "add_image_with_boxes is not supported: draw the boxes into the image (e.g. "
                "with PIL.ImageDraw) and log it with add_image",
            ),
        ]:
            with pytest.raises(NotImplementedError) as caught:
                call()
            assert str(caught.value) == f"mindwatch.SummaryWriter.{message}"
