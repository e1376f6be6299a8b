"""mindwatch.SummaryWriter takes every value torch's SummaryWriter takes, as a class
(issue 38, feature 4): each test is parametrized over the cross product of where a value
comes from (Python, numpy scalar, numpy array, torch tensor), its dtype, its shape and
its layout (a slice of a larger tensor, a transposed or strided view, one that
requires grad), and over the forms of the method's other arguments (bins,
dataformats). The same calls go to torch's writer; both runs are read back with
TensorBoard's own loader and compared value for value (and with the value the input
holds, exactly). What torch's writer rejects, ours rejects with a TypeError naming the
argument and the fix.

Where ours deliberately differs from torch's, the test says so and checks our value:
bfloat16 and float8 go through float32 (exact; torch goes through float16, which makes a
bfloat16 beyond 65504 inf, and rejects float8), a tensor on the 'meta' device and
complex numbers are refused (torch writes random numbers for the first and drops the
imaginary part of the second), text is refused where a number belongs (torch parses it).

MindSpore Tensors: tests/mindspore/test_summarywriter.py. The folders a writer takes:
tests/test_summarywriter_logdirs.py.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from torch.utils.tensorboard import SummaryWriter as TorchWriter

from mindwatch import SummaryWriter

QUIET = {"print_every": 0}
Events = dict[str, list[tuple[int, float, Any]]]


def read_events(folder: Path) -> Events:
    """``{tag: [(step, wall_time, Summary.Value)]}`` of the event files directly in
    ``folder``, read with TensorBoard's own loader (as written, not migrated)."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    found: Events = {}
    for path in sorted(folder.glob("*tfevents*")):
        for event in LegacyEventFileLoader(str(path)).Load():
            for value in event.summary.value:
                found.setdefault(value.tag, []).append((event.step, event.wall_time, value))
    return found


def user_tags(events: Events) -> Events:
    """Without what a Monitor's run holds besides (its config, hardware, step times)."""
    return {t: v for t, v in events.items() if not t.startswith(("mindwatch/", "hw/", "perf/"))}


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name)
    assert isinstance(dtype, torch.dtype)
    return dtype


# --------------------------------------------------------------------- scalars

NUMPY_DTYPES = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool",
]  # fmt: skip
TORCH_DTYPES = [
    "float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
]  # fmt: skip
TORCH_REJECTS = {"float8_e4m3fn", "float8_e5m2"}  # its numpy() refuses them; ours: float32
SHAPES = {"0d": (), "1": (1,), "1x1": (1, 1), "1x1x1": (1, 1, 1)}


def value_of(dtype: str) -> float:
    """A value exact in ``dtype`` (float8 included) and unlike the others around it:
    negative where it can be, so that an unsigned or absolute reading shows."""
    if dtype == "bool":
        return 1.0
    if dtype.startswith("uint"):
        return 7.0
    if dtype.startswith("int"):
        return -7.0
    return -2.5


def around(dtype: str) -> float:
    """What the rest of a larger tensor holds: a slice read at the wrong place shows."""
    return 0.0 if dtype == "bool" else 9.0


@dataclass(frozen=True)
class Case:
    value: Any
    expected: float  # what the input holds, exactly
    torch_takes: bool = True


def _numpy(dtype: str, shape: tuple[int, ...], *, sliced: bool) -> Any:
    v = value_of(dtype)
    if not sliced:
        return np.full(shape, v, dtype=dtype)
    base = np.array([around(dtype)] * 2 + [v] + [around(dtype)], dtype=dtype)
    return base[2] if shape == () else base[2:3].reshape(shape)


def _torch(dtype: str, shape: tuple[int, ...], variant: str) -> Any:
    v, dt = value_of(dtype), torch_dtype(dtype)
    if variant == "slice":
        base = torch.tensor([around(dtype)] * 2 + [v] + [around(dtype)]).to(dt)
        return base[2] if shape == () else base[2:3].reshape(shape)
    t = torch.full(shape, v).to(dt)
    if variant == "grad":  # a leaf that requires grad, then a result of autograd
        return (t.clone().requires_grad_(True) * 1).reshape(shape)
    return t


def scalar_cases() -> dict[str, Case]:
    cases = {
        "python/int": Case(-7, -7.0),
        "python/float": Case(-2.5, -2.5),
        "python/bool": Case(True, 1.0),
        "python/big_int": Case(2**40 + 1, float(2**40 + 1)),
    }
    for dtype in NUMPY_DTYPES:
        v = value_of(dtype)
        cases[f"numpy/{dtype}/scalar"] = Case(np.dtype(dtype).type(v), v)
        for shape_id, shape in SHAPES.items():
            for sliced in (False, True):
                key = f"numpy/{dtype}/{shape_id}" + ("/slice" if sliced else "")
                cases[key] = Case(_numpy(dtype, shape, sliced=sliced), v)
    for dtype in TORCH_DTYPES:
        variants = ["plain", "slice"]
        if dtype in ("float16", "bfloat16", "float32", "float64"):
            variants.append("grad")
        for shape_id, shape in SHAPES.items():
            for variant in variants:
                cases[f"torch/{dtype}/{shape_id}/{variant}"] = Case(
                    _torch(dtype, shape, variant), value_of(dtype), dtype not in TORCH_REJECTS
                )
    return cases


SCALARS = scalar_cases()
# add_scalars makes a run per key: the shapes () and (1,) of every dtype, not sliced.
DICT_KEYS = [
    key
    for key in SCALARS
    if key.startswith("python/") or key.endswith(("/scalar", "/0d", "/0d/plain", "/1/plain"))
    or (key.startswith("numpy/") and key.endswith("/1"))
]  # fmt: skip


