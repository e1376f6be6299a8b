"""Misuse of ``SummaryRecord`` and ``SummaryCollector`` raises what MindSpore raises.

MindSpore's own classes are the specification: every case runs on MindSpore 2.10's
class and on mindwatch's in the same test, and the two must raise the same exception
type with the same message (mindwatch may add what was wrong and the fix after
MindSpore's message, which stays the start). The cases cover every argument MindSpore
validates, each class of bad type and value, the boundaries, and the order in which
MindSpore checks (two bad arguments: the one it checks first is reported). What
mindwatch takes beyond MindSpore is pinned separately (``SUPERSET``), with what it does
with it. MindSpore's own tests of these behaviours (``tests/ut/python/train/summary/``
in mindspore-ai/mindspore_test) were read as the specification, not copied.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn
from mindspore.train import Model
from mindspore.train.anf_ir_pb2 import GraphProto
from mindspore.train.lineage_pb2 import EvaluationLineage, TrainLineage, UserDefinedInfo

from mindwatch.mindspore import SummaryCollector, SummaryRecord
from mindwatch.mindspore.demo import make_dataset
from tests.tbread import accumulator, scalars

SCRIPTS = Path(__file__).parent / "scripts"
Outcome = tuple[Optional[type], Optional[str]]


def outcome(make: Callable[[], Any]) -> Outcome:
    """What ``make()`` raised (type, message), or (None, None); whatever it made is
    closed (MindSpore's SummaryRecord holds a writer process and a one-instance count)."""
    try:
        made = make()
    except Exception as exc:
        return type(exc), str(exc)
    finally:
        ms.SummaryRecord.count = 0  # MindSpore leaves it raised on some errors
    close = getattr(made, "close", None)
    if callable(close):
        close()
    elif isinstance(made, SummaryCollector):
        made.monitor.close()
    ms.SummaryRecord.count = 0
    return None, None


def assert_same(ours: Outcome, theirs: Outcome) -> None:
    assert ours[0] is theirs[0], (ours, theirs)
    if theirs[1] is not None:
        assert ours[1] is not None
        # MindSpore's message, or MindSpore's message then mindwatch's hint.
        assert ours[1] == theirs[1] or ours[1].startswith(theirs[1] + " "), (ours, theirs)


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="mindwatch")


# ------------------------------------------------------------ SummaryRecord(...)

LONG = "/tmp/" + "x" * 1100  # MindSpore's limit is 1,024 characters, resolved

RECORD_ARGS: dict[str, dict[str, Any]] = {
    # log_dir: every type class and value MindSpore rejects
    "log_dir empty": {"log_dir": ""},
    "log_dir blank": {"log_dir": "   "},
    "log_dir None": {"log_dir": None},
    "log_dir int": {"log_dir": 32},
    "log_dir bytes": {"log_dir": b"/tmp/mw-bytes"},
    "log_dir NUL": {"log_dir": "/tmp/a\0b"},
    "log_dir too long": {"log_dir": LONG},
    "log_dir is a file": {"log_dir": "FILE"},
    "log_dir under a file": {"log_dir": "FILE/sub"},
    # file_prefix / file_suffix: type, then MindSpore's name rule
    "prefix int": {"file_prefix": 1},
    "suffix None": {"file_suffix": None},
    "prefix empty": {"file_prefix": ""},
    "prefix slash": {"file_prefix": "a/b"},
    "prefix space": {"file_prefix": "x y"},
    "suffix empty": {"file_suffix": ""},
    "suffix leading dot": {"file_suffix": ".ok"},
    "prefix digits and dots": {"file_prefix": "1ab.c"},
    # max_file_size: int or None (a bool counts as an int, as in MindSpore)
    "max_file_size str": {"max_file_size": "big"},
    "max_file_size float": {"max_file_size": 1.5},
    "max_file_size True": {"max_file_size": True},
    "max_file_size -1": {"max_file_size": -1},
    "max_file_size 0": {"max_file_size": 0},
    "max_file_size 100": {"max_file_size": 100},
    # raise_exception: a bool
    "raise_exception str": {"raise_exception": "yes"},
    "raise_exception None": {"raise_exception": None},
    "raise_exception 1": {"raise_exception": 1},
    # export_options: dict of str -> str/None, known keys and formats
    "export_options int": {"export_options": 1},
    "export_options list": {"export_options": []},
    "export_options int key": {"export_options": {1: "npy"}},
    "export_options int format": {"export_options": {"tensor_format": 1}},
    "export_options csv": {"export_options": {"tensor_format": "csv"}},
    "export_options unknown key": {"export_options": {"image_format": "npy"}},
    "export_options None format": {"export_options": {"tensor_format": None}},
    "export_options empty": {"export_options": {}},
    # unchecked by MindSpore at construction
    "num_process str": {"num_process": "x"},
    "network str": {"network": "x"},
    # MindSpore's order: the first bad argument it checks is the one reported
    "order log_dir before prefix": {"log_dir": "", "file_prefix": 1},
    "order max_file_size before prefix": {"file_prefix": 1, "max_file_size": "x"},
    "order prefix type before name rule": {"file_prefix": "", "file_suffix": 2},
    "order raise_exception before export": {"raise_exception": 1, "export_options": 1},
}


