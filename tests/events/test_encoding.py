"""The hand-written event encoders give exactly the bytes of TensorBoard's own protobuf
classes (``Event.SerializeToString()``), for a tag's first encoding and for its cached
one, at every size class of the step's varint and with and without a wall time.

Each test uses tags no other test has encoded: the encoders cache a tag's header bytes
per process, and a tag seen before would test only the cache.
"""

from __future__ import annotations

import itertools

import pytest
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary

from mindwatch.events import encoding

STEPS = [0, 1, 127, 128, 16_383, 16_384, 2**31, 2**63 - 1, -1, -(2**63)]
WALLS = [0.0, 1_700_000_000.25]
# ASCII, a name past 127 bytes (a two-byte length), CJK (three bytes a character)
TAG_KINDS = ["loss", "layer/" + "w" * 130, "损失/训练"]

_fresh = itertools.count()


def fresh(kind: str) -> str:
    return f"{kind}/{next(_fresh)}-{id(_fresh)}"


def event(wall: float, step: int, **fields: object) -> bytes:
    return Event(wall_time=wall, step=step, **fields).SerializeToString()  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", TAG_KINDS)
def test_scalar_events_are_protobufs_bytes_first_and_cached(kind: str) -> None:
    for wall, step in itertools.product(WALLS, STEPS):
        tag = fresh(kind)
        want = event(wall, step, summary=Summary(value=[Summary.Value(tag=tag, simple_value=2.5)]))
        assert encoding.encode_scalar(wall, step, tag, 2.5) == want, (wall, step)
        assert encoding.encode_scalar(wall, step, tag, 2.5) == want  # from the cache
        other = fresh(kind)
        want = event(
            wall,
            step,
            summary=Summary(
                value=[
                    Summary.Value(tag=other, simple_value=-1.0),
                    Summary.Value(tag=tag, simple_value=3e38 * 10),  # beyond float32: inf
                ]
            ),
        )
        pairs = [(other, -1.0), (tag, 3e39)]
        assert encoding.encode_scalars(wall, step, pairs) == want
        assert encoding.encode_scalars(wall, step, pairs) == want
        values = [encoding.scalar_value(t, v) for t, v in pairs]
        assert encoding.encode_summary_values(wall, step, values) == want


def test_a_step_beyond_int64_is_refused() -> None:
    with pytest.raises(ValueError, match="int64"):
        encoding.encode_scalar(1.0, 2**63, fresh("loss"), 1.0)
    with pytest.raises(ValueError, match="int64"):
        encoding.encode_scalar(1.0, -(2**63) - 1, fresh("loss"), 1.0)


@pytest.mark.parametrize("wall", WALLS)
def test_file_version_graph_and_session_start_are_protobufs_bytes(wall: float) -> None:
    assert encoding.encode_file_version(wall) == event(wall, 0, file_version="brain.Event:2")
    assert encoding.encode_file_version(wall, "brain.Event:1") == event(
        wall, 0, file_version="brain.Event:1"
    )
    for size in (0, 5, 200, 20_000):
        graph = bytes(range(256)) * (size // 256) + bytes(size % 256)
        assert encoding.encode_graph(wall, graph) == event(wall, 0, graph_def=graph)
    for step in STEPS:
        start = SessionLog(status=SessionLog.START)
        assert encoding.encode_session_start(wall, step) == event(wall, step, session_log=start)


def test_varints_are_protobufs() -> None:
    from google.protobuf.internal.encoder import _VarintBytes

    for n in [0, 1, 127, 128, 300, 16_383, 16_384, 2**32, 2**63 - 1]:
        assert encoding.varint(n) == _VarintBytes(n), n
    # negative int64: ten bytes of two's complement, as protobuf writes an int64 field
    assert encoding.varint(-1) == _VarintBytes(2**64 - 1)
    assert encoding.varint(-(2**63)) == _VarintBytes(2**63)
