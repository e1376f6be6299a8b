"""MindSpore's own summary files (``*_MS``, ``*_lineage``), read without MindSpore.

``SummaryRecord`` / ``SummaryCollector`` write TFRecord-framed ``mindspore.irpb.Event``
messages: a version string, a computation graph (``graph_def``), and summaries whose
values are a float ``scalar_value``, an ``image`` (TensorBoard's field layout, PNG), a
``tensor`` (``TensorProto``), a ``histogram`` (buckets of ``left``/``width``/``count`` plus
NaN/inf counts) or a loss landscape. ``*_lineage`` files hold ``LineageEvent`` messages
(training hyperparameters). Field numbers below are those of MindSpore's
``summary.proto``, ``anf_ir.proto`` and ``lineage.proto`` (stable since MindSpore 1.x).

:class:`SummaryFileReader` reuses :class:`~mindwatch.events.reader.RecordReader`, so CRCs
are checked, a half-written last record waits for the next read (``--follow``) and a
damaged record is skipped with a warning; a record that decodes to nonsense is counted
in :attr:`SummaryFileReader.skipped`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from mindwatch.events.protowire import (
    Fields,
    Raw,
    WireError,
    blob,
    double,
    doubles,
    fields,
    first,
    float32,
    floats,
    message,
    messages,
    signed,
    text,
    uint,
    varints,
)
from mindwatch.events.reader import PathLike, RecordReader

__all__ = [
    "MsGraph",
    "MsHistogram",
    "MsImage",
    "MsItem",
    "MsScalar",
    "MsTensor",
    "SummaryFileReader",
    "is_summary_file",
    "lineage_hparams",
    "tensor_array",
]

log = logging.getLogger(__name__)

# mindspore.irpb.Event
_EV_WALL_TIME, _EV_STEP, _EV_VERSION, _EV_GRAPH, _EV_SUMMARY = 1, 2, 3, 4, 5
# Summary.Value
_V_TAG, _V_SCALAR, _V_IMAGE, _V_TENSOR, _V_HISTOGRAM = 1, 3, 4, 8, 9
# TensorProto
_T_DIMS, _T_TYPE, _T_FLOAT, _T_INT32, _T_INT64, _T_DOUBLE, _T_UINT64, _T_RAW = range(1, 9)

# anf_ir.proto DataType -> numpy dtype of raw_data
_DTYPES: dict[int, str] = {
    1: "?",
    2: "i1",
    3: "<i2",
    4: "<i4",
    5: "<i8",
    6: "u1",
    7: "<u2",
    8: "<u4",
    9: "<u8",
    10: "<f2",
    11: "<f4",
    12: "<f8",
}
_BFLOAT16 = 46


def is_summary_file(name: str) -> bool:
    """MindSpore summary data (not its lineage or explain files)."""
    return ".summary." in name and name.endswith("_MS")


@dataclass(frozen=True)
class MsScalar:
    step: int
    wall_time: float
    tag: str
    value: float


@dataclass(frozen=True)
class MsHistogram:
    """Buckets ``[left, left + width)``; NaN and infinities are counted apart."""

    step: int
    wall_time: float
    tag: str
    left: np.ndarray[Any, Any]
    width: np.ndarray[Any, Any]
    count: np.ndarray[Any, Any]
    nan_count: int
    pos_inf_count: int
    neg_inf_count: int
    min: float
    max: float
    sum: float


@dataclass(frozen=True)
class MsImage:
    """``encoded`` is a serialized image message in TensorBoard's own field layout."""

    step: int
    wall_time: float
    tag: str
    encoded: bytes


@dataclass(frozen=True)
class MsTensor:
    step: int
    wall_time: float
    tag: str
    values: np.ndarray[Any, Any]


@dataclass(frozen=True)
class MsGraph:
    """A serialized ``mindspore.irpb.GraphProto`` (see :mod:`mindwatch.mssummary.graph`)."""

    step: int
    wall_time: float
    graph: bytes


MsItem = Union[MsScalar, MsHistogram, MsImage, MsTensor, MsGraph]


def tensor_array(msg: Fields) -> np.ndarray[Any, Any]:
    """A ``TensorProto`` as a numpy array of its shape (WireError if it is not one)."""
    dims = [signed(d) for d in varints(msg, _T_DIMS)]
    dtype = uint(msg, _T_TYPE)
    raw = blob(msg, _T_RAW) if _T_RAW in msg else b""
    if raw:
        if dtype == _BFLOAT16:
            halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = halves.view(np.float32)
        elif dtype in _DTYPES:
            values = np.frombuffer(raw, dtype=_DTYPES[dtype])
        else:
            raise WireError(f"tensor of unsupported data type {dtype}")
    elif _T_FLOAT in msg:
        values = floats(msg, _T_FLOAT)
    elif _T_DOUBLE in msg:
        values = doubles(msg, _T_DOUBLE)
    elif _T_INT32 in msg or _T_INT64 in msg:
        number = _T_INT32 if _T_INT32 in msg else _T_INT64
        values = np.array([signed(v) for v in varints(msg, number)], dtype=np.int64)
    elif _T_UINT64 in msg:
        values = np.array(varints(msg, _T_UINT64), dtype=np.uint64)
    else:
        values = np.zeros(0, dtype=np.float32)
    size = int(np.prod(dims)) if dims else 1
    if values.size != size:
        if values.size == 0 and size == 0:
            return values.reshape(dims)
        raise WireError(f"tensor holds {values.size} values for shape {dims}")
    return values.reshape(dims)


