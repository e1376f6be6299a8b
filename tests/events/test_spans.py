"""The bulk read path (numpy framing, batched CRCs, batched decoding) against the
one-record-at-a-time path and against EventAccumulator.

Random files mix what writers leave: one scalar per event (torch, tensorboardX,
MindFormers), several per event (mindwatch), tags of one length differing in one, three
or many bytes, histograms, text, tensor-encoded scalars (``new_style`` / TF2), restart
markers, then damage (flipped bits, garbage, a torn end). Both paths must return the
same records, count the same damage, warn the same, and decode the same points.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto

import mindwatch
from mindwatch.events.crc import crc32c, masked_crc32c
from mindwatch.events.reader import RecordReader, RunReader, Scalar, without_purged
from mindwatch.events.records import frame
from mindwatch.events.spans import check_crcs
from tests.tbread import accumulator

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

TAG_SETS = {
    "one": ["loss"],
    "digit": [f"bench/tag{i}" for i in range(10)],  # one byte differs (torch, tbx)
    "three": ["m/aaa", "m/bbb", "m/ccc"],
    "many": ["layer/abcdefghijkl", "layer/mnopqrstuvwx"],  # > 8 bytes differ
    "lengths": ["loss", "learning_rate", "global_norm", "loss_scale"],  # MindFormers
}
VALUES = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-45, 3.4028234663852886e38]),
)
SEGMENT = st.tuples(
    st.sampled_from(["per_tag", "multi", "histogram", "text", "tensor", "purge", "version"]),
    st.sampled_from(sorted(TAG_SETS)),
    st.integers(min_value=1, max_value=80),  # steps
    st.sampled_from([0, 1, 127, 128, 16383, 2**21, 2**40, -5]),  # first step
)


def scalar_event(step: int, wall: float, values: dict[str, float]) -> bytes:
    summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values.items()])
    return Event(wall_time=wall, step=step, summary=summary).SerializeToString()


def segment_records(kind: str, tags: list[str], steps: int, first: int, draw: Any) -> list[bytes]:
    out = []
    for k in range(steps):
        step, wall = first + k, 1.7e9 + (first + k) * 0.25
        if kind == "per_tag":
            out += [scalar_event(step, wall, {t: draw(VALUES)}) for t in tags]
        elif kind == "multi":
            out.append(scalar_event(step, wall, {t: draw(VALUES) for t in tags}))
        elif kind == "histogram":
            histo = Summary.Value(tag=tags[0] + "_h")
            histo.histo.min, histo.histo.max, histo.histo.num = 0.0, 1.0, 3.0
            histo.histo.bucket_limit.extend([0.5, 1.0])
            histo.histo.bucket.extend([1.0, 2.0])
            out.append(
                Event(step=step, wall_time=wall, summary=Summary(value=[histo])).SerializeToString()
            )
        elif kind == "text":
            text = Summary.Value(tag="notes", tensor=TensorProto(dtype=7, string_val=[b"hi"]))
            text.metadata.plugin_data.plugin_name = "text"
            out.append(
                Event(step=step, wall_time=wall, summary=Summary(value=[text])).SerializeToString()
            )
        elif kind == "tensor":
            meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
            value = Summary.Value(
                tag=tags[0] + "_t",
                metadata=meta,
                tensor=TensorProto(dtype=1, float_val=[draw(VALUES)]),
            )
            out.append(
                Event(step=step, wall_time=wall, summary=Summary(value=[value])).SerializeToString()
            )
        elif kind == "purge":
            purge = Event(
                step=step, wall_time=wall, session_log=SessionLog(status=SessionLog.START)
            )
            return [purge.SerializeToString()]
        else:
            return [Event(wall_time=wall, file_version="brain.Event:2").SerializeToString()]
    return out


@st.composite
def event_file(draw: Any, junk: bool = True) -> tuple[bytes, int]:
    """(file bytes, how many records are in it); ``junk``: maybe a record that is not
    an event (EventAccumulator stops there)."""
    records = [Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()]
    for kind, tags, steps, first in draw(st.lists(SEGMENT, min_size=1, max_size=6)):
        records += segment_records(kind, TAG_SETS[tags], steps, first, draw)
    if junk and draw(st.booleans()):
        records.append(b"\x0a\xff not an event")  # valid CRCs, not a protobuf message
    return b"".join(frame(r) for r in records), len(records)


@st.composite
def damaged(draw: Any) -> bytes:
    data, _ = draw(event_file())
    out = bytearray(data)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(out) - 1))
        out[at] ^= 1 << draw(st.integers(min_value=0, max_value=7))
    if draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(out)))
        out[at:at] = draw(
            st.sampled_from([bytes(300), b"\xff" * 77, np.arange(40, dtype="<i8").tobytes()])
        )
    if draw(st.booleans()):
        del out[len(out) - draw(st.integers(min_value=1, max_value=60)) :]
    return bytes(out)


@pytest.fixture(autouse=True)
def _warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mindwatch")


def write(tmp_path: Path, data: bytes, name: str = "events.out.tfevents.1.spans") -> Path:
    for old in tmp_path.glob("*tfevents*"):
        old.unlink()
    path = tmp_path / name
    path.write_bytes(data)
    return path


def reference_scalars(folder: Path) -> list[tuple[str, int, str, str]]:
    """The one-at-a-time path's points (purges applied), floats as hex: NaN == NaN."""
    items = without_purged(RunReader(folder).read())
    return [
        (i.tag, i.step, float(i.wall_time).hex(), float(i.value).hex())
        for i in items
        if isinstance(i, Scalar)
    ]


