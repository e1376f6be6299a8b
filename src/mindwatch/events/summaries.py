"""Builders for the rarer summary kinds: histograms, text, hparams and custom-scalars
plugin data.

These are not on the per-step hot path, so they use tensorboard's own protobuf classes
(available without TensorFlow) and return serialized ``Summary.Value`` entries framed
for :func:`mindwatch.events.encoding.encode_summary_values`. Heavy work (bucketing a
weight tensor) is meant to run on the writer's background thread: the writer calls
these builders there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np

from mindwatch.events.encoding import varint

__all__ = [
    "HParamValue",
    "bucket_histogram_value",
    "custom_scalars_layout_value",
    "histogram_value",
    "hparams_config_values",
    "hparams_session_end_values",
    "hparams_session_values",
    "image_value",
    "text_value",
    "value_bytes",
]

HParamValue = Union[bool, int, float, str]
DEFAULT_BUCKETS = 30


def value_bytes(value: Any) -> bytes:
    """Frame a ``Summary.Value`` protobuf as a ``Summary.value`` field entry."""
    raw: bytes = value.SerializeToString()
    return b"\x0a" + varint(len(raw)) + raw


def histogram_value(tag: str, data: Any, buckets: int = DEFAULT_BUCKETS) -> bytes:
    """Return a ``Summary.Value`` holding a ``HistogramProto`` of ``data``.

    Buckets are uniform between the finite min and max, computed in the data's own
    float precision with ``np.bincount`` (about 2.5x faster than ``np.histogram`` over
    TensorFlow's 1,549 exponential edges, and no float64 copy of a big weight matrix).
    Non-finite elements are left out of the buckets; ``num`` counts only finite ones.
    The legacy ``histo`` field is used because both TensorBoard's server and its
    ``EventAccumulator.Histograms`` read it.
    """
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    arr = np.asarray(data).reshape(-1)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"histogram '{tag}': expected numbers, got dtype {arr.dtype}")
    if arr.dtype.kind != "f" or arr.itemsize < 4:
        arr = arr.astype(np.float32)  # float16 / ints: bucket in float32, not float64
    histo = HistogramProto()
    finite = arr
    if arr.size and not (np.isfinite(arr.min()) and np.isfinite(arr.max())):
        finite = arr[np.isfinite(arr)]  # the mask costs a pass: only when needed
    if finite.size:
        lo, hi = float(finite.min()), float(finite.max())
        histo.min, histo.max, histo.num = lo, hi, float(finite.size)
        histo.sum = float(finite.sum(dtype=np.float64))
        # Not np.dot: BLAS leaves its threads spinning after the call, and on a small
        # machine they slow the training steps that run meanwhile.
        histo.sum_squares = float(np.square(finite, dtype=np.float64).sum())
        if hi > lo:
            scale = buckets / (hi - lo)
            scaled = ((finite - finite.dtype.type(lo)) * finite.dtype.type(scale)).astype(np.int32)
            np.minimum(scaled, buckets - 1, out=scaled)
            counts = np.bincount(scaled, minlength=buckets)
            edges = lo + (hi - lo) * np.arange(1, buckets + 1) / buckets
            histo.bucket_limit.extend(edges.tolist())
            histo.bucket.extend(counts.astype(np.float64).tolist())
        else:
            histo.bucket_limit.append(hi)
            histo.bucket.append(float(finite.size))
    return value_bytes(Summary.Value(tag=tag, histo=histo))


def bucket_histogram_value(
    tag: str,
    right_edges: Sequence[float],
    counts: Sequence[float],
    *,
    minimum: float,
    maximum: float,
    total: float,
) -> bytes:
    """Return a ``Summary.Value`` holding an already bucketed histogram.

    ``right_edges[i]`` closes bucket ``i`` (TensorBoard's ``bucket_limit``); the first
    bucket opens at ``minimum`` and the last closes at ``maximum``, which is how
    TensorBoard draws a legacy histogram. ``sum_squares`` is unknown and left 0 (no
    TensorBoard view uses it).
    """
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    histo = HistogramProto(min=minimum, max=maximum, num=float(sum(counts)), sum=total)
    histo.bucket_limit.extend(float(edge) for edge in right_edges)
    histo.bucket.extend(float(count) for count in counts)
    return value_bytes(Summary.Value(tag=tag, histo=histo))


def image_value(tag: str, image: bytes) -> bytes:
    """Return a ``Summary.Value`` holding ``image``, a serialized ``Summary.Image``."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    return value_bytes(Summary.Value(tag=tag, image=Summary.Image.FromString(image)))


def import_text_support() -> None:
    """Import what :func:`text_value` needs, on the caller's thread.

    The value is built on the writer's thread, possibly while the interpreter exits,
    when an import that registers an ``atexit`` hook (TensorBoard's plugins do) fails:
    the writer imports on the first ``add_text`` instead.
    """
    import tensorboard.plugins.text.summary_v2  # noqa: F401


def import_histogram_support() -> None:
    """Import what :func:`histogram_value` needs, on the caller's thread (see above)."""
    import tensorboard.compat.proto.summary_pb2  # noqa: F401


def import_layout_support() -> None:
    """Import what :func:`custom_scalars_layout_value` needs, on the caller's thread."""
    import tensorboard.plugins.custom_scalar.layout_pb2
    import tensorboard.plugins.custom_scalar.metadata  # noqa: F401


def custom_scalars_layout_value(layout: Any) -> bytes:
    """Return the ``Summary.Value`` of a ``custom_scalar.layout_pb2.Layout``: the charts
    of TensorBoard's CUSTOM SCALARS dashboard.

    What ``tensorboard.plugins.custom_scalar.summary.pb`` writes, without the
    TensorFlow it imports: a string tensor under ``custom_scalars__config__``.
    """
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.compat.proto.types_pb2 import DT_STRING
    from tensorboard.plugins.custom_scalar import metadata

    tensor = TensorProto(
        dtype=DT_STRING, tensor_shape=TensorShapeProto(), string_val=[layout.SerializeToString()]
    )
    return value_bytes(
        Summary.Value(
            tag=metadata.CONFIG_SUMMARY_TAG,
            metadata=metadata.create_summary_metadata(),
            tensor=tensor,
        )
    )


def text_value(tag: str, text: str) -> bytes:
    """Return a ``Summary.Value`` that TensorBoard's TEXT tab shows (markdown)."""
    from tensorboard.plugins.text.summary_v2 import text_pb

    summary = text_pb(tag, np.array(text, dtype=object))
    return value_bytes(summary.value[0])


def hparams_config_values(
    hparams: Mapping[str, HParamValue], metric_tags: Sequence[str] = ()
) -> list[bytes]:
    """Return the experiment-level hparams ``Summary.Value``: which hparams and metrics exist."""
    from tensorboard.plugins.hparams import summary_v2 as hp

    summary = hp.hparams_config_pb(
        hparams=[hp.HParam(name) for name in hparams],
        metrics=[hp.Metric(tag) for tag in metric_tags],
    )
    return [value_bytes(v) for v in summary.value]


def hparams_session_values(
    hparams: Mapping[str, HParamValue], start_time_secs: float | None = None
) -> list[bytes]:
    """Return the session-start hparams ``Summary.Value``: this run's hparam values.

    Written into the run's own event file, it makes the run itself a session of
    TensorBoard's HPARAMS dashboard (no extra sub-run); with no experiment summary
    anywhere, TensorBoard infers the table's columns from all runs' sessions and their
    scalar tags, so runs written separately still compare side by side.
    """
    from tensorboard.plugins.hparams import summary_v2 as hp

    summary = hp.hparams_pb(dict(hparams), start_time_secs=start_time_secs)
    return [value_bytes(v) for v in summary.value]


def hparams_session_end_values(success: bool, end_time_secs: float) -> list[bytes]:
    """Return the session-end hparams ``Summary.Value`` (status shown in HPARAMS)."""
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2, summary_v2

    info = plugin_data_pb2.SessionEndInfo(
        status=api_pb2.STATUS_SUCCESS if success else api_pb2.STATUS_FAILURE,
        end_time_secs=end_time_secs,
    )
    data = plugin_data_pb2.HParamsPluginData(session_end_info=info, version=0)
    summary = summary_v2._summary_pb(metadata.SESSION_END_INFO_TAG, data)
    return [value_bytes(v) for v in summary.value]