def as_key(case: str) -> str:
    """A case as an add_scalars key (a folder name: no '/')."""
    return case.replace("/", "_")


def write_scalars(w: Any, *, torch: bool) -> None:
    take = {k: c for k, c in SCALARS.items() if c.torch_takes or not torch}
    for case, c in take.items():
        w.add_scalar(case, c.value, 1)
    w.add_scalars("every", {as_key(k): take[k].value for k in DICT_KEYS if k in take}, 2)
    w.add_hparams({"lr": 0.1}, {f"metric/{k}": c.value for k, c in take.items()}, run_name="hp")


@pytest.fixture(scope="module")
def scalar_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("scalars")
    with SummaryWriter(root / "ours", config=QUIET) as w:
        write_scalars(w, torch=False)
    with TorchWriter(str(root / "torch")) as w:
        write_scalars(w, torch=True)
    return {"ours": root / "ours", "torch": root / "torch"}


@pytest.fixture(scope="module")
def read_scalar_runs(scalar_runs: dict[str, Path]) -> dict[tuple[str, str], Events]:
    """Every folder of both runs, read once: ``{(writer, sub-folder): events}``."""
    found = {}
    for writer, root in scalar_runs.items():
        for folder in [root, *(p for p in root.iterdir() if p.is_dir())]:
            found[writer, folder.name if folder != root else ""] = read_events(folder)
    return found


def _point(runs: dict[tuple[str, str], Events], writer: str, method: str, case: str) -> Any:
    if method == "add_scalar":
        [(step, _, value)] = runs[writer, ""][case]
        assert step == 1
    elif method == "add_scalars":
        [(step, _, value)] = runs[writer, f"every_{as_key(case)}"]["every"]
        assert step == 2
    else:
        [(step, _, value)] = runs[writer, "hp"][f"metric/{case}"]
    return value.simple_value


@pytest.mark.parametrize(
    ("method", "case"),
    [("add_scalar", case) for case in SCALARS]
    + [("add_hparams metric", case) for case in SCALARS]
    # add_scalars makes a run per key: the shapes () and (1,) of every kind
    + [("add_scalars", case) for case in DICT_KEYS],
)
def test_every_number_torch_takes_is_written_as_its_exact_value(
    read_scalar_runs: dict[tuple[str, str], Events], method: str, case: str
) -> None:
    c = SCALARS[case]
    want = float(np.float32(c.expected))  # a TensorBoard scalar is a float32
    assert _point(read_scalar_runs, "ours", method, case) == want
    if c.torch_takes:
        assert _point(read_scalar_runs, "torch", method, case) == want


REFUSED: dict[str, Callable[[], Any]] = {
    "numpy (2,)": lambda: np.zeros(2),
    "numpy (1, 2)": lambda: np.zeros((1, 2)),
    "numpy (0,)": lambda: np.zeros(0),
    "torch (2,)": lambda: torch.tensor([-2.5, 9.0]),  # the first is not the value
    "torch (2, 1)": lambda: torch.zeros(2, 1),
    "torch (0,)": lambda: torch.zeros(0),
    "complex": lambda: 1 + 2j,
    "numpy complex64": lambda: np.complex64(1 + 2j),
    "numpy complex (1,)": lambda: np.array([1 + 2j]),
    "torch complex": lambda: torch.tensor(1 + 2j),
    "torch complex (1,)": lambda: torch.tensor([1 + 2j]),
    "torch complex, imaginary part 0": lambda: torch.tensor(1 + 0j),
    "torch meta": lambda: torch.zeros((), device="meta"),
    "torch meta (1,)": lambda: torch.zeros(1, device="meta"),
    "str": lambda: "0.5",
    "numpy str": lambda: np.array("0.5"),
    "bytes": lambda: b"1",
    "None": lambda: None,
    "list": lambda: [0.5],
}
# torch writes the meta tensors' random numbers and parses the text; the rest it refuses.
TORCH_WRITES = {"torch meta", "torch meta (1,)", "str", "numpy str", "bytes"}


@pytest.fixture(scope="module")
def writers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    root = tmp_path_factory.mktemp("refused")
    with SummaryWriter(root / "ours", config=QUIET) as ours, TorchWriter(str(root / "t")) as t:
        yield ours, t


@pytest.mark.parametrize(
    ("method", "case"),
    [
        (method, case)
        for method in ("add_scalar", "add_scalars", "add_hparams", "hparam")
        for case in REFUSED
        if not (method == "hparam" and case in ("str", "None"))  # hparam values, those
    ],
)
def test_what_is_not_one_real_number_is_refused_naming_the_tag(
    writers: tuple[Any, Any], method: str, case: str
) -> None:
    ours, theirs = writers
    value = REFUSED[case]()
    calls: dict[str, Callable[[Any, Any], None]] = {
        "add_scalar": lambda w, v: w.add_scalar("the_tag", v, 1),
        "add_scalars": lambda w, v: w.add_scalars("main", {"the_tag": v}, 1),
        "add_hparams": lambda w, v: w.add_hparams({"lr": 0.1}, {"the_tag": v}, run_name="x"),
        "hparam": lambda w, v: w.add_hparams({"the_tag": v}, {"m": 1.0}, run_name="x"),
    }
    with pytest.raises(TypeError, match="the_tag") as caught:
        calls[method](ours, value)
    message = str(caught.value)
    assert message.startswith("mindwatch:")
    assert any(
        fix in message
        for fix in ("must be a number", "real part", "'meta' device", "pass the number")
    ), message
    if method == "add_scalar" and case not in TORCH_WRITES:
        with pytest.raises(Exception):  # noqa: B017, PT011 - torch's own types vary
            calls[method](theirs, value)