def bulk_scalars(folder: Path) -> list[tuple[str, int, str, str]]:
    tags, steps, walls, values = RunReader(folder).scalar_columns()
    return [
        (str(t), int(s), float(w).hex(), float(v).hex())
        for t, s, w, v in zip(tags, steps.tolist(), walls.tolist(), values.tolist())
    ]


def reader_state(reader: RecordReader) -> tuple[Any, ...]:
    s = reader.stats
    return (
        reader.offset,
        s.records,
        s.corrupt,
        s.skipped_bytes,
        s.corrupt_regions,
        s.records_before_damage,
    )


@SETTINGS
@given(data=damaged())
def test_bulk_records_match_one_at_a_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, data: bytes
) -> None:
    path = write(tmp_path, data)
    caplog.clear()
    one = RecordReader(path)
    expected = list(one.read())
    warned = [r.getMessage() for r in caplog.records]
    caplog.clear()
    bulk = RecordReader(path)
    spans = bulk.read_spans()
    assert [spans.payload(i) for i in range(len(spans))] == expected
    assert reader_state(bulk) == reader_state(one)
    assert [r.getMessage() for r in caplog.records] == warned
    # each record's offset in the file is where its header is
    for i in range(len(spans)):
        at = int(spans.at[i])
        assert data[at + 12 : at + 12 + int(spans.lengths[i])] == expected[i]


@SETTINGS
@given(data=damaged())
def test_bulk_scalars_match_one_at_a_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, data: bytes
) -> None:
    write(tmp_path, data)
    assert bulk_scalars(tmp_path) == reference_scalars(tmp_path)


@SETTINGS
@given(file=event_file(junk=False))
def test_undamaged_files_read_as_eventaccumulator_reads_them(
    tmp_path: Path, file: tuple[bytes, int]
) -> None:
    data, _ = file
    write(tmp_path, data)
    acc = accumulator(tmp_path)
    expected = {
        tag: [
            (e.step, float(e.wall_time).hex(), float(np.float32(e.value)).hex())
            for e in acc.Scalars(tag)
        ]
        for tag in acc.Tags()["scalars"]
    }
    frame_ = mindwatch.read_scalars(tmp_path)
    got: dict[str, list[tuple[int, str, str]]] = {}
    for tag, step, wall, value in zip(
        frame_["tag"], frame_["step"], frame_["wall_time"], frame_["value"]
    ):
        if not tag.endswith("_t"):  # tensor scalars: EventAccumulator does not purge them
            got.setdefault(tag, []).append((int(step), float(wall).hex(), float(value).hex()))
    assert got == {tag: points for tag, points in expected.items() if points}


def test_several_files_in_order_and_appended_records_read_once(tmp_path: Path) -> None:
    first = b"".join(frame(scalar_event(s, 1.0, {"a": float(s)})) for s in range(100))
    second = b"".join(frame(scalar_event(s, 2.0, {"a": -float(s)})) for s in range(100, 150))
    write(tmp_path, first, "events.out.tfevents.1.a")
    (tmp_path / "events.out.tfevents.2.b").write_bytes(second[:-3])  # torn last record
    reader = RunReader(tmp_path)
    _, steps, _, values = reader.scalar_columns()
    assert steps.tolist() == list(range(149))
    assert values.tolist() == [float(s) for s in range(100)] + [-float(s) for s in range(100, 149)]
    with open(tmp_path / "events.out.tfevents.2.b", "ab") as handle:
        handle.write(second[-3:])
    assert reader.scalar_columns()[1].tolist() == [149]


