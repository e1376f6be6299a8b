"""mindwatch.SummaryWriter with MindSpore: Tensors wherever torch takes a tensor, the
PyTorch TensorBoard tutorial run with only its import changed, and a live TensorBoard
serving every plugin's data over its HTTP API."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from mindwatch import SummaryWriter
from tests.tbserver import live_tensorboard
from tests.test_summarywriter import summary_values

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TUTORIAL_ARGS = ("--steps", "120", "--log-every", "40")
RNG = np.random.default_rng(3)
WEIGHT = RNG.normal(size=(8, 5)).astype(np.float32)
IMAGES = RNG.random((4, 1, 6, 6), dtype=np.float32)
LABELS = RNG.integers(0, 2, 64)
PROBS = RNG.random(64).astype(np.float32)
SOUND = np.sin(np.linspace(0, 60, 1600)).astype(np.float32)
FEATURES = RNG.normal(size=(4, 3)).astype(np.float32)


def log_everything(w: SummaryWriter, t: Any) -> None:
    """Every method, its tensor arguments made by ``t`` (numpy as it is, or ms.Tensor)."""
    dense = nn.Dense(5, 8)
    dense.weight.set_data(ms.Tensor(WEIGHT))
    for step in range(1, 4):
        w.add_scalar("loss", t(np.float32(1.0 / step)), step)
        w.add_scalars("acc", {"train": t(np.float32(0.5)), "eval": t(np.float32(0.25))}, step)
    weight = dense.weight if t is ms.Tensor else WEIGHT  # a Parameter is a Tensor too
    w.add_histogram("dense/weight", weight, 1)
    w.add_histogram("dense/weight_fd", weight, 1, bins="fd")
    counts, edges = np.histogram(WEIGHT, bins=6)
    w.add_histogram_raw(
        "raw",
        t(WEIGHT.min()),
        t(WEIGHT.max()),
        WEIGHT.size,
        t(WEIGHT.sum()),
        t((WEIGHT**2).sum()),
        t(edges[1:]),
        t(counts),
        1,
    )
    w.add_image("first", t(IMAGES[0]), 1)
    w.add_images("batch", t(IMAGES), 1)
    w.add_text("notes", "MindSpore Tensors accepted", 1)
    w.add_pr_curve("pr", t(LABELS.astype(np.bool_)), t(PROBS), 1)
    w.add_audio("sound", t(SOUND), 1, sample_rate=8000)
    w.add_embedding(t(FEATURES), metadata=["a", "b", "c", "d"], label_img=t(IMAGES), global_step=1)
    w.add_custom_scalars({"Training": {"accuracy": ["Multiline", ["acc"]]}})
    w.add_hparams({"lr": 0.01, "optimizer": "Momentum"}, {"hparam/loss": t(np.float32(0.5))},
                  run_name="hparams")  # fmt: skip


def test_mindspore_tensors_are_accepted_everywhere_and_write_what_numpy_writes(
    tmp_path: Path,
) -> None:
    for name, t in (("tensors", ms.Tensor), ("numpy", np.asarray)):
        with SummaryWriter(tmp_path / name, config={"print_every": 0}) as w:
            log_everything(w, t)
    folders = [p.relative_to(tmp_path / "numpy") for p in (tmp_path / "numpy").rglob("*")]
    for sub in [Path(), *(f for f in folders if (tmp_path / "numpy" / f).is_dir())]:
        ours, theirs = (
            {
                tag: points
                for tag, points in summary_values(tmp_path / name / sub, migrated=False).items()
                # the run's folder, the machine, the wall time each step took
                if not tag.startswith(("mindwatch/", "hw/", "perf/"))
            }
            for name in ("tensors", "numpy")
        )
        assert set(ours) == set(theirs), sub
        for tag, points in theirs.items():
            assert [(s, v) for s, v in ours[tag]] == points, (sub, tag)
    for name in ("tensors.tsv", "metadata.tsv", "sprite.png"):
        path = Path("00001/default") / name
        ours_file, numpy_file = (tmp_path / name / path for name in ("tensors", "numpy"))
        assert ours_file.read_bytes() == numpy_file.read_bytes()


@pytest.fixture(scope="module")
def board_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tutorial's run (a subprocess, as a user runs it) and one of every method."""
    root = tmp_path_factory.mktemp("board")
    script = EXAMPLES / "pytorch_tutorial.py"
    source = script.read_text()
    assert "from mindwatch import SummaryWriter  # was: from torch.utils.tensorboard" in source
    result = subprocess.run(
        [sys.executable, str(script), "--logdir", str(root / "tutorial"), *TUTORIAL_ARGS],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    assert "Finished Training" in result.stdout
    with SummaryWriter(root / "every", config={"print_every": 0}) as w:
        log_everything(w, ms.Tensor)
    return root


@pytest.fixture(scope="module")
def board(board_root: Path) -> Iterator[str]:
    with live_tensorboard(board_root) as url:
        deadline = time.monotonic() + 120
        while True:
            try:
                tags = _get(url, "scalars/tags")
                if "every" in tags and "tutorial" in tags:
                    break
            except OSError:
                pass  # still starting
            assert time.monotonic() < deadline, "TensorBoard never listed both runs"
            time.sleep(0.5)
        yield url


def _get(url: str, path: str, **query: Any) -> Any:
    full = f"{url}/data/plugin/{path}"
    if query:
        full += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(full, timeout=20) as response:
        return json.loads(response.read())


def _post(url: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{url}/data/plugin/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-XSRF-Protected": "1"},
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.loads(response.read())


def test_tutorial_curves_figures_pr_curves_and_projector_are_served(board: str) -> None:
    points = _get(board, "scalars/scalars", run="tutorial", tag="training loss")
    assert [p[1] for p in points] == [39, 79, 119]  # [wall, step, value]
    assert all(1.0 < p[2] < 3.0 for p in points)  # about ln(10) for ten classes
    images = _get(board, "images/tags")["tutorial"]
    assert set(images) == {"four_fashion_mnist_images", "predictions vs. actuals"}
    shown = _get(board, "images/images", run="tutorial", tag="predictions vs. actuals", sample=0)
    assert [i["step"] for i in shown] == [39, 79, 119]
    pr_tags = _get(board, "pr_curves/tags")["tutorial"]
    assert set(pr_tags) == {
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal", "Shirt", "Sneaker", "Bag", "Ankle Boot",
    }  # fmt: skip
    curve = _get(board, "pr_curves/pr_curves", run="tutorial", tag="Bag")["tutorial"]
    # At threshold 0 every one of the 400 test images is a "Bag"; TensorBoard drops the
    # thresholds above the highest prediction.
    assert curve[0]["true_positives"][0] + curve[0]["false_positives"][0] == 400
    assert 1 < len(curve[0]["precision"]) <= 127
    runs = _get(board, "projector/runs")
    assert "tutorial" in runs
    info = _get(board, "projector/info", run="tutorial")
    (embedding,) = info["embeddings"]
    assert embedding["tensorShape"] == [4, 784]


def test_every_plugin_serves_what_the_writer_logged(board: str) -> None:
    run = "every"
    loss = _get(board, "scalars/scalars", run=run, tag="loss")
    assert [(p[1], p[2]) for p in loss] == [(1, 1.0), (2, 0.5), (3, float(np.float32(1 / 3)))]
    acc = _get(board, "scalars/scalars", run="every/acc_eval", tag="acc")
    assert [(p[1], p[2]) for p in acc] == [(1, 0.25), (2, 0.25), (3, 0.25)]

    (histogram,) = _get(board, "histograms/histograms", run=run, tag="dense/weight")
    assert histogram[1] == 1
    assert sum(bucket[2] for bucket in histogram[2]) == pytest.approx(WEIGHT.size)
    assert set(_get(board, "histograms/tags")[run]) >= {"dense/weight", "dense/weight_fd", "raw"}

    (batch,) = _get(board, "images/images", run=run, tag="batch", sample=0)
    image_url = f"{board}/data/plugin/images/individualImage?{batch['query']}"
    with urllib.request.urlopen(image_url, timeout=20) as response:
        from PIL import Image

        png = Image.open(io.BytesIO(response.read()))
    assert png.size == (24, 6)  # 4 images of 6x6 in a row

    (text,) = _get(board, "text/text", run=run, tag="notes/text_summary")
    assert "MindSpore Tensors accepted" in text["text"]

    assert "sound" in _get(board, "audio/tags")[run]

    curve = _get(board, "pr_curves/pr_curves", run=run, tag="pr")[run]
    positives = int(LABELS.sum())
    assert curve[0]["true_positives"][0] == positives  # threshold 0: every positive

    layout = _get(board, "custom_scalars/layout")
    assert layout["category"][0]["title"] == "Training"
    assert layout["category"][0]["chart"][0]["multiline"]["tag"] == ["acc"]

    info = _get(board, "projector/info", run=run)
    (embedding,) = info["embeddings"]
    assert embedding["tensorShape"] == [4, 3]
    assert embedding["sprite"]["singleImageDim"] == [6, 6]

    groups = _post(
        board,
        "hparams/session_groups",
        {
            "experimentName": "",
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE"],
            "colParams": [],
            "startIndex": 0,
            "sliceSize": 100,
        },
    )["sessionGroups"]
    by_name = {g["name"]: g for g in groups}
    group = by_name["every/hparams"]
    assert group["hparams"] == {"lr": 0.01, "optimizer": "Momentum"}
    assert {m["name"]["tag"]: m["value"] for m in group["metricValues"]} == {"hparam/loss": 0.5}