def test_a_refused_value_leaves_nothing_half_written(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path, config=QUIET) as w:
        w.add_scalar("loss", 0.5, 1)
        with pytest.raises(TypeError):
            w.add_scalars("pair", {"a": 1.0, "b": torch.zeros(2)}, 1)
        with pytest.raises(TypeError):
            w.add_scalar("loss", torch.zeros(2), 2)
        w.add_scalar("loss", torch.tensor([0.25]), 2)
    assert [(s, v.simple_value) for s, _, v in read_events(tmp_path)["loss"]] == [
        (1, 0.5),
        (2, 0.25),
    ]
    assert not (tmp_path / "pair_a").exists()  # the dict is checked before any key is written


def test_a_tensor_that_requires_grad_is_read_without_autograds_warning(tmp_path: Path) -> None:
    """float() of such a tensor warns ("Converting a tensor with requires_grad=True to a
    scalar..."); its item() and detach() do not."""
    import warnings

    leaf = torch.tensor([0.5, 0.25], requires_grad=True)
    with SummaryWriter(tmp_path, config=QUIET) as w, warnings.catch_warnings():
        warnings.simplefilter("error")
        for step in (1, 2):  # the first value of a type and the next take other paths
            w.add_scalar("loss", leaf[0] * 2, step)
            w.add_scalar("loss1", (leaf[1:] * 2).reshape(1, 1), step)
            w.add_scalars("pair", {"a": leaf.sum()}, step, walltime=leaf[0] * 4)
            w.add_histogram("h", leaf * 2, step)
    found = read_events(tmp_path)
    assert [v.simple_value for _, _, v in found["loss"]] == [1.0, 1.0]
    assert [v.simple_value for _, _, v in found["loss1"]] == [0.5, 0.5]
    assert [wall for _, wall, _ in read_events(tmp_path / "pair_a")["pair"]] == [2.0, 2.0]


def test_bfloat16_beyond_float16s_range_keeps_its_value(tmp_path: Path) -> None:
    """Values a bfloat16 holds and a float16 does not (beyond 65504, below 6e-8): ours
    are exact, where torch's writer (through float16) writes inf and 0."""
    values = [3.0e38, -1.0e5, 70000.0, 1.0e-10, 0.1]
    t = torch.tensor(values, dtype=torch.bfloat16)
    exact = t.double().numpy()
    with SummaryWriter(tmp_path, config=QUIET) as w:
        for i, x in enumerate(t):
            w.add_scalar(f"s{i}", x, 1)
            w.add_scalar(f"s{i}", x.reshape(1), 2)
        w.add_histogram("h", t, 1)
        w.add_tensor("t", t, 1)
        w.add_embedding(t.reshape(-1, 1), tag="e")
    found = read_events(tmp_path)
    for i, want in enumerate(exact):
        assert [v.simple_value for _, _, v in found[f"s{i}"]] == [float(np.float32(want))] * 2
    histo = found["h"][0][2].histo
    assert (histo.min, histo.max, histo.num) == (exact.min(), exact.max(), 5)
    assert histo.sum == exact.sum()
    assert histo.sum_squares == exact.dot(exact)
    from tensorboard.util import tensor_util

    assert tensor_util.make_ndarray(found["t"][0][2].tensor).tolist() == exact.tolist()
    tsv = (tmp_path / "00000" / "e" / "tensors.tsv").read_text().split()
    assert [float(x) for x in tsv] == exact.tolist()


# --------------------------------------------------------------------- arrays

ARRAY_DTYPES_NUMPY = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
]  # fmt: skip
ARRAY_DTYPES_TORCH = [*ARRAY_DTYPES_NUMPY, "bfloat16", "float8_e4m3fn"]


