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

from typing import Any, Callable, Optional

from mindwatch.events.protowire import (
    Fields,
    Raw,
    double,
    fields,
    first,
    float32,
    message,
    messages,
    signed,
    text,
    uint,
    varints,
)

__all__ = ["graph_def_bytes"]

# GraphProto
_G_NODE, _G_PARAMETERS, _G_OUTPUTS, _G_CONSTS = 1, 3, 4, 5
# NodeProto
_N_INPUT, _N_NAME, _N_OP, _N_SCOPE, _N_ATTR, _N_OUT_TYPE, _N_FULL_NAME = 1, 2, 3, 4, 5, 6, 8
_ATTR_TEXT_LIMIT = 200
_MAX_VALUE_DEPTH = 8  # nested tuples deeper than this print as ...

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


def _shapes(type_msg: Fields) -> list[Optional[list[int]]]:
    """Output shapes of a ``TypeProto``: one per output; ``None`` where not a tensor."""
    if 2 in type_msg:  # tensor_type
        shape = message(message(type_msg, 2), 2)
        return [[signed(first(dim, 1, 0)) for dim in messages(shape, 1)]]
    if 3 in type_msg:  # sequence_type
        out: list[Optional[list[int]]] = []
        for element in messages(message(type_msg, 3), 1):
            out += _shapes(element) or [None]
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


def value_text(value: Fields, depth: int = 0) -> str:
    """A ``ValueProto`` as short readable text (attribute and constant values)."""
    if depth > _MAX_VALUE_DEPTH:
        return "..."
    for number, render in _SIMPLE_VALUES.items():
        if number in value:
            return render(first(value, number))
    dtype = uint(value, 1)
    if 8 in value:
        tensor = message(value, 8)
        dims = [signed(d) for d in varints(tensor, 1)]
        kind = _TYPE_NAMES.get(uint(tensor, 2), "tensor")
        rendered = f"Tensor(shape={dims}, dtype={kind})"
    elif 18 in value:
        items = [value_text(v, depth + 1) for v in messages(value, 18)]
        opening, closing = ("[", "]") if dtype == 32 else ("(", ")")
        rendered = opening + ", ".join(items) + closing
    elif 19 in value:
        pairs = [
            f"{text(p, 1)!r}: {value_text(message(p, 2), depth + 1)}" for p in messages(value, 19)
        ]
        rendered = "{" + ", ".join(pairs) + "}"
    elif 20 in value:
        rendered = _TYPE_NAMES.get(uint(message(value, 20), 1), "type")
    else:
        rendered = _TYPE_NAMES.get(dtype, "") if dtype else ""
    return rendered


def graph_def_bytes(graph: bytes) -> bytes:
    """Serialize ``graph`` (a ``GraphProto``) as a TensorBoard ``GraphDef``.

    Raises :class:`~mindwatch.events.protowire.WireError` if it does not decode.
    """
    from tensorboard.compat.proto.graph_pb2 import GraphDef

    msg = fields(graph)
    nodes = messages(msg, _G_NODE)
    leaves: dict[str, tuple[str, dict[str, str]]] = {}  # name -> (op, attributes)
    for parameter in messages(msg, _G_PARAMETERS):
        attrs = {}
        shapes = _shapes(message(parameter, 2))
        if shapes and shapes[0] is not None:
            attrs["shape"] = str(shapes[0])
        leaves[text(parameter, 1)] = ("Parameter", attrs)
    for const in messages(msg, _G_CONSTS):
        leaves[text(const, 1)] = ("Const", {"value": value_text(message(const, 2))})

    # Operator names first: an input refers to an operator by its short name.
    names: list[str] = []
    by_short_name: dict[str, str] = {}
    taken: set[str] = set()
    for index, node in enumerate(nodes):
        short = text(node, _N_NAME)
        name = text(node, _N_FULL_NAME)
        if not name:
            scope = text(node, _N_SCOPE)
            op = text(node, _N_OP) or "Unknown"
            name = f"{scope}/{op}-{short or index}".lstrip("/")
        name = _unique(name, taken)
        names.append(name)
        if short:
            by_short_name.setdefault(short, name)

    graph_def = GraphDef()
    placed: dict[str, str] = {}
    for name, node in zip(names, nodes):
        scope = name.rsplit("/", 1)[0] if "/" in name else ""
        node_def = graph_def.node.add(name=name, op=text(node, _N_OP) or "Unknown")
        for edge in messages(node, _N_INPUT):
            source = text(edge, 1)
            if source in by_short_name:
                target = by_short_name[source]
            elif source in leaves:
                if source not in placed:
                    placed[source] = _unique(f"{scope}/{source}".lstrip("/"), taken)
                target = placed[source]
            else:
                continue  # an input the graph does not define: drawn as nothing
            control = uint(edge, 2) == 1
            node_def.input.append(f"^{target}" if control else target)
        _set_shapes(node_def, _shapes(message(node, _N_OUT_TYPE)))
        for attribute in messages(node, _N_ATTR):
            rendered = value_text(message(attribute, 2))
            node_def.attr[text(attribute, 1)].s = rendered[:_ATTR_TEXT_LIMIT].encode()
    for source, name in placed.items():
        op, attrs = leaves[source]
        leaf = graph_def.node.add(name=name, op=op)
        for key, value in attrs.items():
            leaf.attr[key].s = value[:_ATTR_TEXT_LIMIT].encode()
    serialized: bytes = graph_def.SerializeToString()
    return serialized


def _set_shapes(node_def: Any, shapes: list[Optional[list[int]]]) -> None:
    if not shapes:
        return
    listed = node_def.attr["_output_shapes"].list
    for shape in shapes:
        proto = listed.shape.add()
        if shape is None:
            proto.unknown_rank = True
            continue
        for size in shape:
            proto.dim.add(size=max(size, -1))  # -1: unknown (dynamic) size


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    taken.add(candidate)
    return candidate
