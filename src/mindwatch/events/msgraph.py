"""A MindSpore computation graph (``mindspore.irpb.GraphProto``) as a TensorBoard ``GraphDef``.

TensorBoard's GRAPHS tab draws a ``GraphDef``: nodes named by ``/``-separated scopes,
each with an op, inputs by node name (``^name`` for control edges) and attributes. The
MindSpore graph maps onto it directly:

* an operator node becomes a node named by its ``full_name``
  (``Default/network-WithLossCell/_backbone-Net/conv-Conv2d/Conv2D-op0``), so the tab
  groups nodes by cell as MindInsight did; its output shape becomes ``_output_shapes``
  (shown on edges) and its MindSpore attributes become string attributes;
* graph inputs and parameters (op ``Parameter``) and constants (op ``Const``, value as
  an attribute) have no scope of their own: each is placed in the scope of the first
  operator that uses it, as TensorFlow graphs keep a layer's variables in the layer.

Decoded from the wire format (no MindSpore needed); built with TensorBoard's protobuf
classes, which TensorBoard itself reads.
"""

from __future__ import annotations

from typing import Any, Callable

from mindwatch.events.protowire import (
    Fields,
    Raw,
    WireError,
    double,
    fields,
    first,
    float32,
    signed,
    text,
    varints,
)

__all__ = ["graph_def_bytes"]

# GraphProto
_G_NODE, _G_PARAMETERS, _G_OUTPUTS, _G_CONSTS = 1, 3, 4, 5
# NodeProto
_N_INPUT, _N_NAME, _N_OP, _N_SCOPE, _N_ATTR, _N_OUT_TYPE, _N_FULL_NAME = 1, 2, 3, 4, 5, 6, 8
_ATTR_TEXT_LIMIT = 200

_TYPE_NAMES = {
    1: "bool",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "uint8",
    7: "uint16",
    8: "uint32",
    9: "uint64",
    10: "float16",
    11: "float32",
    12: "float64",
    13: "string",
    34: "None",
    43: "complex64",
    44: "complex128",
    46: "bfloat16",
}


def _messages(msg: Fields, number: int) -> list[Fields]:
    out = []
    for raw in msg.get(number, []):
        if not isinstance(raw, bytes):
            raise WireError(f"field {number} is not a message")
        out.append(fields(raw))
    return out


def _message(msg: Fields, number: int) -> Fields:
    raw = first(msg, number)
    return fields(raw) if isinstance(raw, bytes) else {}


def _shapes(type_msg: Fields) -> list[list[int]]:
    """Output shapes of a ``TypeProto``: one for a tensor, one per element of a tuple."""
    if 2 in type_msg:  # tensor_type
        shape = _message(_message(type_msg, 2), 2)
        return [[signed(first(dim, 1, 0)) for dim in _messages(shape, 1)]]
    if 3 in type_msg:  # sequence_type
        out: list[list[int]] = []
        for element in _messages(_message(type_msg, 3), 1):
            out += _shapes(element)
        return out
    return []


_SIMPLE_VALUES: dict[int, Callable[[Raw], str]] = {
    7: lambda v: repr(v.decode("utf-8", "replace") if isinstance(v, bytes) else v),
    2: lambda v: str(bool(v)),
    3: lambda v: str(signed(v)),
    4: str,
    5: lambda v: f"{float32(v):.7g}",
    6: lambda v: f"{double(v):.15g}",
}


def value_text(value: Fields) -> str:
    """A ``ValueProto`` as short readable text (attribute and constant values)."""
    for number, render in _SIMPLE_VALUES.items():
        if number in value:
            return render(first(value, number))
    dtype = int(first(value, 1, 0))
    if 8 in value:
        tensor = _message(value, 8)
        dims = [signed(d) for d in varints(tensor, 1)]
        kind = _TYPE_NAMES.get(int(first(tensor, 2, 0)), "tensor")
        rendered = f"Tensor(shape={dims}, dtype={kind})"
    elif 18 in value:
        items = [value_text(v) for v in _messages(value, 18)]
        opening, closing = ("[", "]") if dtype == 32 else ("(", ")")
        rendered = opening + ", ".join(items) + closing
    elif 19 in value:
        pairs = [f"{text(p, 1)!r}: {value_text(_message(p, 2))}" for p in _messages(value, 19)]
        rendered = "{" + ", ".join(pairs) + "}"
    elif 20 in value:
        rendered = _TYPE_NAMES.get(int(first(_message(value, 20), 1, 0)), "type")
    else:
        rendered = _TYPE_NAMES.get(dtype, "") if dtype else ""
    return rendered


def graph_def_bytes(graph: bytes) -> bytes:
    """Serialize ``graph`` (a ``GraphProto``) as a TensorBoard ``GraphDef``.

    Raises :class:`~mindwatch.events.protowire.WireError` if it does not decode.
    """
    from tensorboard.compat.proto.graph_pb2 import GraphDef

    msg = fields(graph)
    nodes = _messages(msg, _G_NODE)
    leaves: dict[str, tuple[str, dict[str, str]]] = {}  # name -> (op, attributes)
    for parameter in _messages(msg, _G_PARAMETERS):
        attrs = {}
        shapes = _shapes(_message(parameter, 2))
        if shapes:
            attrs["shape"] = str(shapes[0])
        leaves[text(parameter, 1)] = ("Parameter", attrs)
    for const in _messages(msg, _G_CONSTS):
        leaves[text(const, 1)] = ("Const", {"value": value_text(_message(const, 2))})

    # Operator names first: an input refers to an operator by its short name.
    full_names: dict[str, str] = {}
    taken: set[str] = set()
    for node in nodes:
        name = text(node, _N_FULL_NAME)
        if not name:
            scope = text(node, _N_SCOPE)
            name = f"{scope}/{text(node, _N_OP)}-{text(node, _N_NAME)}".lstrip("/")
        name = _unique(name, taken)
        full_names[text(node, _N_NAME)] = name

    graph_def = GraphDef()
    placed: dict[str, str] = {}
    for node in nodes:
        name = full_names[text(node, _N_NAME)]
        scope = name.rsplit("/", 1)[0] if "/" in name else ""
        node_def = graph_def.node.add(name=name, op=text(node, _N_OP) or "Unknown")
        for edge in _messages(node, _N_INPUT):
            source = text(edge, 1)
            if source in full_names:
                target = full_names[source]
            elif source in leaves:
                if source not in placed:
                    placed[source] = _unique(f"{scope}/{source}".lstrip("/"), taken)
                target = placed[source]
            else:
                continue  # an input the graph does not define: drawn as nothing
            control = int(first(edge, 2, 0)) == 1
            node_def.input.append(f"^{target}" if control else target)
        _set_shapes(node_def, _shapes(_message(node, _N_OUT_TYPE)))
        for attribute in _messages(node, _N_ATTR):
            rendered = value_text(_message(attribute, 2))
            node_def.attr[text(attribute, 1)].s = rendered[:_ATTR_TEXT_LIMIT].encode()
    for source, name in placed.items():
        op, attrs = leaves[source]
        leaf = graph_def.node.add(name=name, op=op)
        for key, value in attrs.items():
            leaf.attr[key].s = value[:_ATTR_TEXT_LIMIT].encode()
    serialized: bytes = graph_def.SerializeToString()
    return serialized


def _set_shapes(node_def: Any, shapes: list[list[int]]) -> None:
    if not shapes:
        return
    listed = node_def.attr["_output_shapes"].list
    for shape in shapes:
        proto = listed.shape.add()
        for size in shape:
            proto.dim.add(size=size)


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    taken.add(candidate)
    return candidate