def _record_call(cls: Any, spec: dict[str, Any], folder: Path, file: Path) -> Callable[[], Any]:
    kwargs = dict(spec)
    log_dir = kwargs.pop("log_dir", str(folder))
    if isinstance(log_dir, str) and log_dir.startswith("FILE"):
        log_dir = log_dir.replace("FILE", str(file), 1)
    return lambda: cls(log_dir, **kwargs)


@pytest.mark.parametrize("case", list(RECORD_ARGS))
def test_summary_record_arguments(tmp_path: Path, case: str) -> None:
    file = tmp_path / "a_file.txt"
    file.write_text("not a folder")
    spec = RECORD_ARGS[case]
    theirs = outcome(_record_call(ms.SummaryRecord, spec, tmp_path / "theirs", file))
    ours = outcome(_record_call(SummaryRecord, spec, tmp_path / "ours", file))
    assert_same(ours, theirs)


def test_the_checked_folder_is_created_before_a_later_argument_fails(tmp_path: Path) -> None:
    for cls, folder in (
        (ms.SummaryRecord, tmp_path / "theirs"),
        (SummaryRecord, tmp_path / "ours"),
    ):
        assert outcome(lambda: cls(str(folder), raise_exception="no"))[0] is TypeError  # noqa: B023
        assert folder.is_dir()


def test_no_permission_raises_mindsporess_type_error(tmp_path: Path) -> None:
    target = "/sys/mindwatch-summary-test"  # read-only even for root
    try:
        os.makedirs(target)
    except PermissionError:
        pass
    else:  # pragma: no cover - a system where /sys is writable
        os.rmdir(target)
        pytest.skip("/sys is writable here")
    theirs = outcome(lambda: ms.SummaryRecord(target))
    ours = outcome(lambda: SummaryRecord(target))
    assert_same(ours, theirs)
    assert theirs[0] is TypeError
    assert target in str(ours[1])  # names the folder
    assert_same(
        outcome(lambda: SummaryCollector(target)), outcome(lambda: ms.SummaryCollector(target))
    )


def test_messages_name_the_value_and_the_fix(tmp_path: Path) -> None:
    """Where MindSpore's message does not say what was wrong, mindwatch adds it."""
    _, message = outcome(lambda: SummaryRecord(32))
    assert "32" in str(message)
    assert "'./summary_dir'" in str(message)
    with SummaryRecord(tmp_path) as record:
        for call, words in (
            (lambda: record.add_value("scalar", "loss", Tensor(np.ones(3))), ("'loss'", "(3,)")),
            (lambda: record.add_value("scalar", "", Tensor(1.0)), ("empty",)),
            (lambda: record.add_value("image", "x", Tensor(np.ones((3, 4)))), ("'x'", "NCHW")),
            (lambda: record.add_value("histogram", "h", Tensor(1.0)), ("'h'", "'scalar'")),
            (lambda: record.add_value("scalar", "s", "1.0"), ("'s'", "numpy")),
        ):
            _, message = outcome(call)
            assert all(w in str(message) for w in words), message


# ------------------------------------------------------------ SummaryRecord's methods

T = Tensor
IMAGE = np.ones((2, 3, 4, 4), np.float32)