def grid_values(dtype: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """Deterministic values exact in ``dtype`` (float8 too): quarters in [-8, 8] for
    floats, integers in [-8, 8] (or [0, 16] unsigned), alternating for bool."""
    n = math.prod(shape)
    k = (np.arange(n) * 7) % 33  # 0..32, scrambled
    if dtype == "bool":
        data = (k % 2).astype(float)
    elif dtype.startswith("uint"):
        data = (k % 17).astype(float)
    elif dtype.startswith("int"):
        data = (k - 16) / 2 // 1
    else:
        data = (k - 16) / 4
    return data.reshape(shape)


def make_array(source: str, dtype: str, layout: str, shape: tuple[int, ...]) -> Any:
    """``shape``-shaped values of ``dtype`` from ``source``, laid out as ``layout``:
    'contiguous', 'transposed' (a view of memory stored in the other order), 'strided'
    (every other element of a wider array, whose others hold 5: a reading of the wrong
    elements shows), 'grad' (torch: an autograd result)."""
    data = grid_values(dtype, shape)
    stored, pick = data, (lambda a: a)
    if layout == "transposed":
        stored = np.ascontiguousarray(data.T)
        pick = (lambda a: a.T) if source == "numpy" else (lambda a: a.permute(1, 0))
    elif layout == "strided":
        stored = np.full((*shape[:-1], 2 * shape[-1]), 5.0)
        stored[..., ::2] = data
        pick = lambda a: a[..., ::2]  # noqa: E731
    if source == "numpy":
        return pick(stored.astype(dtype))
    t = pick(torch.tensor(stored).to(torch_dtype(dtype)))
    if layout == "grad":
        return t.clone().requires_grad_(True) * 1
    return t


def array_sources() -> list[tuple[str, str, str]]:
    """(source, dtype, layout): the cross product, 'grad' for torch's float dtypes."""
    out = []
    for source, dtypes in (("numpy", ARRAY_DTYPES_NUMPY), ("torch", ARRAY_DTYPES_TORCH)):
        for dtype in dtypes:
            layouts = ["contiguous", "transposed", "strided"]
            if source == "torch" and dtype in ("float16", "bfloat16", "float32", "float64"):
                layouts.append("grad")
            out += [(source, dtype, layout) for layout in layouts]
    return out


ARRAYS = array_sources()
BINS: dict[str, Any] = {
    "tensorflow": "tensorflow",
    "auto": "auto",
    "fd": "fd",
    "sqrt": "sqrt",
    "int": 7,
    "list": [-9, -1.5, 0, 0.25, 4, 17],
    "ndarray": np.linspace(-9, 17, 12),
}


def _exact(source: str, dtype: str, layout: str, shape: tuple[int, ...]) -> Any:
    """The values of :func:`make_array`, as float64 (what a histogram counts)."""
    value = make_array(source, dtype, layout, shape)
    if source == "torch":
        return value.detach().double().numpy()
    return value.astype(np.float64)


@pytest.fixture(scope="module")
def histogram_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Events]:
    root = tmp_path_factory.mktemp("histograms")

    def write(w: Any, *, torch: bool) -> None:
        for source, dtype, layout in ARRAYS:
            if torch and dtype in TORCH_REJECTS:
                continue
            values = make_array(source, dtype, layout, (6, 8))
            for name, bins in BINS.items():
                w.add_histogram(f"{source}/{dtype}/{layout}/{name}", values, 1, bins=bins)

    with SummaryWriter(root / "ours", config=QUIET) as w:
        write(w, torch=False)
    with TorchWriter(str(root / "torch")) as w:
        write(w, torch=True)
    return {"ours": read_events(root / "ours"), "torch": read_events(root / "torch")}


@pytest.mark.parametrize("bins", list(BINS))
@pytest.mark.parametrize(("source", "dtype", "layout"), ARRAYS)
def test_add_histogram_of_every_dtype_and_layout_is_torchs(
    histogram_runs: dict[str, Events], source: str, dtype: str, layout: str, bins: str
) -> None:
    tag = f"{source}/{dtype}/{layout}/{bins}"
    [(step, _, value)] = histogram_runs["ours"][tag]
    histo = value.histo
    exact = _exact(source, dtype, layout, (6, 8)).reshape(-1)
    assert step == 1
    assert (histo.min, histo.max, histo.num) == (exact.min(), exact.max(), exact.size)
    assert (histo.sum, histo.sum_squares) == (exact.sum(), exact.dot(exact))
    assert sum(histo.bucket) == exact.size
    if dtype not in TORCH_REJECTS:
        assert histo == histogram_runs["torch"][tag][0][2].histo


def test_add_histogram_refuses_what_has_no_histogram(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path, config=QUIET) as w:
        for values, match in [
            (torch.zeros(3, device="meta"), "add_histogram's values.*'meta' device"),
            (torch.tensor([1 + 2j, 3j]), "add_histogram's values.*complex"),
            (np.array([1 + 2j]), "add_histogram's values.*complex"),
            (torch.zeros(3).to_sparse(), "cannot read add_histogram's values.*to_dense"),
        ]:
            with pytest.raises(TypeError, match=match):
                w.add_histogram("h", values, 1)
        with pytest.raises(ValueError, match=r"'h'.*empty"):
            w.add_histogram("h", torch.zeros(0), 1)


def test_every_argument_that_is_not_real_numbers_is_refused_naming_that_argument(
    tmp_path: Path,
) -> None:
    """Complex numbers in each array argument, text in each number argument: the
    TypeError names the argument the user passed (and, for complex numbers, what it
    was: a dtype, or the Python type of a list)."""
    z = np.array([1 + 2j, 3j, 0.5 + 0j])
    pixels = np.full((3, 5, 4), 0.5 + 1j)
    labels, predictions = np.array([0, 1, 1]), np.array([0.25, 0.75, 0.5])
    raw = [0.0, 2.0, 3, 3.0, 5.0, [1.0, 2.0], [2, 1]]  # min, max, num, sum, sum_squares...
    calls: list[tuple[str, Callable[[Any], None]]] = [
        ("snd_tensor holds complex numbers (complex128)", lambda w: w.add_audio("a", z, 1)),
        ("img_tensor holds complex numbers (complex128)", lambda w: w.add_image("i", pixels)),
        (
            "img_tensor holds complex numbers (<class 'list'>)",
            lambda w: w.add_images("i", [pixels, pixels], 1, dataformats="CHW"),
        ),
        (
            "add_histogram's values holds complex numbers (<class 'list'>)",
            lambda w: w.add_histogram("h", [1 + 2j, 3j], 1),
        ),
        ("labels holds complex", lambda w: w.add_pr_curve("p", z, predictions, 1)),
        ("predictions holds complex", lambda w: w.add_pr_curve("p", labels, z, 1)),
        ("weights holds complex", lambda w: w.add_pr_curve("p", labels, predictions, 1, 3, z)),
    ]
    for i, key in enumerate(["min", "max", "num", "sum", "sum_squares"]):
        args = [*raw[:i], "x", *raw[i + 1 :]]
        calls.append(
            (f"'{key}' must be a number", lambda w, a=args: w.add_histogram_raw("r", *a, 1))
        )
    for i, key in enumerate(["bucket_limits", "bucket_counts"]):
        args = [*raw[: 5 + i], z, *raw[6 + i :]]
        calls.append((f"{key} holds complex", lambda w, a=args: w.add_histogram_raw("r", *a, 1)))
    with SummaryWriter(tmp_path, config=QUIET) as w:
        for want, call in calls:
            with pytest.raises(TypeError) as caught:
                call(w)
            assert str(caught.value).startswith(f"mindwatch: {want}"), str(caught.value)
    assert set(read_events(tmp_path)) == {"mindwatch/config"}  # nothing half-written


