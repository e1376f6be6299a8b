"""The reader's items, value by value: tensor-encoded scalars of every dtype and both
encodings, text's wall time, the reader's record limit, steps beyond float64's exact
integers, and the one warning about steps going back (its whole text, once).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

from mindwatch.common.invocation import command_line
from mindwatch.events.reader import RunReader, Scalar, Text
from mindwatch.events.records import frame

NAME = "events.out.tfevents.1.values"


def write(folder: Path, events: list[Event], name: str = NAME) -> Path:
    path = folder / name
    path.write_bytes(b"".join(frame(e.SerializeToString()) for e in events))
    return path


def tensor_event(step: int, tag: str, tensor: TensorProto, plugin: str = "scalars") -> Event:
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=plugin))
    value = Summary.Value(tag=tag, metadata=meta, tensor=tensor)
    return Event(wall_time=1000.0 + step, step=step, summary=Summary(value=[value]))


# dtype enum, numpy dtype, value: each exact in its dtype
TENSOR_DTYPES = [
    (1, np.float32, 0.1),
    (2, np.float64, 0.1),
    (3, np.int32, -123456),
    (9, np.int64, 2**40 + 3),
    (19, np.float16, 0.333),
]


def _tensors() -> list[tuple[str, TensorProto, float]]:
    out = []
    for dtype, np_dtype, value in TENSOR_DTYPES:
        exact = float(np.asarray(value, dtype=np_dtype))
        content = np.asarray([value], dtype=np_dtype).tobytes()
        out.append((f"content/{dtype}", TensorProto(dtype=dtype, tensor_content=content), exact))
    out += [
        ("val/float", TensorProto(dtype=1, float_val=[0.1]), float(np.float32(0.1))),
        ("val/double", TensorProto(dtype=2, double_val=[0.1]), 0.1),
        ("val/int", TensorProto(dtype=3, int_val=[-7]), -7.0),
        ("val/int64", TensorProto(dtype=9, int64_val=[2**40 + 3]), float(2**40 + 3)),
        (
            "val/half",
            TensorProto(dtype=19, half_val=[int(np.float16(0.333).view(np.uint16))]),
            float(np.float16(0.333)),
        ),
    ]
    return out


def test_tensor_scalars_of_every_dtype_and_encoding_read_as_their_value(tmp_path: Path) -> None:
    tensors = _tensors()
    write(tmp_path, [tensor_event(5, tag, tensor) for tag, tensor, _ in tensors])
    want = {tag: value for tag, _, value in tensors}
    items = [i for i in RunReader(tmp_path).read() if isinstance(i, Scalar)]
    assert {i.tag: i.value for i in items} == want
    assert {(i.step, i.wall_time) for i in items} == {(5, 1005.0)}
    tags, steps, walls, values = RunReader(tmp_path).scalar_columns()
    assert dict(zip(tags.tolist(), values.tolist())) == want
    assert (set(steps.tolist()), set(walls.tolist())) == ({5}, {1005.0})


def test_a_text_item_keeps_its_step_and_wall_time(tmp_path: Path) -> None:
    text = TensorProto(dtype=7, string_val=["说明 notes".encode()])
    write(tmp_path, [tensor_event(12, "notes", text, plugin="text")])
    assert list(RunReader(tmp_path).read()) == [Text("notes", 12, 1012.0, "说明 notes")]


def test_the_run_readers_record_limit_is_its_readers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    small = Event(wall_time=1.0, step=1, summary=Summary(value=[Summary.Value(tag="a")]))
    big = Event(wall_time=2.0, step=2, file_version="x" * 500)
    path = write(tmp_path, [small, big, small])
    caplog.set_level(logging.WARNING, logger="mindwatch")
    reader = RunReader(tmp_path, max_record_bytes=100)
    list(reader.read())
    assert reader.corrupt_records == 1  # the 500-byte record is taken as damage
    (warning,) = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    at = len(frame(small.SerializeToString()))
    assert warning.startswith(f"mindwatch: {path}: a damaged record header at byte offset {at};")
    default = RunReader(tmp_path)  # the default limit reads it
    list(default.read())
    assert default.corrupt_records == 0


def test_steps_beyond_float64s_exact_integers_read_exactly(tmp_path: Path) -> None:
    first = 2**60 + 1  # not a float64: a step column of floats would round it
    events = [
        Event(
            wall_time=1.0,
            step=first + k,
            summary=Summary(value=[Summary.Value(tag="loss", simple_value=1.0)]),
        )
        for k in range(100)
    ]
    write(tmp_path, events)
    _, steps, _, _ = RunReader(tmp_path).scalar_columns()
    assert steps.dtype == np.int64
    assert steps.tolist() == [first + k for k in range(100)]


def _scalar(step: int, tag: str) -> Event:
    return Event(
        wall_time=1.0,
        step=step,
        summary=Summary(value=[Summary.Value(tag=tag, simple_value=0.5)]),
    )


@pytest.mark.parametrize(
    ("back", "more"), [(1, ""), (2, " (and 1 more tag)"), (3, " (and 2 more tags)")]
)
def test_steps_going_back_are_one_warning_naming_file_tag_and_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, back: int, more: str
) -> None:
    tags = [f"t{k}" for k in range(back)] + ["steady"]
    events = [_scalar(s, t) for s in range(1, 51) for t in tags]
    events += [_scalar(s, t) for s in range(20, 31) for t in tags if t != "steady"]
    path = write(tmp_path, events)
    caplog.set_level(logging.WARNING, logger="mindwatch")
    reader = RunReader(tmp_path)
    reader.scalar_columns()
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mindwatch")]
    assert warnings == [
        f"mindwatch: {path}: t0 goes back from step 50 to step 20 (11 points at steps it "
        "had already passed), with no restart marker: TensorBoard draws the curve folding "
        f"back over itself and report/compare statistics mix both{more}. A resumed run "
        "should write the restart marker (mindwatch: resume_step=N; torch: "
        "SummaryWriter(purge_step=N)), or each attempt its own folder; "
        f"`{command_line('doctor', tmp_path)}` says more"
    ]
    # Once per reader: a later read of more such points says nothing new.
    write(tmp_path, [_scalar(s, "t0") for s in (5, 4, 3)], name=NAME + ".2")
    reader.scalar_columns()
    assert len([r for r in caplog.records if r.name.startswith("mindwatch")]) == 1