RECORD_CALLS: dict[str, Callable[[Any], Any]] = {
    # add_value: plugin
    "plugin unknown": lambda r: r.add_value("nonsense", "x", T([1.0])),
    "plugin None": lambda r: r.add_value(None, "x", T([1.0])),
    "plugin LANDSCAPE (docs' spelling)": lambda r: r.add_value("LANDSCAPE", "x", T([1.0])),
    "plugin explainer": lambda r: r.add_value("explainer", "x", T([1.0])),
    # add_value: name
    "name int": lambda r: r.add_value("scalar", 3, T(1.0)),
    "name empty": lambda r: r.add_value("scalar", "", T(1.0)),
    "name None": lambda r: r.add_value("tensor", None, T([1.0])),
    "name checked before value": lambda r: r.add_value("scalar", 3, None),
    # add_value: value type
    "value None": lambda r: r.add_value("scalar", "x", None),
    "value str": lambda r: r.add_value("scalar", "x", "1.0"),
    "value list": lambda r: r.add_value("histogram", "x", [1.0, 2.0]),
    "value dict": lambda r: r.add_value("tensor", "x", {"a": 1}),
    # add_value: value shape, per plugin, with the boundaries
    "scalar 0-d": lambda r: r.add_value("scalar", "x", T(1.0)),
    "scalar (1,)": lambda r: r.add_value("scalar", "x", T([1.0])),
    "scalar (1,1,1)": lambda r: r.add_value("scalar", "x", T(np.ones((1, 1, 1)))),
    "scalar int32": lambda r: r.add_value("scalar", "x", T(np.int32(3))),
    "scalar bool": lambda r: r.add_value("scalar", "x", T(np.bool_(True))),
    "scalar (2,)": lambda r: r.add_value("scalar", "x", T([1.0, 2.0])),
    "scalar (2,3)": lambda r: r.add_value("scalar", "x", T(np.ones((2, 3)))),
    "scalar empty": lambda r: r.add_value("scalar", "x", T(np.ones((0,)))),
    "image NCHW": lambda r: r.add_value("image", "x", T(IMAGE)),
    "image 1-d": lambda r: r.add_value("image", "x", T([1.0, 2.0])),
    "image 3-d": lambda r: r.add_value("image", "x", T(np.ones((3, 4, 4)))),
    "image 5-d": lambda r: r.add_value("image", "x", T(np.ones((1, 1, 3, 4, 4)))),
    "image 2 channels": lambda r: r.add_value("image", "x", T(np.ones((1, 2, 4, 4)))),
    "image empty batch": lambda r: r.add_value("image", "x", T(np.ones((0, 3, 4, 4)))),
    "histogram 0-d": lambda r: r.add_value("histogram", "x", T(1.0)),
    "histogram (1,)": lambda r: r.add_value("histogram", "x", T([1.0])),
    "histogram empty": lambda r: r.add_value("histogram", "x", T(np.ones((0,)))),
    "histogram bool": lambda r: r.add_value("histogram", "x", T(np.array([True, False]))),
    "tensor 0-d": lambda r: r.add_value("tensor", "x", T(1.0)),
    "tensor empty": lambda r: r.add_value("tensor", "x", T(np.ones((0,)))),
    "tensor int8": lambda r: r.add_value("tensor", "x", T(np.ones((2, 3), np.int8))),
    # add_value: the plugins mindwatch does not record still check their value
    "train_lineage right": lambda r: r.add_value("train_lineage", "x", TrainLineage()),
    "train_lineage wrong": lambda r: r.add_value("train_lineage", "x", T([1.0])),
    "eval_lineage wrong": lambda r: r.add_value("eval_lineage", "x", TrainLineage()),
    "eval_lineage right": lambda r: r.add_value("eval_lineage", "x", EvaluationLineage()),
    "custom_lineage_data wrong": lambda r: r.add_value("custom_lineage_data", "x", {"a": 1}),
    "custom_lineage_data right": lambda r: r.add_value(
        "custom_lineage_data", "x", UserDefinedInfo()
    ),
    "dataset_graph wrong": lambda r: r.add_value("dataset_graph", "x", 1),
    "landscape wrong": lambda r: r.add_value("landscape", "x", 1),
    "graph int": lambda r: r.add_value("graph", "x", 1),
    "graph empty bytes": lambda r: r.add_value("graph", "x", b""),
    # set_mode
    "set_mode train": lambda r: r.set_mode("train"),
    "set_mode eval": lambda r: r.set_mode("eval"),
    "set_mode test": lambda r: r.set_mode("test"),
    "set_mode TRAIN": lambda r: r.set_mode("TRAIN"),
    "set_mode None": lambda r: r.set_mode(None),
    # record: step and train_network
    "record 1": lambda r: r.record(1),
    "record 0": lambda r: r.record(0),
    "record -1": lambda r: r.record(-1),
    "record str": lambda r: r.record("1"),
    "record float": lambda r: r.record(1.0),
    "record False": lambda r: r.record(False),
    "record None": lambda r: r.record(None),
    "record tuple": lambda r: r.record((1, 3)),
    "record list": lambda r: r.record([2, 3]),
    "record train_network str": lambda r: r.record(1, train_network="x"),
    "record train_network Cell": lambda r: r.record(1, train_network=nn.Dense(2, 2)),
    "record step checked first": lambda r: r.record("x", train_network="x"),
    "flush": lambda r: r.flush(),
}


