"""What a MindSpore summary takes: values checked as MindSpore checks them, its
``export_options`` and ``max_file_size``, and the data of the network's summary
operators (``ops.ScalarSummary``, ...), read where MindSpore's ``SummaryRecord`` reads
it. Shared by :class:`~mindwatch.mindspore.SummaryRecord` and
:class:`~mindwatch.mindspore.SummaryCollector`.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from mindwatch.common.i18n import N_
from mindwatch.config import MonitorConfig

__all__ = [
    "ALL_PLUGINS",
    "UNRECORDED_PLUGINS",
    "VALUE_PLUGINS",
    "check_export_options",
    "drop_network_summaries",
    "network_summaries",
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
    "LANDSCAPE": N_("TensorBoard has no loss-landscape view"),
}
ALL_PLUGINS = (*VALUE_PLUGINS, "graph", *UNRECORDED_PLUGINS)
_EXPORT_FORMATS = {"tensor_format": ("npy", None)}
_MIN_FILE_SIZE = 1024  # mindwatch's writer rotates at no less
# MindSpore's summary operators name their data "<tag>[:<Type>]".
_OPERATOR_PLUGINS = {
    "Scalar": "scalar",
    "Image": "image",
    "Tensor": "tensor",
    "Histogram": "histogram",
}


def summary_array(plugin: str, name: str, value: Any) -> np.ndarray[Any, Any]:
    """``value`` (a Tensor, numpy array or number) as a numpy copy, checked for
    ``plugin`` as MindSpore checks it: a scalar has one element, an image is an NCHW
    batch with 1 or 3 channels, a tensor or histogram is not 0-d."""
    if hasattr(value, "asnumpy"):
        array = np.array(value.asnumpy(), copy=True)
    elif isinstance(value, (np.ndarray, np.generic, int, float)) and not isinstance(value, bool):
        array = np.array(value, copy=True)
    else:
        raise TypeError(
            f"For 'SummaryRecord', the parameter 'value' of {name!r} expects a Tensor, a "
            f"numpy array or a number, but got {type(value).__name__}"
        )
    if plugin == "scalar" and array.size != 1:
        raise ValueError(
            f"For 'SummaryRecord', the scalar {name!r} must hold one value, but got shape "
            f"{array.shape}; use plugin 'tensor' or 'histogram' for more"
        )
    if plugin == "image" and (array.ndim != 4 or array.shape[1] not in (1, 3) or not array.size):
        raise ValueError(
            f"For 'SummaryRecord', the image {name!r} must be an NCHW batch with 1 or 3 "
            f"channels, but got shape {array.shape}"
        )
    if plugin in ("tensor", "histogram") and array.ndim == 0:
        raise ValueError(
            f"For 'SummaryRecord', the {plugin} {name!r} should not be empty (0-d); "
            "use plugin 'scalar' for one value"
        )
    if plugin == "histogram" and array.dtype.kind not in "biuf":
        raise TypeError(f"For 'SummaryRecord', the histogram {name!r} is not numeric")
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
    """``config`` with MindSpore's ``max_file_size`` (None: the config's own)."""
    if max_file_size is None:
        return config
    if max_file_size < _MIN_FILE_SIZE:
        raise ValueError(
            f"max_file_size must be at least {_MIN_FILE_SIZE} bytes (a file per few "
            f"events), got {max_file_size}; pass None for no limit"
        )
    return config.model_copy(update={"max_file_size": max_file_size})


def check_export_options(options: Any) -> Optional[dict[str, Optional[str]]]:
    """MindSpore's check of ``export_options`` (same errors)."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise TypeError(
            f"For 'SummaryRecord', 'export_options' should be a dict or None, "
            f"but got {type(options).__name__}"
        )
    unexpected = set(options) - set(_EXPORT_FORMATS)
    if unexpected:
        raise ValueError(
            f'For "SummaryRecord", the keys {unexpected} of "export_options" are unsupported, '
            f"expect the follow keys: {list(_EXPORT_FORMATS)}"
        )
    for key, fmt in options.items():
        if fmt not in _EXPORT_FORMATS[key]:
            raise ValueError(
                f'For "SummaryRecord", the export_format {fmt!r} of "export_options" is '
                f"unsupported for {key}, expect the follow values: {list(_EXPORT_FORMATS[key])}"
            )
    return dict(options)