def test_bytes_that_are_not_numbers_reach_the_reader_unchanged() -> None:
    """A void dtype of ml_dtypes' kind becomes float32; raw bytes (numpy's ``V``) are
    no numbers: left as they are, for the method's reader to refuse."""
    from mindwatch.summarywriter import as_array

    raw = np.array([b"ab", b"cd"], dtype="V2")
    assert as_array(raw) is raw


IMAGE_DTYPES_NUMPY = ["uint8", "float16", "float32", "float64"]
IMAGE_DTYPES_TORCH = [*IMAGE_DTYPES_NUMPY, "bfloat16"]
# dataformats -> a shape in it (H=5, W=4; C and N as given); torch's names, any case.
FORMATS: dict[str, tuple[int, ...]] = {
    "CHW": (3, 5, 4),
    "CHW gray": (1, 5, 4),
    "HWC": (5, 4, 3),
    "HWC gray": (5, 4, 1),
    "HWC rgba": (5, 4, 4),
    "HW": (5, 4),
    "WH": (4, 5),
    "WHC": (4, 5, 3),
    "chw": (3, 5, 4),
    "NCHW": (10, 3, 5, 4),
    "NCHW gray": (2, 1, 5, 4),
    "NHWC": (3, 5, 4, 3),
}


def image_data(source: str, dtype: str, layout: str, shape: tuple[int, ...]) -> Any:
    """Pixels in [0, 255] (uint8) or [0, 1] (floats: k/255, which float16 and bfloat16
    hold closely enough that torch's float16 route and ours give one picture)."""
    k = (np.arange(math.prod(shape)) * 37 % 256).reshape(shape)
    data = k.astype(np.uint8) if dtype == "uint8" else k / 255.0
    if layout == "transposed":
        flipped = np.ascontiguousarray(data.T)
        if source == "numpy":
            return flipped.astype(dtype).T
        return torch.tensor(flipped).to(torch_dtype(dtype)).permute(*reversed(range(k.ndim)))
    if source == "numpy":
        return data.astype(dtype)
    t = torch.tensor(data).to(torch_dtype(dtype))
    return t.clone().requires_grad_(True) * 1 if layout == "grad" else t


IMAGES = [
    (source, dtype, layout, fmt)
    for source, dtypes in (("numpy", IMAGE_DTYPES_NUMPY), ("torch", IMAGE_DTYPES_TORCH))
    for dtype in dtypes
    for layout in (
        ["contiguous", "transposed", "grad"]
        if source == "torch" and dtype != "uint8"
        else ["contiguous", "transposed"]
    )
    for fmt in FORMATS
]


def _image_call(w: Any, tag: str, data: Any, fmt: str) -> None:
    dataformats = fmt.split(maxsplit=1)[0]
    if "N" in dataformats:
        w.add_images(tag, data, 1, dataformats=dataformats)
    else:
        w.add_image(tag, data, 1, dataformats=dataformats)


@pytest.fixture(scope="module")
def image_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Events]:
    root = tmp_path_factory.mktemp("images")

    def write(w: Any) -> None:
        for source, dtype, layout, fmt in IMAGES:
            data = image_data(source, dtype, layout, FORMATS[fmt])
            _image_call(w, f"{source}/{dtype}/{layout}/{fmt}", data, fmt)

    with SummaryWriter(root / "ours", config=QUIET) as w:
        write(w)
    with TorchWriter(str(root / "torch")) as w:
        write(w)
    return {"ours": read_events(root / "ours"), "torch": read_events(root / "torch")}