@pytest.mark.parametrize("case", list(RECORD_CALLS))
def test_summary_record_calls(tmp_path: Path, case: str) -> None:
    call = RECORD_CALLS[case]

    def run(cls: Any, folder: Path) -> Outcome:
        record = cls(str(folder))
        try:
            return outcome(lambda: call(record))
        finally:
            record.close()
            ms.SummaryRecord.count = 0

    assert_same(run(SummaryRecord, tmp_path / "ours"), run(ms.SummaryRecord, tmp_path / "theirs"))


def _after_close(cls: Any, folder: Path) -> list[Any]:
    record = cls(str(folder))
    record.close()
    seen: list[Any] = [record.record(1)]  # False: nothing written, nothing raised
    for call in (
        record.flush,
        record.close,  # twice
        lambda: record.add_value("scalar", "x", Tensor(1.0)),
        lambda: record.set_mode("eval"),
        record.__enter__,
    ):
        seen.append(outcome(call))
    ms.SummaryRecord.count = 0
    return seen


def test_a_closed_record_behaves_as_mindsporess(tmp_path: Path) -> None:
    ours = _after_close(SummaryRecord, tmp_path / "ours")
    theirs = _after_close(ms.SummaryRecord, tmp_path / "theirs")
    assert ours[0] is theirs[0] is False
    for mine, its in zip(ours[1:], theirs[1:]):
        assert_same(mine, its)
    assert theirs[-1][0] is ValueError  # `with` on a closed record


def test_the_context_manager_closes_and_returns_the_record(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path) as record:
        assert isinstance(record, SummaryRecord)
        record.add_value("scalar", "x", Tensor(2.0))
        record.record(3)
    assert record.record(4) is False
    assert scalars(tmp_path)["x"] == [(3, 2.0)]
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "finished"


def test_an_image_mindspore_cannot_draw_is_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")
    with SummaryRecord(tmp_path) as record:
        record.add_value("image", "two_channels", Tensor(np.ones((1, 2, 4, 4), np.float32)))
        record.add_value("image", "empty", Tensor(np.ones((0, 3, 4, 4), np.float32)))
        record.add_value("image", "good", Tensor(IMAGE))
        record.add_value("scalar", "loss", Tensor(0.5))
        record.record(1)
    acc = accumulator(tmp_path)
    assert acc.Tags()["images"] == ["good"]  # the rest of the step is written
    assert scalars(tmp_path)["loss"] == [(1, 0.5)]
    said = [r.getMessage() for r in caplog.records if "not written" in r.getMessage()]
    assert len(said) == 2
    assert any("'two_channels'" in s and "(1, 2, 4, 4)" in s for s in said)


def test_a_graph_as_mindspore_takes_it_reaches_the_graphs_tab(tmp_path: Path) -> None:
    """MindSpore 2.10's graph plugin takes the bytes ``get_func_graph_proto`` returns."""
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = nn.Dense(4, 3)
        net(Tensor(np.ones((2, 4), np.float32)))
        proto = net.get_func_graph_proto()
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert isinstance(proto, bytes)
    theirs = outcome(lambda: _add_graph(ms.SummaryRecord, tmp_path / "theirs", proto))
    assert theirs == (None, None)
    _add_graph(SummaryRecord, tmp_path / "ours", proto)
    ops_seen = {node.op for node in accumulator(tmp_path / "ours").Graph().node}
    assert any("MatMul" in op for op in ops_seen), ops_seen


def _add_graph(cls: Any, folder: Path, value: Any) -> None:
    with cls(str(folder)) as record:
        record.add_value("graph", "train_network/auto", value)
        record.record(1)


# ------------------------------------------------------------ SummaryCollector(...)

INTERVALS = [[1, 2, 3]]


def _landscape(**landscape: Any) -> dict[str, Any]:
    return {"collect_specified_data": {"collect_landscape": landscape}}


