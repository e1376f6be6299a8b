"""What a MindSpore summary takes: values checked as MindSpore checks them (its
arguments: :mod:`mindwatch.mindspore.summary_checks`), ``max_file_size``, and the data
of the network's summary operators (``ops.ScalarSummary``, ...), read where MindSpore's
``SummaryRecord`` reads it. Shared by :class:`~mindwatch.mindspore.SummaryRecord` and
:class:`~mindwatch.mindspore.SummaryCollector`.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np

from mindwatch.common.i18n import N_, _
from mindwatch.config import MonitorConfig

__all__ = [
    "ALL_PLUGINS",
    "LINEAGE_TYPES",
    "MIN_FILE_SIZE",
    "UNRECORDED_PLUGINS",
    "VALUE_PLUGINS",
    "drop_network_summaries",
    "network_summaries",
    "note_small_file_size",
    "summary_array",
    "with_file_size",
]

# The plugins add_value writes, and the ones MindSpore also accepts that TensorBoard has
# no view for (each told once, with what to use instead).
VALUE_PLUGINS = ("scalar", "image", "tensor", "histogram")
UNRECORDED_PLUGINS = {
    "train_lineage": N_(
        "the MindSpore callback records the optimizer, learning rate, batch size and "
        "epochs as the run's hparams (HPARAMS tab); Monitor.log_hparams adds more"
    ),
    "eval_lineage": N_(
        "evaluation results are written as eval/<metric> by "
        "mindwatch.mindspore.TrainingMonitor, or Monitor.log_eval"
    ),
    "custom_lineage_data": N_(
        "pass the values to Monitor.log_hparams, or as hparams in the config"
    ),
    "dataset_graph": N_("TensorBoard has no view of a dataset pipeline"),
    "landscape": N_("TensorBoard has no loss-landscape view"),
}
# The lineage plugins' value types, as MindSpore checks them (mindspore.train.lineage_pb2).
LINEAGE_TYPES = {
    "train_lineage": "TrainLineage",
    "eval_lineage": "EvaluationLineage",
    "dataset_graph": "DatasetGraph",
    "custom_lineage_data": "UserDefinedInfo",
}
# MindSpore's own list, as its "no such plugin" error prints it.
ALL_PLUGINS = (
    "tensor, scalar, image, histogram, train_lineage, eval_lineage, dataset_graph, "
    "custom_lineage_data, graph, landscape"
)
MIN_FILE_SIZE = 1024  # mindwatch's writer rotates at no less
# MindSpore's summary operators name their data "<tag>[:<Type>]".
_OPERATOR_PLUGINS = {
    "Scalar": "scalar",
    "Image": "image",
    "Tensor": "tensor",
    "Histogram": "histogram",
}


def summary_array(plugin: str, name: str, value: Any) -> np.ndarray[Any, Any]:
    """``value`` (a Tensor, numpy array or number) as a numpy copy, checked for
    ``plugin`` as MindSpore checks it, with its exception and message (then what was
    wrong with which value): a scalar has one element, an image has 4 dimensions (NCHW),
    a tensor or histogram is not 0-d. What MindSpore takes here and cannot draw (an
    image without 1 or 3 channels, an empty one) is dropped when written, with a
    warning, as MindSpore logs it."""
    if hasattr(value, "asnumpy"):
        array = np.array(value.asnumpy(), copy=True)
    elif isinstance(value, (np.ndarray, np.generic, int, float)) and not isinstance(value, bool):
        array = np.array(value, copy=True)
    else:
        raise TypeError(
            f'For "SummaryRecord", the parameter "value" expect to be Tensor, but got '
            f"{type(value).__name__} (for {name!r}; mindwatch also takes a numpy array or a "
            "Python number)"
        )
    if plugin == "scalar" and array.size != 1:
        raise ValueError(
            f'For "SummaryRecord", the v rank must be less than or equal to 1, but got '
            f"{len(array)}. The scalar {name!r} has shape {array.shape}: a scalar is one "
            "value; use plugin 'tensor' or 'histogram' for more."
        )
    if plugin == "image" and array.ndim != 4:
        raise ValueError(
            'For "SummaryRecord", the tensor seems not to hold a valid image. The image '
            f"{name!r} has shape {array.shape}: an image is an NCHW batch (4 dimensions)."
        )
    if plugin in ("tensor", "histogram") and array.ndim == 0:
        raise ValueError(
            f'For "SummaryRecord", the value should not be empty. The {plugin} {name!r} is '
            "0-d (one value): use plugin 'scalar' for it."
        )
    return array


def network_summaries() -> list[tuple[str, str, Any]]:
    """What the network's summary operators produced since the last call, as
    ``(plugin, tag, tensor)``; MindSpore's own ``SummaryRecord`` takes them from the same
    place (its private cache, read the way it reads it). Empty if this MindSpore keeps
    them elsewhere. On Ascend, MindSpore first waits for the step's data to arrive
    (``_sync_summary_data``); this does not, so there a step's operator data may be
    written at the next record."""
    try:
        from mindspore.train.summary import summary_record as ms_record
    except ImportError:  # pragma: no cover - a MindSpore without summary support
        return []
    ms_record._record_summary_tensor_data()
    found = []
    for name, tensor in ms_record._get_summary_tensor_data().items():
        tag, _sep, kind = str(name).rpartition("[:")
        plugin = _OPERATOR_PLUGINS.get(kind.rstrip("]"))
        if tag and plugin is not None and not tag.startswith("_step_end_flag_"):
            found.append((plugin, tag, tensor))
    return found


def drop_network_summaries() -> None:
    """Forget what the summary operators produced since the last read, unread (a step
    that is not collected): PyNative appends every step's to a list until it is read."""
    try:
        from mindspore.ops.operations import debug_ops
    except ImportError:  # pragma: no cover
        return
    cache = getattr(debug_ops, "SUMMARY_TENSOR_CACHE", None)
    if isinstance(cache, list) and cache:
        cache.clear()


def with_file_size(config: MonitorConfig, max_file_size: Optional[int]) -> MonitorConfig:
    """``config`` with MindSpore's ``max_file_size`` (None: the config's own); a size
    below mindwatch's least (1,024 bytes, a file per few events) is raised to it: the
    caller has warned."""
    if max_file_size is None:
        return config
    return config.model_copy(update={"max_file_size": max(max_file_size, MIN_FILE_SIZE)})


def note_small_file_size(max_file_size: Optional[int], log: logging.Logger) -> None:
    """Warn that a ``max_file_size`` MindSpore takes is below what mindwatch rotates at
    (MindSpore would stop writing there; mindwatch drops nothing recorded)."""
    if max_file_size is not None and 0 <= max_file_size < MIN_FILE_SIZE:
        log.warning(
            _(
                "mindwatch: max_file_size {size} is below {least} bytes: event files are "
                "rotated at {least} bytes instead (MindSpore would stop writing at {size}; "
                "mindwatch drops nothing recorded)"
            ).format(size=max_file_size, least=MIN_FILE_SIZE)
        )
