"""MindSpore Tensors wherever mindwatch.SummaryWriter takes a value (issue 38, feature 4;
torch's and numpy's kinds: tests/test_summarywriter_values.py).

Scalars: every real dtype MindSpore trains in (float16, bfloat16, float32, float64, the
ints, uint8, bool) in the shapes (), (1,), (1, 1) and (1, 1, 1), Parameters too, through
add_scalar, add_scalars and add_hparams (metrics and hparams), each read back as the
exact value it holds. Arrays: a bfloat16 or float16 Tensor (``asnumpy`` gives ml_dtypes'
bfloat16) writes exactly what the same values as a torch tensor of that dtype write, in
histograms, images, PR curves, embeddings and add_tensor; a bfloat16 beyond float16's
range keeps its value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
import torch

from mindwatch import SummaryWriter
from tests.test_summarywriter_values import Events, read_events

QUIET = {"print_every": 0}
DTYPES = {
    "float16": ms.float16,
    "bfloat16": ms.bfloat16,
    "float32": ms.float32,
    "float64": ms.float64,
    "int8": ms.int8,
    "int16": ms.int16,
    "int32": ms.int32,
    "int64": ms.int64,
    "uint8": ms.uint8,
    "bool": ms.bool_,
}
SHAPES = {"0d": (), "1": (1,), "1x1": (1, 1), "1x1x1": (1, 1, 1)}


def value_of(dtype: str) -> float:
    return (
        1.0 if dtype == "bool" else 7.0 if dtype == "uint8" else -2.5 if "float" in dtype else -7.0
    )


def tensor(dtype: str, shape: tuple[int, ...], *, parameter: bool = False) -> Any:
    t = ms.Tensor(np.full(shape, value_of(dtype), dtype=np.float32), DTYPES[dtype])
    return ms.Parameter(t, name=f"p_{dtype}_{len(shape)}") if parameter else t


CASES = [
    (dtype, shape_id, kind)
    for dtype in DTYPES
    for shape_id in SHAPES
    for kind in ("Tensor", "Parameter")
]


def key(dtype: str, shape_id: str, kind: str) -> str:
    return f"{kind}_{dtype}_{shape_id}"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Events]:
    root = tmp_path_factory.mktemp("ms_scalars")
    values = {key(d, s, k): tensor(d, SHAPES[s], parameter=k == "Parameter") for d, s, k in CASES}
    with SummaryWriter(root, config=QUIET) as w:
        for name, value in values.items():
            w.add_scalar(name, value, 1)
        plain = {n: v for n, v in values.items() if n.endswith(("_0d", "_1"))}
        w.add_scalars("every", plain, 2)
        w.add_hparams(
            {f"hp_{n}": v for n, v in values.items() if "bool" not in n},
            {f"metric_{n}": v for n, v in values.items()},
            run_name="hp",
        )
    found = {"": read_events(root), "hp": read_events(root / "hp")}
    for name in plain:
        found[name] = read_events(root / f"every_{name}")
    return found


@pytest.mark.parametrize(("dtype", "shape_id", "kind"), CASES)
def test_a_mindspore_tensor_of_every_dtype_and_one_element_shape_is_its_value(
    run: dict[str, Events], dtype: str, shape_id: str, kind: str
) -> None:
    name = key(dtype, shape_id, kind)
    want = value_of(dtype)
    assert [(s, v.simple_value) for s, _, v in run[""][name]] == [(1, want)]
    assert [(s, v.simple_value) for s, _, v in run["hp"][f"metric_{name}"]] == [(0, want)]
    if name in run:  # add_scalars: the shapes () and (1,)
        assert [(s, v.simple_value) for s, _, v in run[name]["every"]] == [(2, want)]
    if dtype != "bool":
        from tensorboard.plugins.hparams import plugin_data_pb2

        [(_, _, start)] = run["hp"]["_hparams_/session_start_info"]
        data = plugin_data_pb2.HParamsPluginData.FromString(start.metadata.plugin_data.content)
        assert data.session_start_info.hparams[f"hp_{name}"].number_value == want


def test_a_mindspore_tensor_of_several_elements_is_refused_naming_the_tag(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path, config=QUIET) as w:
        for value in (ms.Tensor(np.zeros(2, np.float32)), ms.Tensor(np.zeros((1, 2)), ms.bfloat16)):
            with pytest.raises(TypeError, match=r"'loss'.*shape"):
                w.add_scalar("loss", value, 1)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_mindspore_arrays_write_what_torchs_write(
    tmp_path: Path, dtype: str
) -> None:
    """The same values as a MindSpore Tensor and as a torch tensor of the dtype, through
    mindwatch's writer: the same histogram, image, PR curve, tensor and projector files."""
    rng = np.random.default_rng(4)
    values = (rng.integers(-32, 33, (6, 8)) / 4).astype(np.float32)
    pixels = (rng.integers(0, 256, (3, 5, 5)) / 255).astype(np.float32)
    labels = rng.integers(0, 2, 32)
    predictions = (rng.integers(0, 9, 32) / 8).astype(np.float32)

    def log(w: SummaryWriter, t: Any) -> None:
        w.add_histogram("h", t(values), 1)
        w.add_histogram("h_auto", t(values), 1, bins="auto")
        w.add_image("img", t(pixels), 1)
        w.add_images("imgs", t(np.stack([pixels, pixels[::-1]])), 1)
        w.add_pr_curve("pr", labels, t(predictions), 1)
        w.add_tensor("t", t(values), 1)
        w.add_embedding(t(values[:4]), label_img=t(np.stack([pixels] * 4)), global_step=1)

    with SummaryWriter(tmp_path / "ms", config=QUIET) as w:
        log(w, lambda a: ms.Tensor(a, DTYPES[dtype]))
    with SummaryWriter(tmp_path / "torch", config=QUIET) as w:
        log(w, lambda a: torch.tensor(a).to(getattr(torch, dtype)))
    mine, theirs = read_events(tmp_path / "ms"), read_events(tmp_path / "torch")
    for tag in ("h", "h_auto", "img", "imgs", "pr", "t"):
        assert [(s, v) for s, _, v in mine[tag]] == [(s, v) for s, _, v in theirs[tag]], tag
    assert mine["h"][0][2].histo.sum == values.sum()
    for name in ("tensors.tsv", "sprite.png"):
        path = Path("00001/default") / name
        assert (tmp_path / "ms" / path).read_bytes() == (tmp_path / "torch" / path).read_bytes()


def test_a_mindspore_bfloat16_beyond_float16s_range_keeps_its_value(tmp_path: Path) -> None:
    big = np.array([3.0e38, -1.0e5, 1.0e-10], dtype=np.float32)
    t = ms.Tensor(big, ms.bfloat16)
    exact = t.astype(ms.float32).asnumpy().astype(np.float64)
    with SummaryWriter(tmp_path, config=QUIET) as w:
        w.add_histogram("h", t, 1)
        w.add_scalar("s", t[0], 1)
    found = read_events(tmp_path)
    histo = found["h"][0][2].histo
    assert (histo.min, histo.max, histo.sum) == (exact.min(), exact.max(), exact.sum())
    assert found["s"][0][2].simple_value == float(np.float32(exact[0]))