COLLECTOR_ARGS: dict[str, dict[str, Any]] = {
    # summary_dir
    "summary_dir int": {"summary_dir": 1234},
    "summary_dir None": {"summary_dir": None},
    "summary_dir True": {"summary_dir": True},
    "summary_dir empty": {"summary_dir": ""},
    "summary_dir is a file": {"summary_dir": "FILE"},
    # collect_freq and collect_tensor_freq: ints > 0
    "collect_freq None": {"collect_freq": None},
    "collect_freq 0": {"collect_freq": 0},
    "collect_freq -1": {"collect_freq": -1},
    "collect_freq 0.01": {"collect_freq": 0.01},
    "collect_freq 2.0": {"collect_freq": 2.0},
    "collect_freq True": {"collect_freq": True},
    "collect_freq numpy int": {"collect_freq": np.int64(3)},
    "collect_freq 1": {"collect_freq": 1},
    "collect_tensor_freq 0": {"collect_tensor_freq": 0},
    "collect_tensor_freq 1.5": {"collect_tensor_freq": 1.5},
    "collect_tensor_freq False": {"collect_tensor_freq": False},
    "collect_tensor_freq 1": {"collect_tensor_freq": 1},
    # max_file_size: int > 0 or None
    "max_file_size 0": {"max_file_size": 0},
    "max_file_size -5": {"max_file_size": -5},
    "max_file_size str": {"max_file_size": "2GB"},
    "max_file_size True": {"max_file_size": True},
    "max_file_size 100": {"max_file_size": 100},
    # keep_default_action: a bool
    "keep_default_action None": {"keep_default_action": None},
    "keep_default_action 1": {"keep_default_action": 1},
    "keep_default_action str": {"keep_default_action": "x"},
    "keep_default_action False": {"keep_default_action": False},
    # collect_specified_data: dict of known str keys
    "specified int": {"collect_specified_data": 123},
    "specified str": {"collect_specified_data": "x"},
    "specified int key": {"collect_specified_data": {123: 123}},
    "specified None key": {"collect_specified_data": {None: True}},
    "specified unknown key": {"collect_specified_data": {"unexpected_key": True}},
    "specified bool key None": {"collect_specified_data": {"collect_metric": None}},
    "specified bool key int": {"collect_specified_data": {"collect_graph": 123}},
    "specified bool key 1": {"collect_specified_data": {"collect_input_data": 1}},
    "specified bool key str": {"collect_specified_data": {"collect_dataset_graph": "yes"}},
    "histogram_regular int": {"collect_specified_data": {"histogram_regular": 123}},
    "histogram_regular bad regex": {"collect_specified_data": {"histogram_regular": "*"}},
    "histogram_regular ok": {"collect_specified_data": {"histogram_regular": "conv"}},
    "histogram_regular None": {"collect_specified_data": {"histogram_regular": None}},
    # collect_landscape: checked in full, though mindwatch records no landscape
    "landscape int": {"collect_specified_data": {"collect_landscape": 123}},
    "landscape list": {"collect_specified_data": {"collect_landscape": []}},
    "landscape empty": {"collect_specified_data": {"collect_landscape": {}}},
    "landscape None": {"collect_specified_data": {"collect_landscape": None}},
    "landscape unknown key": _landscape(unexpected_key="value"),
    "landscape no intervals": _landscape(landscape_size=40),
    "landscape_size None": _landscape(landscape_size=None),
    "landscape_size True": _landscape(landscape_size=True, intervals=INTERVALS),
    "landscape_size 2": _landscape(landscape_size=2, intervals=INTERVALS),
    "landscape_size 3": _landscape(landscape_size=3, intervals=INTERVALS),
    "landscape_size 256": _landscape(landscape_size=256, intervals=INTERVALS),
    "landscape_size 257": _landscape(landscape_size=257, intervals=INTERVALS),
    "unit int": _landscape(unit=123),
    "unit unknown": _landscape(unit="x", intervals=INTERVALS),
    "unit epoch": _landscape(unit="epoch", intervals=INTERVALS),
    "num_samples None": _landscape(num_samples=None),
    "num_samples float": _landscape(num_samples=1.5),
    "create_landscape int": _landscape(create_landscape=123),
    "create_landscape unknown key": _landscape(create_landscape={"x": True}, intervals=INTERVALS),
    "create_landscape train None": _landscape(create_landscape={"train": None}),
    "create_landscape result int": _landscape(create_landscape={"result": 123}),
    "intervals None": _landscape(intervals=None),
    "intervals tuple": _landscape(intervals=((1, 2, 3),)),
    "intervals flat": _landscape(intervals=[1]),
    "intervals short": _landscape(intervals=[[1, 2]]),
    "intervals str step": _landscape(intervals=[[1, 2, "3"]]),
    "intervals ok": _landscape(intervals=INTERVALS),
    "landscape all keys": _landscape(
        landscape_size=4,
        unit="epoch",
        num_samples=6,
        create_landscape={"train": True, "result": False},
        intervals=INTERVALS,
    ),
    # custom_lineage_data: dict of str -> int/str/float
    "lineage int": {"custom_lineage_data": 123},
    "lineage dict value": {"custom_lineage_data": {"custom": {}}},
    "lineage None value": {"custom_lineage_data": {"custom": None}},
    "lineage int key": {"custom_lineage_data": {123: "custom"}},
    "lineage bool value": {"custom_lineage_data": {"k": True}},
    "lineage list value": {"custom_lineage_data": {"k": [1]}},
    "lineage ok": {"custom_lineage_data": {"a": 1, "b": "x", "c": 0.5}},
    # export_options
    "export_options int": {"export_options": 123},
    "export_options npz": {"export_options": {"tensor_format": "npz"}},
    "export_options unknown key": {"export_options": {"unexpected_key": "value"}},
    # MindSpore's order
    "order summary_dir before collect_freq": {"summary_dir": "", "collect_freq": 0},
    "order collect_tensor_freq before max_file_size": {
        "max_file_size": "x",
        "collect_tensor_freq": "x",
    },
    "order export before keep_default_action": {"keep_default_action": 1, "export_options": 1},
    "order keep_default_action before specified": {
        "collect_specified_data": 1,
        "keep_default_action": 1,
    },
    "order specified before lineage": {"collect_specified_data": 1, "custom_lineage_data": 1},
    "order landscape before lineage": {
        **_landscape(unit=1),
        "custom_lineage_data": 1,
    },
}