def test_a_step_that_is_not_one_varint_is_left_to_protobuf(tmp_path: Path) -> None:
    """Same length and same bytes elsewhere, but the step bytes end early: protobuf
    reads it differently, so the numpy path must not decode it."""
    records = [scalar_event(300 + k, 1.0, {"loss": 1.0}) for k in range(40)]
    odd = bytearray(records[20])
    assert odd[10] >= 0x80  # a 2-byte step varint
    assert odd[11] < 0x80
    odd[10] = 0x05
    odd[11] = 0x10  # step 5, then the step field again: its varint is the next byte
    records[20] = bytes(odd)
    write(tmp_path, b"".join(frame(r) for r in records))
    got = bulk_scalars(tmp_path)
    assert got == reference_scalars(tmp_path)
    assert len(got) == 39  # protobuf rejects it, so it is no point (the numpy path made 40)
    assert [step for _, step, _, _ in got] == [300 + k for k in range(40) if k != 20]


def test_a_not_an_event_record_is_named_by_its_own_offset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = [frame(scalar_event(s, 1.0, {"loss": 1.0})) for s in range(30)]
    bad = frame(b"\x0a\xff not an event")
    write(tmp_path, b"".join(good[:10]) + bad + b"".join(good[10:]))
    mindwatch.read_scalars(tmp_path)
    offset = sum(len(r) for r in good[:10])
    assert any(f"not an event at byte offset {offset};" in r.getMessage() for r in caplog.records)


@SETTINGS
@given(
    payloads=st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=60),
    length=st.integers(min_value=1, max_value=40),
    flips=st.lists(st.integers(min_value=0), max_size=5),
)
def test_batched_crcs_are_the_crcs(payloads: list[bytes], length: int, flips: list[int]) -> None:
    """Many of one length (the table path) and of many lengths (one at a time)."""
    same = [(p * length)[:length].ljust(length, b"\0") for p in payloads] * 3
    records = bytearray(b"".join(frame(p) for p in [*same, *payloads]))
    for flip in flips:
        records[flip % len(records)] ^= 0x10
    data = bytes(records)
    starts, lengths, pos = [], [], 0
    for p in [*same, *payloads]:
        starts.append(pos)
        lengths.append(len(p))
        pos += 16 + len(p)
    ok = check_crcs(data, np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64))
    expected = [
        masked_crc32c(data[s + 12 : s + 12 + n]) == struct.unpack_from("<I", data, s + 12 + n)[0]
        for s, n in zip(starts, lengths)
    ]
    assert ok.tolist() == expected
    assert crc32c(b"") == 0


def test_tags_of_one_length_differing_beyond_the_key_are_told_apart(tmp_path: Path) -> None:
    """Tags alike in their first 8 differing bytes (the kind's key) but not after, and
    records of one length in two layouts (a longer tag with a shorter step): each is
    decoded by the numpy path as its own kind, and right."""
    from mindwatch.events.fastscalars import decode_spans

    tags = ["x/aaaaaaaaaa1", "x/aaaaaaaaaa2", "x/bbbbbbbbbb1"]
    records = [
        scalar_event(step, 1.0 + step, {tag: step + i / 4})
        for step in range(200, 240)
        for i, tag in enumerate(tags)
    ]
    # as long as "x/aaaaaaaaaa1" at a 2-byte step: a 1-byte longer tag at a 1-byte step
    records += [scalar_event(step, 2.0, {"x/aaaaaaaaaa12": -step}) for step in range(1, 41)]
    write(tmp_path, b"".join(frame(r) for r in records))
    spans = RecordReader(tmp_path / "events.out.tfevents.1.spans").read_spans()
    assert len(set(spans.lengths.tolist())) == 1
    fast = decode_spans(spans)
    assert fast.handled.all()
    assert sorted(fast.tags) == sorted([*tags, "x/aaaaaaaaaa12"])
    assert bulk_scalars(tmp_path) == reference_scalars(tmp_path)
