"""The wire-format decoder (``mindwatch.events.protowire``) against protobuf's own encoder.

MindSpore's summary files are decoded with it (``mindwatch.mssummary``), and the batched
scalar reader reads its varints (``mindwatch.events.fastscalars``). The reference is
protobuf itself: a proto2 message declared here, with a field of every wire type the
decoder reads, packed and unpacked repeated fields (proto2 packs only on request), a
nested and a repeated message, and a field number whose key takes five bytes. Every
value protobuf writes must come back as it was set; bytes protobuf refuses to parse
must raise :class:`WireError`, never decode to something.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Optional

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from mindwatch.events import protowire as pw
from mindwatch.events.protowire import WireError

F = descriptor_pb2.FieldDescriptorProto
BIG = 2**29 - 1  # the largest field number: a five-byte key
# name, number, type, label, packed
FIELDS = [
    ("i64", 1, F.TYPE_INT64, F.LABEL_OPTIONAL, False),
    ("u64", 2, F.TYPE_UINT64, F.LABEL_OPTIONAL, False),
    ("i32", 3, F.TYPE_INT32, F.LABEL_OPTIONAL, False),
    ("flag", 4, F.TYPE_BOOL, F.LABEL_OPTIONAL, False),
    ("d", 5, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, False),
    ("f", 6, F.TYPE_FLOAT, F.LABEL_OPTIONAL, False),
    ("s", 7, F.TYPE_STRING, F.LABEL_OPTIONAL, False),
    ("raw", 8, F.TYPE_BYTES, F.LABEL_OPTIONAL, False),
    ("child", 9, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, False),
    ("children", 10, F.TYPE_MESSAGE, F.LABEL_REPEATED, False),
    ("rf", 11, F.TYPE_FLOAT, F.LABEL_REPEATED, False),
    ("rf_packed", 12, F.TYPE_FLOAT, F.LABEL_REPEATED, True),
    ("rd", 13, F.TYPE_DOUBLE, F.LABEL_REPEATED, False),
    ("rd_packed", 14, F.TYPE_DOUBLE, F.LABEL_REPEATED, True),
    ("ri", 15, F.TYPE_INT64, F.LABEL_REPEATED, False),
    ("ri_packed", 16, F.TYPE_INT64, F.LABEL_REPEATED, True),
    ("far", BIG, F.TYPE_UINT32, F.LABEL_OPTIONAL, False),
]


def _probe_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(
        name="mindwatch_test_protowire.proto", package="mindwatch_test", syntax="proto2"
    )
    probe = file.message_type.add(name="Probe")
    for name, number, kind, label, packed in FIELDS:
        field = probe.field.add(name=name, number=number, type=kind, label=label)
        if kind == F.TYPE_MESSAGE:
            field.type_name = ".mindwatch_test.Probe"
        if packed:
            field.options.packed = True
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mindwatch_test.Probe"))


Probe = _probe_class()
NUM = {name: number for name, number, *_ in FIELDS}

INT64S = [0, 1, 127, 128, 300, 2**31, 2**63 - 1, -1, -2, -(2**31), -(2**63)]
UINT64S = [0, 1, 2**32, 2**63, 2**64 - 1]
DOUBLES = [0.0, -0.0, 1.5, -2.25, 1e-310, 1.7976931348623157e308, math.inf, -math.inf]
FLOATS = [0.0, -0.0, 1.5, -2.25, 3.4e38, 1e-40, math.inf, -math.inf]


def same(a: float, b: float) -> bool:
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


@pytest.mark.parametrize("i", range(len(INT64S)))
def test_every_scalar_field_reads_back_as_protobuf_wrote_it(i: int) -> None:
    j = i % len(UINT64S)
    msg = Probe(
        i64=INT64S[i],
        u64=UINT64S[j],
        i32=max(min(INT64S[i], 2**31 - 1), -(2**31)),
        flag=bool(i % 2),
        d=DOUBLES[i % len(DOUBLES)],
        f=FLOATS[i % len(FLOATS)],
        s="损失/loss é" * i,
        raw=bytes(range(i * 20 % 256)),
        far=2**32 - 1 - i,
    )
    got = pw.fields(msg.SerializeToString())
    assert pw.signed(pw.first(got, NUM["i64"], 0)) == msg.i64
    assert pw.uint(got, NUM["u64"]) == msg.u64
    assert pw.signed(pw.first(got, NUM["i32"], 0)) == msg.i32  # a negative int32: 10 bytes
    assert pw.uint(got, NUM["flag"]) == int(msg.flag)
    assert same(pw.double(pw.first(got, NUM["d"])), msg.d)
    assert same(pw.float32(pw.first(got, NUM["f"])), msg.f)
    assert pw.text(got, NUM["s"]) == msg.s
    assert pw.blob(got, NUM["raw"]) == msg.raw
    assert pw.uint(got, BIG) == msg.far


def test_absent_fields_read_as_their_defaults() -> None:
    got = pw.fields(Probe(s="x").SerializeToString())
    assert pw.uint(got, NUM["u64"]) == 0
    assert pw.blob(got, NUM["raw"]) == b""
    assert pw.text(got, NUM["raw"]) == ""
    assert pw.message(got, NUM["child"]) == {}
    assert pw.messages(got, NUM["children"]) == []
    assert pw.floats(got, NUM["rf"]).dtype == np.float32
    assert pw.doubles(got, NUM["rd"]).dtype == np.float64
    assert len(pw.floats(got, NUM["rf"])) == len(pw.doubles(got, NUM["rd"])) == 0
    assert pw.varints(got, NUM["ri"]) == []
    assert pw.fields(b"") == {}


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_repeated_fields_read_the_same_packed_or_not(n: int) -> None:
    rng = np.random.default_rng(n)
    floats = rng.normal(size=n).astype(np.float32)
    doubles = rng.normal(size=n) * 1e300
    ints = [INT64S[k % len(INT64S)] for k in range(n)]
    msg = Probe(rf=floats, rf_packed=floats, rd=doubles, rd_packed=doubles, ri=ints, ri_packed=ints)
    data = msg.SerializeToString()
    got = pw.fields(data)
    assert len(got[NUM["rf"]]) == n  # one field a value, as declared
    assert len(got[NUM["rf_packed"]]) == 1
    for name in ("rf", "rf_packed"):
        out = pw.floats(got, NUM[name])
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, floats)
    for name in ("rd", "rd_packed"):
        out = pw.doubles(got, NUM[name])
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out, doubles)
    for name in ("ri", "ri_packed"):
        assert [pw.signed(v) for v in pw.varints(got, NUM[name])] == ints
    # A packed field written in two pieces (two writers' messages merged) is one list.
    two = pw.fields(data + Probe(rf_packed=floats[:1], ri_packed=ints[:1]).SerializeToString())
    np.testing.assert_array_equal(pw.floats(two, NUM["rf_packed"]), [*floats, floats[0]])
    assert [pw.signed(v) for v in pw.varints(two, NUM["ri_packed"])] == [*ints, ints[0]]


def test_nested_messages_and_protobufs_merge_and_last_one_wins() -> None:
    a = Probe(i64=5, s="first", child=Probe(i64=1, s="a", rf=[1.0]))
    b = Probe(i64=-7, child=Probe(u64=2, rf=[2.0]), children=[Probe(s="x"), Probe(s="y")])
    data = a.SerializeToString() + b.SerializeToString()
    merged = Probe.FromString(data)  # protobuf's own merge: the specification
    got = pw.fields(data)
    assert pw.signed(pw.first(got, NUM["i64"])) == merged.i64 == -7  # the last one wins
    assert pw.text(got, NUM["s"]) == merged.s == "first"
    child = pw.message(got, NUM["child"])  # two occurrences: merged field by field
    assert pw.signed(pw.first(child, NUM["i64"])) == merged.child.i64 == 1
    assert pw.uint(child, NUM["u64"]) == merged.child.u64 == 2
    assert pw.text(child, NUM["s"]) == merged.child.s == "a"
    np.testing.assert_array_equal(pw.floats(child, NUM["rf"]), merged.child.rf)
    assert [pw.text(m, NUM["s"]) for m in pw.messages(got, NUM["children"])] == ["x", "y"]


def test_invalid_utf8_text_is_replaced_not_raised() -> None:
    got = pw.fields(Probe(raw=b"ok \xff\xfe end").SerializeToString())
    assert pw.text(got, NUM["raw"]) == "ok \ufffd\ufffd end"


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_read_varint_returns_the_value_and_where_it_ends() -> None:
    for value in [0, 1, 127, 128, 129, 255, 256, 16_383, 16_384, 2**63, 2**64 - 1]:
        data = b"\x01" + _varint(value) + b"\x02"
        assert pw.read_varint(data, 1) == (value, len(data) - 1), value
    # 0x80 alone continues (its low bits are 0): 0x80 0x01 is 128, not 0.
    assert pw.read_varint(b"\x80\x01", 0) == (128, 2)
    # A tenth byte's bits beyond 64 are dropped, as protobuf drops them.
    assert pw.read_varint(b"\xff" * 9 + b"\x7f", 0) == (2**64 - 1, 10)


DAMAGED: dict[str, tuple[bytes, Optional[str]]] = {
    "a varint cut short": (b"\x08\x96", "truncated or overlong varint"),
    "a varint of eleven bytes": (b"\x08" + b"\x80" * 10 + b"\x01", "overlong varint"),
    "a key cut short": (b"\x80", "truncated or overlong varint"),
    "a length past the end": (_key(7, 2) + b"\x05abc", "past the end"),
    "a fixed64 past the end": (_key(5, 1) + b"\x00" * 7, "past the end"),
    "a fixed32 past the end": (_key(6, 5) + b"\x00" * 3, "past the end"),
    "field number 0": (_key(0, 0) + b"\x01", None),  # said as "past the end"
    "wire type 3 (start group)": (_key(9, 3), "unsupported wire type 3 for field 9"),
    "wire type 4 (end group)": (_key(9, 4), "unsupported wire type 4 for field 9"),
    "wire type 6": (_key(6, 6) + b"\x00" * 4, "unsupported wire type 6 for field 6"),
    "wire type 7": (_key(6, 7) + b"\x00" * 8, "unsupported wire type 7 for field 6"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damage_protobuf_refuses_raises_wire_error(case: str) -> None:
    data, message = DAMAGED[case]
    with pytest.raises(DecodeError):
        Probe.FromString(data)
    with pytest.raises(WireError, match=message):
        pw.fields(data)


def test_a_value_of_the_wrong_wire_type_raises_naming_the_field() -> None:
    # A schema mismatch: each helper refuses a value of another wire type.
    got = pw.fields(_key(1, 0) + b"\x05" + _key(2, 2) + b"\x01x" + _key(3, 5) + b"\x00" * 4)
    with pytest.raises(WireError, match="field 1 should be length-delimited"):
        pw.blob(got, 1)
    with pytest.raises(WireError, match="field 1 should be length-delimited"):
        pw.text(got, 1)
    with pytest.raises(WireError, match="field 2 should be a varint"):
        pw.uint(got, 2)
    with pytest.raises(WireError, match="field 1 should be a message"):
        pw.message(got, 1)
    with pytest.raises(WireError, match="field 1 should be a message"):
        pw.messages(got, 1)
    with pytest.raises(WireError, match="expected a varint"):
        pw.signed(pw.first(got, 2))
    with pytest.raises(WireError, match="expected a 64-bit value"):
        pw.double(pw.first(got, 3))  # four bytes
    with pytest.raises(WireError, match="expected a 64-bit value"):
        pw.double(pw.first(got, 1))
    with pytest.raises(WireError, match="expected a 32-bit value"):
        pw.float32(pw.first(got, 2))  # one byte
    with pytest.raises(WireError, match="expected a 32-bit value"):
        pw.float32(pw.first(got, 1))
    with pytest.raises(WireError, match="expected fixed-width values"):
        pw.floats(got, 1)
    with pytest.raises(WireError, match="not a multiple of its element size"):
        pw.floats(got, 2)
    with pytest.raises(WireError, match="not a multiple of its element size"):
        pw.doubles(got, 3)


def test_a_packed_varint_list_cut_short_raises() -> None:
    data = _key(16, 2) + b"\x02\x01\x80"  # two bytes: 1, then a varint cut short
    with pytest.raises(DecodeError):
        Probe.FromString(data)
    with pytest.raises(WireError, match="truncated"):
        pw.varints(pw.fields(data), 16)


def test_signed_is_twos_complement_of_64_bits() -> None:
    assert pw.signed(2**64 - 1) == -1
    assert pw.signed(2**63) == -(2**63)
    assert pw.signed(2**63 - 1) == 2**63 - 1
    assert pw.signed(0) == 0
    assert struct.unpack("<q", struct.pack("<Q", 2**64 - 5))[0] == pw.signed(2**64 - 5)