def _collector_call(cls: Any, spec: dict[str, Any], folder: Path, file: Path) -> Any:
    kwargs = dict(spec)
    summary_dir = kwargs.pop("summary_dir", str(folder))
    if summary_dir == "FILE":
        summary_dir = str(file)
    return lambda: cls(summary_dir, **kwargs)


@pytest.mark.parametrize("case", list(COLLECTOR_ARGS))
def test_summary_collector_arguments(tmp_path: Path, case: str) -> None:
    file = tmp_path / "a_file.txt"
    file.write_text("not a folder")
    spec = COLLECTOR_ARGS[case]
    theirs = outcome(_collector_call(ms.SummaryCollector, spec, tmp_path / "theirs", file))
    ours = outcome(_collector_call(SummaryCollector, spec, tmp_path / "ours", file))
    assert_same(ours, theirs)


@pytest.mark.parametrize(
    ("specified", "keep"),
    [
        (None, True),
        (None, False),
        ({}, True),
        ({}, False),
        ({"collect_metric": False}, True),
        ({"collect_metric": True}, False),
        ({"histogram_regular": "fc", "collect_landscape": None}, True),
    ],
)
def test_the_processed_specified_data_is_mindsporess(
    tmp_path: Path, specified: Any, keep: bool
) -> None:
    theirs = ms.SummaryCollector(str(tmp_path / "t"), collect_specified_data=specified,
                                 keep_default_action=keep)  # fmt: skip
    ours = SummaryCollector(
        tmp_path / "o", collect_specified_data=specified, keep_default_action=keep
    )
    try:
        assert ours._collect_specified_data == theirs._collect_specified_data
    finally:
        ours.monitor.close()


def test_histogram_regular_chooses_the_parameters_mindspore_chooses(tmp_path: Path) -> None:
    """``re.match``, not ``re.search``; None: the first five. MindSpore's choice is read
    from the files its own SummaryCollector wrote (in a process of its own)."""
    patterns = ["fc", None, "(?i)CONV|head", ".*bias", "fc2?\\.weight"]
    out = tmp_path / "theirs.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "histogram_regular_job.py"), str(tmp_path), str(out)]
        + [json.dumps(p) for p in patterns],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GLOG_v": "3"},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = {json.dumps(p): names for p, names in json.loads(out.read_text())}
    assert theirs[json.dumps("fc")] == ["fc.bias", "fc.weight", "fc2.bias", "fc2.weight"]
    sys.path.insert(0, str(SCRIPTS))
    try:
        from histogram_net import HistogramNet
    finally:
        sys.path.remove(str(SCRIPTS))
    for i, pattern in enumerate(patterns):
        folder = tmp_path / f"ours{i}"
        ms.set_seed(0)
        net = HistogramNet()
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
        model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
        collector = SummaryCollector(
            folder,
            collect_freq=1,
            collect_specified_data={"histogram_regular": pattern, "collect_graph": False},
        )
        model.train(1, make_dataset(64, 32, seed=0), callbacks=[collector], dataset_sink_mode=False)
        ours = sorted(
            t.removeprefix("parameters/") for t in accumulator(folder).Tags()["histograms"]
        )
        assert ours == theirs[json.dumps(pattern)], pattern


# ------------------------------------------------------------ one collector a callback list


