"""Every folder form people pass to a SummaryWriter, and the arguments tensorboardX's
users carry over (issue 38, feature 4).

The forms, as a class: a str, a ``pathlib.Path``, bytes, relative (made absolute when
the writer is made: a later ``os.chdir`` does not move the run), ``~``, a path with
non-ASCII characters, ``file://`` URLs, ``log_dir=`` and tensorboardX's ``logdir=``;
None and ``""`` give torch's ``runs/<date>_<host><comment>``. A URL of a remote store
(``s3://``, ``gs://``, ``hdfs://``...) is refused, naming it and the fix, and no local
folder named ``s3:`` appears (torch writes it through TensorBoard's gfile when the
store's library is installed; mindwatch writes locally: docs/coming-from-pytorch.md).

tensorboardX's arguments are checked side by side with real tensorboardX:
``write_to_disk=False``, ``add_hparams(..., name=)`` (and its positional form),
``filename_suffix`` on every event file, ``logdir=``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mindwatch
from mindwatch import SummaryWriter
from mindwatch.events import LogDirError
from tests.test_summarywriter import assert_same
from tests.test_summarywriter_values import read_events

QUIET = {"print_every": 0}

# form -> (what to pass, given the base folder; the folder the run must be in)
FORMS: dict[str, Callable[[Path], tuple[dict[str, Any], Path]]] = {
    "str": lambda b: ({"log_dir": str(b / "run")}, b / "run"),
    "Path": lambda b: ({"log_dir": b / "run"}, b / "run"),
    "bytes": lambda b: ({"log_dir": os.fsencode(b / "run")}, b / "run"),
    "relative str": lambda b: ({"log_dir": "rel/run"}, b / "rel" / "run"),
    "relative Path": lambda b: ({"log_dir": Path("rel") / "run"}, b / "rel" / "run"),
    "relative bytes": lambda b: ({"log_dir": b"rel/run"}, b / "rel" / "run"),
    "dot": lambda b: ({"log_dir": "./run/./x/.."}, b / "run"),
    "tilde": lambda b: ({"log_dir": "~/run"}, b / "home" / "run"),
    "non-ASCII": lambda b: ({"log_dir": str(b / "运行 ü" / "実験 1")}, b / "运行 ü" / "実験 1"),
    "file URL": lambda b: ({"log_dir": (b / "run").as_uri()}, b / "run"),
    "file URL, non-ASCII": lambda b: ({"log_dir": (b / "运行 ü").as_uri()}, b / "运行 ü"),
    "file URL, localhost": lambda b: ({"log_dir": f"file://localhost{b}/run"}, b / "run"),
    "FILE URL": lambda b: ({"log_dir": f"FILE://{b}/run"}, b / "run"),
    "logdir= (tensorboardX)": lambda b: ({"logdir": str(b / "run")}, b / "run"),
    "logdir= and log_dir= alike": lambda b: (
        {"logdir": str(b / "run"), "log_dir": str(b / "run")},
        b / "run",
    ),
    "comment ignored with a folder": lambda b: (
        {"log_dir": str(b / "run"), "comment": "_lr0.1"},
        b / "run",
    ),
}


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working folder and ``~`` (HOME) for the test, both in tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("form", list(FORMS))
def test_every_local_folder_form_writes_the_run_where_it_says(base: Path, form: str) -> None:
    kwargs, folder = FORMS[form](base)
    w = SummaryWriter(**kwargs, config=QUIET)
    assert w.get_logdir() == str(folder)
    assert Path(w.get_logdir()).is_absolute()
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)  # made absolute at construction: the run stays where it was
    w.add_scalar("loss", 0.5, 1)
    w.add_scalars("pair", {"a": 1.0}, 1)
    w.close()
    assert [(s, v.simple_value) for s, _, v in read_events(folder)["loss"]] == [(1, 0.5)]
    assert read_events(folder / "pair_a")["pair"][0][2].simple_value == 1.0
    assert not list(elsewhere.iterdir())
    made = sorted(p.relative_to(base) for p in base.rglob("*tfevents*"))
    assert all(folder in (base / p).parents for p in made), made


@pytest.mark.parametrize("empty", [None, "", b""])
@pytest.mark.parametrize("comment", ["", "_lr0.1"])
def test_no_folder_is_torchs_default_with_the_comment(base: Path, empty: Any, comment: str) -> None:
    with SummaryWriter(empty, comment=comment, config=QUIET) as w:
        w.add_scalar("x", 1.0, 0)
        folder = Path(w.get_logdir())
    assert folder.parent == base / "runs"
    stamp, rest = folder.name.split("_", 1)
    assert len(stamp) == 5  # Dec03
    assert stamp[:3].isalpha()
    assert rest.endswith(f"_{socket.gethostname()}{comment}")
    assert read_events(folder)["x"][0][2].simple_value == 1.0


REMOTE = [
    "s3://bucket/run",
    "S3://Bucket/run",
    "gs://bucket/run",
    "hdfs://namenode:8020/user/run",
    "obs://bucket/run",
    "http://host/run",
    "memory://run",
    "file://otherhost/run",
    "s3://AKIAEXAMPLE:wJalrXUtnSECRET@bucket/run?X-Amz-Signature=0123abcd",
]


@pytest.mark.parametrize("url", REMOTE)
@pytest.mark.parametrize("front", ["SummaryWriter", "logdir=", "Monitor", "config"])
def test_a_remote_url_is_refused_naming_it_and_the_fix(base: Path, url: str, front: str) -> None:
    makers: dict[str, Callable[[], Any]] = {
        "SummaryWriter": lambda: SummaryWriter(url, config=QUIET),
        "logdir=": lambda: SummaryWriter(logdir=url, config=QUIET),
        "Monitor": lambda: mindwatch.Monitor(url, QUIET),
        "config": lambda: SummaryWriter(config={**QUIET, "logdir": url}),
    }
    error = (mindwatch.ConfigError, LogDirError) if front == "config" else LogDirError
    with pytest.raises(error) as caught:
        makers[front]()
    message = str(caught.value)
    if "SECRET" in url:  # the folder is named, its credentials are not
        assert "s3://***@bucket/run" in message
        assert "SECRET" not in message
        assert "0123abcd" not in message
    else:
        assert url in message
    if url.startswith("file:"):
        assert "otherhost" in message
        assert "file:///path/to/run" in message
    else:
        assert "local folder" in message
        assert "sync" in message
        assert "mount" in message
    if front == "config":
        assert "logdir" in message
    assert list(base.iterdir()) == [base / "home"]  # no folder named 's3:' or anything


def test_write_to_disk_false_writes_nothing_and_takes_every_call(tmp_path: Path) -> None:
    """tensorboardX's write_to_disk=False, side by side with tensorboardX's: every call
    is taken and nothing is written (tensorboardX itself still writes add_hparams' sub-run
    and add_embedding's files: ours writes none)."""
    from tensorboardX import SummaryWriter as X

    def case(w: Any) -> None:
        w.add_scalar("loss", 0.5, 1)
        w.add_scalar("loss", np.float32(0.25), 2, walltime=5.0)
        w.add_scalars("pair", {"a": 1.0, "b": 2.0}, 1)
        w.add_histogram("h", np.arange(10.0), 1)
        w.add_image("i", np.zeros((3, 4, 4)), 1)
        w.add_images("is", np.zeros((2, 3, 4, 4)), 1)
        w.add_text("t", "text", 1)
        w.add_pr_curve("pr", np.array([0, 1]), np.array([0.25, 0.75]), 1)
        w.add_hparams({"lr": 0.1}, {"acc": 0.5}, name="trial")
        w.add_embedding(np.zeros((3, 2)), metadata=["a", "b", "c"])
        w.add_custom_scalars_multilinechart(["loss"])
        w.flush()
        w.close()

    ours = SummaryWriter(tmp_path / "ours", write_to_disk=False, config=QUIET)
    ours.add_audio("a", np.zeros(100), 1)  # (tensorboardX's needs soundfile)
    case(ours)
    assert ours.write_to_disk is False
    assert ours.get_logdir() == str(tmp_path / "ours")
    assert not (tmp_path / "ours").exists()
    with pytest.raises(RuntimeError, match="write_to_disk=False"):
        _ = ours.monitor
    with pytest.raises(TypeError, match="'loss'"):  # the values are checked all the same
        ours.add_scalar("loss", "0.5", 3)
    with pytest.raises(LogDirError, match="s3://"):  # and the folder
        SummaryWriter("s3://bucket/run", write_to_disk=False)
    case(X(str(tmp_path / "x"), write_to_disk=False))
    assert not list((tmp_path / "x").glob("*tfevents*"))  # its own promise, for the run
    # positional, as tensorboardX's seventh argument
    assert SummaryWriter(tmp_path / "p", "", None, 10, None, "", False).write_to_disk is False
    assert not (tmp_path / "p").exists()


def test_add_hparams_name_is_tensorboardxs_run_name(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter as X

    hparams = {"lr": 0.01, "bsize": 4, "bn": True, "opt": "adam"}
    metrics = {"accuracy": 0.75, "loss": 0.5}
    with SummaryWriter(tmp_path / "ours", config=QUIET) as w:
        w.add_hparams(hparams, metrics, name="trial1")
        w.add_hparams(hparams, metrics, "trial2", 7)  # tensorboardX's positional order
        with pytest.raises(TypeError, match="run_name='a' and name='b'"):
            w.add_hparams(hparams, metrics, run_name="a", name="b")
        with pytest.raises(TypeError, match="twice"):
            w.add_hparams(hparams, metrics, "a", name="b")
    with X(str(tmp_path / "x")) as w:
        w.add_hparams(hparams, metrics, name="trial1")
        w.add_hparams(hparams, metrics, "trial2", 7)
    ours, theirs = tmp_path / "ours", tmp_path / "x"
    assert {p.name for p in ours.iterdir() if p.is_dir()} == {"trial1", "trial2"}
    assert assert_same(ours / "trial1", theirs / "trial1") >= set(metrics)
    for tag in metrics:  # the step reaches the metrics (tensorboardX: only there)
        mine = read_events(ours / "trial2")[tag]
        assert [(s, v) for s, _, v in mine] == [
            (s, v) for s, _, v in read_events(theirs / "trial2")[tag]
        ]
        assert [s for s, _, _ in mine] == [7]


def test_filename_suffix_ends_every_event_file_as_in_torch_and_tensorboardx(
    tmp_path: Path,
) -> None:
    from tensorboardX import SummaryWriter as X
    from torch.utils.tensorboard import SummaryWriter as Torch

    def case(w: Any) -> None:
        w.add_scalar("loss", 0.5, 1)
        w.add_scalars("pair", {"a": 1.0, "b": 2.0}, 1)
        w.add_hparams({"lr": 0.1}, {"m": 1.0}, run_name="hp")

    for name, make in [
        ("ours", lambda p: SummaryWriter(p, filename_suffix=".rank0", config=QUIET)),
        ("ours, positional", lambda p: SummaryWriter(p, "", None, 10, None, ".rank0")),
        ("torch", lambda p: Torch(p, filename_suffix=".rank0")),
    ]:
        with make(str(tmp_path / name)) as w:
            case(w)
        files = list((tmp_path / name).rglob("*tfevents*"))
        folders = {f.parent.name for f in files}
        assert folders == {name, "pair_a", "pair_b", "hp"}, name
        # torch's add_hparams makes its sub-run's writer without the suffix; ours has it
        suffixed = [f for f in files if name != "torch" or f.parent.name != "hp"]
        assert len(suffixed) >= 3
        assert all(f.name.endswith(".rank0") for f in suffixed), files
    with X(str(tmp_path / "x"), filename_suffix=".rank0") as w:
        w.add_scalar("loss", 0.5, 1)
    assert [f.name.endswith(".rank0") for f in (tmp_path / "x").glob("*tfevents*")] == [True]
    assert read_events(tmp_path / "ours")["loss"][0][2].simple_value == 0.5
    config = mindwatch.MonitorConfig.from_dict({"filename_suffix": ".a"})
    assert config.filename_suffix == ".a"
    with pytest.raises(mindwatch.ConfigError, match="filename_suffix"):
        SummaryWriter(tmp_path / "bad", filename_suffix="/up")


def test_log_dir_and_logdir_that_differ_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="pass one"):
        SummaryWriter(tmp_path / "a", logdir=tmp_path / "b", config=QUIET)
    assert not list(tmp_path.iterdir())