def _histogram(step: int, wall: float, tag: str, msg: Fields) -> MsHistogram:
    left, width, count = [], [], []
    for bucket in messages(msg, 1):
        left.append(double(first(bucket, 1, bytes(8))))
        width.append(double(first(bucket, 2, bytes(8))))
        count.append(signed(first(bucket, 3, 0)))
    if any(c < 0 for c in count):
        raise WireError("a histogram bucket with a negative count")

    def real(field: int) -> float:
        return double(first(msg, field, bytes(8)))

    return MsHistogram(
        step=step,
        wall_time=wall,
        tag=tag,
        left=np.array(left, dtype=np.float64),
        width=np.array(width, dtype=np.float64),
        count=np.array(count, dtype=np.int64),
        nan_count=uint(msg, 2),
        pos_inf_count=uint(msg, 3),
        neg_inf_count=uint(msg, 4),
        max=real(5),
        min=real(6),
        sum=real(7),
    )


class SummaryFileReader:
    """The items of one ``*_MS`` file, incrementally (each :meth:`read` continues).

    Attributes:
        skipped: records or values that could not be decoded, or kinds TensorBoard has
            no place for (loss landscapes, explanations), by kind.
        version: the file's format version string (``MindSpore.Event:1``).
    """

    def __init__(self, path: PathLike) -> None:
        self.records = RecordReader(path)
        self.skipped: dict[str, int] = {}
        self.version = ""

    @property
    def corrupt_records(self) -> int:
        return self.records.stats.corrupt

    def _skip(self, kind: str) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + 1

    def read(self) -> Iterator[MsItem]:
        """Yield the items of every complete record written since the last call.

        A value that does not decode is skipped alone (one step's record holds all of
        that step's summaries: a damaged histogram must not take the loss with it).
        """
        for payload in self.records.read():
            try:
                step, wall, graph, values = self._event(payload)
            except (WireError, ValueError, OverflowError) as exc:
                self._undecodable("record", exc)
                continue
            if graph is not None:
                yield MsGraph(step, wall, graph)
            for raw in values:
                try:
                    item = self._value(step, wall, raw)
                except (WireError, ValueError, OverflowError) as exc:
                    self._undecodable("value", exc)
                    continue
                if item is not None:
                    yield item

    def _undecodable(self, what: str, exc: Exception) -> None:
        kind = f"undecodable {what}"
        self._skip(kind)
        if self.skipped[kind] <= 3:
            log.warning(
                "mindwatch: %s: a %s before byte offset %d does not decode (%s); skipped",
                self.records.path,
                what,
                self.records.offset,
                exc,
            )

    def _event(self, payload: bytes) -> tuple[int, float, Optional[bytes], list[Raw]]:
        event = fields(payload)
        wall = double(first(event, _EV_WALL_TIME, bytes(8)))
        step = signed(first(event, _EV_STEP, 0))
        if _EV_VERSION in event:
            self.version = text(event, _EV_VERSION)
        graph = blob(event, _EV_GRAPH) if _EV_GRAPH in event else None
        values = message(event, _EV_SUMMARY).get(1, []) if _EV_SUMMARY in event else []
        if not ({_EV_VERSION, _EV_GRAPH, _EV_SUMMARY} & event.keys()):
            self._skip("explain or unknown event")
        return step, wall, graph, values

    def _value(self, step: int, wall: float, raw: Raw) -> Optional[MsItem]:
        if not isinstance(raw, bytes):
            raise WireError("a summary value is not a message")
        value = fields(raw)
        tag = text(value, _V_TAG)
        if _V_SCALAR in value:
            return MsScalar(step, wall, tag, float32(first(value, _V_SCALAR)))
        if _V_IMAGE in value:
            return MsImage(step, wall, tag, blob(value, _V_IMAGE))
        if _V_TENSOR in value:
            return MsTensor(step, wall, tag, tensor_array(message(value, _V_TENSOR)))
        if _V_HISTOGRAM in value:
            return _histogram(step, wall, tag, message(value, _V_HISTOGRAM))
        self._skip("loss landscape or unknown value")
        return None


def lineage_hparams(path: PathLike) -> dict[str, Union[bool, int, float, str]]:
    """The training hyperparameters a ``*_lineage`` file records (empty if none).

    From ``TrainLineage``: optimizer, learning rate, loss function, epochs, parallel
    mode, device count, batch size, dataset size and network name. A record that does
    not decode is skipped.
    """
    out: dict[str, Union[bool, int, float, str]] = {}
    for payload in RecordReader(path).read():
        try:
            out.update(_train_lineage(fields(payload)))
        except (WireError, ValueError, OverflowError):
            continue
    return out


def _train_lineage(event: Fields) -> dict[str, Union[bool, int, float, str]]:
    out: dict[str, Union[bool, int, float, str]] = {}
    if 6 not in event:
        return out
    lineage = message(event, 6)
    hyper, dataset, algorithm = message(lineage, 1), message(lineage, 2), message(lineage, 3)
    strings = {"optimizer": (hyper, 1), "loss_function": (hyper, 3)}
    strings |= {"parallel_mode": (hyper, 5), "network": (algorithm, 1)}
    for name, (msg, number) in strings.items():
        if number in msg:
            out[name] = text(msg, number)
    ints = {"epoch": (hyper, 4), "device_num": (hyper, 6), "batch_size": (hyper, 8)}
    ints["train_dataset_size"] = (dataset, 2)
    for name, (msg, number) in ints.items():
        if number in msg:
            out[name] = signed(first(msg, number))
    if 2 in hyper:
        out["learning_rate"] = round(float32(first(hyper, 2)), 9)
    return out