def test_two_collectors_in_one_callback_list_raise_mindsporess_error(tmp_path: Path) -> None:
    from mindspore.train.callback._callback import InternalCallbackParam

    def check(cls: Any, folder: Path, others: list[Any]) -> Outcome:
        params = InternalCallbackParam()
        params.list_callback = others
        collector = cls(str(folder))
        try:
            return outcome(lambda: collector._check_callbacks(params))
        finally:
            if isinstance(collector, SummaryCollector):
                collector.monitor.close()

    theirs_pair = [ms.SummaryCollector(str(tmp_path / f"t{i}")) for i in range(2)]
    ours_pair = [SummaryCollector(tmp_path / f"o{i}") for i in range(2)]
    try:
        theirs = check(ms.SummaryCollector, tmp_path / "t", theirs_pair)
        assert theirs[0] is ValueError
        assert_same(check(SummaryCollector, tmp_path / "o", ours_pair), theirs)
        # By class name, as MindSpore counts: its collector and ours count together.
        mixed = [theirs_pair[0], ours_pair[0]]
        assert_same(check(SummaryCollector, tmp_path / "m", mixed), theirs)
        assert check(SummaryCollector, tmp_path / "one", ours_pair[:1]) == (None, None)
    finally:
        for collector in ours_pair:
            collector.monitor.close()


def test_two_collectors_fail_training_before_its_first_step(tmp_path: Path) -> None:
    net = nn.Dense(64, 10)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    steps: list[int] = []

    class Steps(ms.train.Callback):  # type: ignore[misc]
        def on_train_step_end(self, run_context: Any) -> None:
            steps.append(int(run_context.original_args().cur_step_num))

    pair = [SummaryCollector(tmp_path / "a"), SummaryCollector(tmp_path / "b")]
    with pytest.raises(ValueError, match="more than one SummaryCollector instance"):
        model.train(1, make_dataset(64, 32, seed=0), callbacks=[*pair, Steps()],
                    dataset_sink_mode=False)  # fmt: skip
    assert steps == []
    for collector in pair:
        collector.monitor.close()


# ------------------------------------------------------------ what mindwatch takes beyond


SUPERSET: dict[str, tuple[Callable[[Any, Path], Any], Callable[[Path], None]]] = {}


def superset(name: str, check: Callable[[Path], None]) -> Callable[..., Any]:
    def register(call: Callable[[Any, Path], Any]) -> Callable[[Any, Path], Any]:
        SUPERSET[name] = (call, check)
        return call

    return register


def _scalar_is(tag: str, points: list[tuple[int, float]]) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        assert scalars(folder)[tag] == points

    return check


def _run_json(folder: Path) -> None:
    assert json.loads((folder / "run.json").read_text())["status"] == "finished"


@superset("log_dir pathlib.Path", _run_json)
def _path_log_dir(cls: Any, folder: Path) -> Any:
    with cls(folder) as record:
        record.record(1)


@superset("value a Python float", _scalar_is("x", [(1, 0.25)]))
def _float_value(cls: Any, folder: Path) -> Any:
    with cls(str(folder)) as record:
        record.add_value("scalar", "x", 0.25)
        record.record(1)


@superset("value a numpy number", _scalar_is("x", [(1, 0.5)]))
def _numpy_value(cls: Any, folder: Path) -> Any:
    with cls(str(folder)) as record:
        record.add_value("scalar", "x", np.float32(0.5))
        record.record(1)


@superset("step a numpy integer", _scalar_is("x", [(7, 1.0)]))
def _numpy_step(cls: Any, folder: Path) -> Any:
    with cls(str(folder)) as record:
        record.add_value("scalar", "x", Tensor(np.float32(1.0)))
        record.record(np.int64(7))


def _has_graph(folder: Path) -> None:
    assert accumulator(folder).Tags()["graph"]


@superset("graph a GraphProto message (MindSpore's docstring)", _has_graph)
def _graph_message(cls: Any, folder: Path) -> Any:
    from mindspore.train.anf_ir_pb2 import ModelProto

    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = nn.Dense(4, 3)
        net(Tensor(np.ones((2, 4), np.float32)))
        model = ModelProto()
        model.ParseFromString(net.get_func_graph_proto())
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    graph: GraphProto = model.graph
    _add_graph(cls, folder, graph)


def _histograms_of_parameters(folder: Path) -> None:
    assert accumulator(folder).Tags()["histograms"]