@pytest.mark.parametrize(("source", "dtype", "layout", "fmt"), IMAGES)
def test_add_image_of_every_dtype_and_dataformats_is_torchs(
    image_runs: dict[str, Events], source: str, dtype: str, layout: str, fmt: str
) -> None:
    from PIL import Image

    tag = f"{source}/{dtype}/{layout}/{fmt}"
    [(step, _, value)] = image_runs["ours"][tag]
    assert step == 1
    assert value.image == image_runs["torch"][tag][0][2].image
    # and the picture is the input's: one image's pixels, scaled as torch scales them
    if fmt in ("CHW", "HWC", "HWC rgba", "chw"):
        data = image_data(source, dtype, layout, FORMATS[fmt])
        array = data.detach().float().numpy() if source == "torch" else data
        hwc = array.transpose(1, 2, 0) if fmt.upper().startswith("CHW") else array
        scale = 1 if dtype == "uint8" else 255
        want = (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
        png = np.asarray(Image.open(io.BytesIO(value.image.encoded_image_string)))
        assert png.shape == want.shape
        assert np.array_equal(png, want)


def test_add_images_takes_a_list_of_images_as_tensorboardx_does(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter as X

    chw = [image_data("torch", "float32", "contiguous", (3, 5, 4)) * (i + 1) / 4 for i in range(3)]
    hwc = [image_data("numpy", "uint8", "contiguous", (5, 4, 3)) for _ in range(2)]

    def case(w: Any) -> None:
        w.add_images("chw", chw, 1, dataformats="CHW")
        w.add_images("hwc", hwc, 2, dataformats="HWC")
        w.add_images("one", chw[1:2], 3, dataformats="CHW")  # a list of one tensor

    with SummaryWriter(tmp_path / "ours", config=QUIET) as w:
        case(w)
    with X(str(tmp_path / "x")) as w:
        case(w)
    ours, theirs = read_events(tmp_path / "ours"), read_events(tmp_path / "x")
    assert (ours["one"][0][2].image.height, ours["one"][0][2].image.width) == (5, 4)
    for tag in ("chw", "hwc", "one"):
        assert [(s, v.image) for s, _, v in ours[tag]] == [(s, v.image) for s, _, v in theirs[tag]]


# --------------------------------------------------------------------- text, PR curves

TEXTS: dict[str, Any] = {
    "plain": "loss went down",
    "markdown": "**bold** and a table:\n\n|a|b|\n|-|-|\n|1|2|",
    "non-ascii": "损失下降 ü ✓",
    "empty": "",
    "numpy str": np.str_("numpy's str"),
}


def test_add_text_of_every_str_is_torchs(tmp_path: Path) -> None:
    def case(w: Any) -> None:
        for name, text in TEXTS.items():
            w.add_text(name, text, 3)

    with SummaryWriter(tmp_path / "ours", config=QUIET) as w:
        case(w)
        for bad in (b"bytes", None, 5, ["a"]):
            with pytest.raises(TypeError, match="add_text takes a str"):
                w.add_text("bad", bad, 1)
    with TorchWriter(str(tmp_path / "torch")) as w:
        case(w)
    ours, theirs = read_events(tmp_path / "ours"), read_events(tmp_path / "torch")
    for name, text in TEXTS.items():
        tag = f"{name}/text_summary"
        [(step, _, value)] = ours[tag]
        assert step == 3
        assert value == theirs[tag][0][2]
        assert value.tensor.string_val == [str(text).encode("utf-8")]


LABELS: dict[str, Callable[[np.ndarray[Any, Any]], Any]] = {
    "numpy int64": lambda k: k.astype(np.int64),
    "numpy bool": lambda k: k.astype(bool),
    "numpy float": lambda k: k.astype(np.float32),
    "torch int64": lambda k: torch.tensor(k, dtype=torch.int64),
    "torch bool": lambda k: torch.tensor(k, dtype=torch.bool),
}
PREDICTIONS: dict[str, Callable[[np.ndarray[Any, Any]], Any]] = {
    "numpy float16": lambda p: p.astype(np.float16),
    "numpy float32": lambda p: p.astype(np.float32),
    "numpy float64": lambda p: p,
    "torch float32": lambda p: torch.tensor(p, dtype=torch.float32),
    "torch float64": lambda p: torch.tensor(p, dtype=torch.float64),
    "torch bfloat16": lambda p: torch.tensor(p, dtype=torch.bfloat16),
    "torch grad": lambda p: torch.tensor(p, dtype=torch.float32).requires_grad_(True) * 1,
    "torch strided": lambda p: torch.tensor(np.stack([p, 1 - p], axis=1))[:, 0],
}


def test_add_pr_curve_of_every_label_and_prediction_kind_is_torchs(tmp_path: Path) -> None:
    """Predictions in eighths: their products with the thresholds are exact in float16,
    so torch's float16 route for bfloat16 and ours (float32) bucket them alike."""
    rng = np.random.default_rng(5)
    k = rng.integers(0, 2, 64)
    p = rng.integers(0, 9, 64) / 8.0
    weights = rng.integers(1, 4, 64).astype(np.float32)

    def case(w: Any) -> None:
        for label_kind, labels in LABELS.items():
            for prediction_kind, predictions in PREDICTIONS.items():
                tag = f"{label_kind}/{prediction_kind}"
                w.add_pr_curve(tag, labels(k), predictions(p), 1)
                w.add_pr_curve(f"{tag}/w", labels(k), predictions(p), 2, 33, weights)

    with SummaryWriter(tmp_path / "ours", config=QUIET) as w:
        case(w)
    with TorchWriter(str(tmp_path / "torch")) as w:
        case(w)
    ours, theirs = user_tags(read_events(tmp_path / "ours")), read_events(tmp_path / "torch")
    assert len(ours) == len(LABELS) * len(PREDICTIONS) * 2
    true_positives = float(k.sum())
    for tag, points in ours.items():
        assert [(s, v) for s, _, v in points] == [(s, v) for s, _, v in theirs[tag]], tag
        tp_at_0 = points[0][2].tensor.float_val[0]
        assert tp_at_0 == (true_positives if not tag.endswith("/w") else float(k @ weights))


# --------------------------------------------------------------------- add_tensor, embeddings

TENSORS: dict[str, Callable[[], Any]] = {
    "torch float32": lambda: torch.tensor([[1.5, -2.0], [0.25, 8.0]]),
    "torch float64": lambda: torch.tensor([1 / 3], dtype=torch.float64),
    "torch int32": lambda: torch.tensor([1, -2, 3], dtype=torch.int32),
    "torch int64": lambda: torch.tensor([2**40], dtype=torch.int64),
    "torch bool": lambda: torch.tensor([True, False]),
    "torch uint8": lambda: torch.tensor([0, 255], dtype=torch.uint8),
    "torch complex64": lambda: torch.tensor([1 + 2j, -3j], dtype=torch.complex64),
    "torch 0-d": lambda: torch.tensor(0.125),
    "torch empty": lambda: torch.zeros(0),
    "torch grad": lambda: torch.ones(2, requires_grad=True) * 3,
    "torch transposed": lambda: torch.arange(6.0).reshape(2, 3).T,
}


def test_add_tensor_of_every_dtype_reads_back_as_torchs(tmp_path: Path) -> None:
    """torch's own kinds decode to the same arrays (float16 and bfloat16 are where
    torch's encoding is not TensorBoard's: add_tensor's docstring, and the check below)."""
    from tensorboard.util import tensor_util

    with SummaryWriter(tmp_path / "ours", config=QUIET) as w:
        for name, make in TENSORS.items():
            w.add_tensor(name, make(), 1)
        w.add_tensor("torch float16", torch.tensor([1.5, -0.1], dtype=torch.float16), 1)
        w.add_tensor("numpy float16", np.array([65504, 6e-8], dtype=np.float16), 1)
    with TorchWriter(str(tmp_path / "torch")) as w:
        for name, make in TENSORS.items():
            w.add_tensor(name, make(), 1)
    ours, theirs = read_events(tmp_path / "ours"), read_events(tmp_path / "torch")
    for name, make in TENSORS.items():
        [(_, _, mine)] = ours[name]
        peer = theirs[name][0][2]
        got = tensor_util.make_ndarray(mine.tensor)
        assert mine.metadata == peer.metadata, name
        assert got.dtype == make().detach().numpy().dtype, name
        assert np.array_equal(got, make().detach().numpy()), name
        if name != "torch uint8":  # torch's uint8 in int_val: TensorBoard reads no values
            want = tensor_util.make_ndarray(peer.tensor)
            assert got.dtype == want.dtype, name
            assert np.array_equal(got, want), name
    for name, want in [
        ("torch float16", np.array([1.5, -0.1], dtype=np.float16)),
        ("numpy float16", np.array([65504, 6e-8], dtype=np.float16)),
    ]:
        got = tensor_util.make_ndarray(ours[name][0][2].tensor)
        assert got.dtype == np.float16
        assert np.array_equal(got, want)


def test_add_embedding_of_every_kind_writes_torchs_files(tmp_path: Path) -> None:
    """torch's own test's inputs (labels as a tensor, rows of a tensor and a str with a
    header, float64 images) and the kinds of mat a model gives (bfloat16, requires grad,
    a transposed view): the same files as torch's."""
    rng = np.random.default_rng(2)
    features = rng.integers(-8, 8, (3, 4)) / 4
    labels = torch.tensor([33.0, 44.0, 55.0])
    images = torch.tensor(rng.random((3, 3, 5, 5)))
    mats: dict[str, Callable[[], Any]] = {
        "numpy64": lambda: features,
        "numpy32": lambda: features.astype(np.float32),
        "f32": lambda: torch.tensor(features, dtype=torch.float32),
        "bf16": lambda: torch.tensor(features, dtype=torch.bfloat16),
        "grad": lambda: torch.tensor(features).requires_grad_(True) * 1,
        "transposed": lambda: torch.tensor(np.ascontiguousarray(features.T)).T,
    }

    def case(w: Any) -> None:
        for step, (tag, mat) in enumerate(mats.items()):
            w.add_embedding(mat(), metadata=labels, label_img=images, global_step=step, tag=tag)
        rows = list(zip(labels, ["test", "train", "train"]))
        w.add_embedding(
            mats["f32"](), metadata=rows, metadata_header=["digit", "dataset"], tag="rows"
        )

    with SummaryWriter(tmp_path / "ours", config=QUIET) as w:
        case(w)
    with TorchWriter(str(tmp_path / "torch")) as w:
        case(w)
    ours, theirs = tmp_path / "ours", tmp_path / "torch"
    written = sorted(p.relative_to(theirs) for p in theirs.rglob("*.tsv"))
    assert len(written) == 2 * (len(mats) + 1)
    assert sorted(p.relative_to(ours) for p in ours.rglob("*.tsv")) == written
    for path in written:
        assert (ours / path).read_text() == (theirs / path).read_text(), path
    for step, tag in enumerate(mats):
        tsv = (ours / f"{step:05d}" / tag / "tensors.tsv").read_text()
        assert np.array_equal(np.loadtxt(io.StringIO(tsv)), features), tag
        sprite = Path(f"{step:05d}") / tag / "sprite.png"
        assert (ours / sprite).read_bytes() == (theirs / sprite).read_bytes()


# --------------------------------------------------------------------- walltime

WALLTIMES: dict[str, Callable[[], Any]] = {
    "zero": lambda: 0,  # the epoch: torch's own test passes walltime=n_iter, 0
    "int": lambda: 1_700_000_000,
    "float": lambda: 1_700_000_000.25,
    "numpy float64": lambda: np.float64(1_700_000_000.5),
    "numpy float32": lambda: np.float32(1.5),
    "numpy int64": lambda: np.int64(5),
    "torch 0-d": lambda: torch.tensor(3.5, dtype=torch.float64),
    "torch (1,)": lambda: torch.tensor([3.5]),
}


def _walltime_calls() -> dict[str, Callable[[Any, str, Any], None]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    image = image_data("numpy", "float32", "contiguous", (3, 5, 4))
    labels, predictions = np.array([0, 1, 1, 0]), np.array([0.25, 0.75, 0.5, 0.125])
    return {
        "add_scalar": lambda w, tag, t: w.add_scalar(tag, 0.5, 1, walltime=t),
        "add_scalar new_style": lambda w, tag, t: w.add_scalar(
            tag, 0.5, 1, walltime=t, new_style=True
        ),
        "add_histogram": lambda w, tag, t: w.add_histogram(tag, np.arange(9.0), 1, walltime=t),
        "add_histogram_raw": lambda w, tag, t: w.add_histogram_raw(
            tag, 0, 2, 3, 3, 5, [1.0, 2.0], [2, 1], 1, walltime=t
        ),
        "add_image": lambda w, tag, t: w.add_image(tag, image, 1, walltime=t),
        "add_images": lambda w, tag, t: w.add_images(tag, image[None], 1, walltime=t),
        "add_figure": lambda w, tag, t: w.add_figure(
            tag, plt.figure(figsize=(1, 1), dpi=20), 1, walltime=t
        ),
        "add_text": lambda w, tag, t: w.add_text(tag, "x", 1, walltime=t),
        "add_audio": lambda w, tag, t: w.add_audio(tag, np.zeros(80), 1, 8000, walltime=t),
        "add_pr_curve": lambda w, tag, t: w.add_pr_curve(tag, labels, predictions, 1, walltime=t),
        "add_pr_curve_raw": lambda w, tag, t: w.add_pr_curve_raw(
            tag, [2, 1], [2, 0], [0, 2], [0, 1], [0.5, 1.0], [1.0, 0.5], 1, 2, walltime=t
        ),
        "add_tensor": lambda w, tag, t: w.add_tensor(tag, torch.ones(2), 1, walltime=t),
    }


WALLTIME_METHODS = [*_walltime_calls(), "add_scalars"]


@pytest.fixture(scope="module")
def walltime_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Events]]:
    """Every method with every kind of walltime, by both writers; each folder read once:
    ``{writer: {sub-folder ('' for the run): events}}``."""
    root = tmp_path_factory.mktemp("walltimes")
    calls = _walltime_calls()

    def write(w: Any) -> None:
        for kind, walltime in WALLTIMES.items():
            for method, call in calls.items():
                call(w, f"{method}/{kind}", walltime())
            w.add_scalars(f"pair_{kind}", {"a": 1.0, "b": 2.0}, 1, walltime())

    with SummaryWriter(root / "ours", config=QUIET) as w:
        write(w)
    with TorchWriter(str(root / "torch")) as w:
        write(w)
    return {
        writer: {
            "" if folder == root / writer else folder.name: read_events(folder)
            for folder in [root / writer, *(root / writer).iterdir()]
            if folder.is_dir()
        }
        for writer in ("ours", "torch")
    }


@pytest.mark.parametrize("kind", list(WALLTIMES))
@pytest.mark.parametrize("method", WALLTIME_METHODS)
def test_every_method_writes_the_callers_walltime(
    walltime_runs: dict[str, dict[str, Events]], method: str, kind: str
) -> None:
    want = float(WALLTIMES[kind]())
    found = []
    for writer in ("ours", "torch"):
        runs = walltime_runs[writer]
        if method == "add_scalars":  # every sub-run's event has it
            walls = [
                [wall for _, wall, _ in runs[f"pair_{kind}_{key}"][f"pair_{kind}"]]
                for key in ("a", "b")
            ]
        else:
            [tag] = [t for t in runs[""] if t.split("/")[:2] == [method, kind]]
            walls = [[wall for _, wall, _ in runs[""][tag]]]
        found.append(walls)
    assert found[0] == found[1]
    assert all(walls == [want] for walls in found[0])


def test_one_run_keeps_every_methods_walltime(tmp_path: Path) -> None:
    """Every method in one test body, with a walltime each: the module fixture above is
    built inside whichever test comes first, so a method that dropped the walltime
    would be caught only by its own parametrized case (and mutation testing, which runs
    the tests that reached a function, would not run that one)."""
    calls = _walltime_calls()
    with SummaryWriter(tmp_path, config=QUIET) as w:
        for i, (method, call) in enumerate(calls.items()):
            call(w, method, 1_000_000 + i + 0.25)
        w.add_scalars("pair", {"a": 1.0}, 1, 7.5)
        for kind, walltime in WALLTIMES.items():  # add_scalar's fast path takes floats only
            w.add_scalar(f"kinds/{kind}", 0.5, 2, walltime())
        for method, call in calls.items():  # text is no time: refused at the call
            with pytest.raises(TypeError, match="'walltime' must be a number, got the string"):
                call(w, f"text/{method}", "1700000000")
    found = read_events(tmp_path)
    for i, method in enumerate(calls):
        [tag] = [t for t in found if t.split("/")[0] == method]
        assert [wall for _, wall, _ in found[tag]] == [1_000_000 + i + 0.25], method
    for kind, walltime in WALLTIMES.items():
        assert [wall for _, wall, _ in found[f"kinds/{kind}"]] == [float(walltime())], kind
    assert not [tag for tag in found if tag.startswith("text/")]
    assert [wall for _, wall, _ in read_events(tmp_path / "pair_a")["pair"]] == [7.5]


def test_scalars_of_one_step_with_different_walltimes_keep_each_its_own(tmp_path: Path) -> None:
    """A step's scalars go to the pipeline as one row; a scalar with another walltime
    starts a new row instead of taking the row's."""
    with SummaryWriter(tmp_path, config=QUIET) as w:
        w.add_scalar("a", 1.0, 5, walltime=100.0)
        w.add_scalar("b", 2.0, 5, walltime=100.0)
        w.add_scalar("c", 3.0, 5, walltime=200.0)
        w.add_scalar("d", 4.0, 5)  # now
    found = read_events(tmp_path)
    assert [w for tag in "abc" for _, w, _ in found[tag]] == [100.0, 100.0, 200.0]
    assert found["d"][0][1] > 1_000_000_000