@superset("collector collect_specified_data the seeds' list", _histograms_of_parameters)
def _seeds_list(cls: Any, folder: Path) -> Any:
    net = nn.Dense(64, 10)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    collector = cls(str(folder), collect_freq=1, collect_specified_data=["parameters"])
    model.train(1, make_dataset(64, 32, seed=0), callbacks=[collector], dataset_sink_mode=False)


@superset("collector summary_dir pathlib.Path", _run_json)
def _path_summary_dir(cls: Any, folder: Path) -> Any:
    net = nn.Dense(64, 10)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    model = Model(net, loss, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    model.train(1, make_dataset(64, 32, seed=0), callbacks=[cls(folder)], dataset_sink_mode=False)


@pytest.mark.parametrize("case", list(SUPERSET))
def test_what_mindwatch_takes_beyond_mindspore(tmp_path: Path, case: str) -> None:
    """MindSpore raises a TypeError; mindwatch records it (docs: 'On purpose')."""
    call, check = SUPERSET[case]
    collector = case.startswith("collector")
    theirs = outcome(lambda: call(ms.SummaryCollector if collector else ms.SummaryRecord,
                                  tmp_path / "theirs"))  # fmt: skip
    assert theirs[0] is TypeError, theirs
    call(SummaryCollector if collector else SummaryRecord, tmp_path / "ours")
    check(tmp_path / "ours")


# ------------------------------------------------------------ values MindSpore takes


def test_a_small_max_file_size_rotates_at_1024_bytes_and_keeps_every_point(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """MindSpore takes any size and stops writing there; mindwatch drops nothing."""
    caplog.set_level(logging.WARNING, logger="mindwatch")
    with SummaryRecord(tmp_path, max_file_size=100) as record:
        for step in range(1, 301):
            record.add_value("scalar", "x", float(step))
            record.record(step)
    assert [s for s, _ in scalars(tmp_path)["x"]] == list(range(1, 301))
    files = sorted(tmp_path.glob("events.out.tfevents.*"))
    assert len(files) > 10  # rotated at 1,024 bytes, not at 100 nor never
    # (the first file also holds the run's large first records: its hparams and config)
    assert all(1024 <= f.stat().st_size < 1024 + 100 for f in files[1:-1])
    assert any("max_file_size 100" in r.getMessage() for r in caplog.records)


def test_a_negative_max_file_size_means_no_limit_for_the_record(tmp_path: Path) -> None:
    with SummaryRecord(tmp_path, max_file_size=-1) as record:
        assert record.max_file_size is None
        for step in range(1, 101):
            record.add_value("scalar", "x", float(step))
            record.record(step)
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1


def test_a_landscape_keeps_the_warning_that_names_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")
    collector = SummaryCollector(tmp_path, **_landscape(intervals=INTERVALS))
    collector.monitor.close()
    said = [r.getMessage() for r in caplog.records if "collect_landscape" in r.getMessage()]
    assert len(said) == 1
    assert "not recorded" in said[0]
    assert not (tmp_path / "ckpt_dir").exists()  # MindSpore's landscape checkpoints: none


def test_histograms_count_every_finite_element_of_any_shape(tmp_path: Path) -> None:
    """MindSpore's histogram tests' cases, read back with TensorBoard's reader: its
    histogram has no NaN / inf counts, so non-finite elements are left out of ``num``."""
    rng = np.random.default_rng(10)
    with_nan = np.ones((100, 100))
    with_nan[0, :3] = [np.nan, np.inf, -np.inf]
    cases = {
        "int_2x3": (np.array([[1, 2, 3], [4, 5, 6]]), 6),
        "same_value": (np.ones((100, 100)), 10_000),
        "four_dims": (rng.normal(size=(10, 10, 10, 10)), 10_000),
        "nan_inf": (with_nan, 9_997),
        "all_nan_inf": (np.array([np.nan, np.nan, np.nan, np.inf, -np.inf]), 0),
    }
    with SummaryRecord(tmp_path) as record:
        for step in range(1, 6):
            record.add_value("histogram", "steps", Tensor(rng.normal(size=50)))
            if step == 1:
                for name, (values, _) in cases.items():
                    record.add_value("histogram", name, Tensor(values))
            record.record(step)
    acc = accumulator(tmp_path)
    assert [(h.step, h.histogram_value.num) for h in acc.Histograms("steps")] == [
        (s, 50) for s in range(1, 6)
    ]
    for name, (values, finite) in cases.items():
        (event,) = acc.Histograms(name)
        assert event.histogram_value.num == finite, name
        if finite:
            kept = values[np.isfinite(values)]
            assert event.histogram_value.min == pytest.approx(float(kept.min()))
            assert event.histogram_value.max == pytest.approx(float(kept.max()))
