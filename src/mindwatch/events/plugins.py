"""Builders for the summaries of ``SummaryWriter``'s other plugins, as torch's and
tensorboardX's write them: scalars in the tensor form, histograms bucketed by numpy's
``bins``, images, audio, text, PR curves, custom-scalars layouts, hparams sessions,
and the projector's files.

Each returns serialized ``Summary.Value`` entries framed as ``Summary.value`` fields
(:func:`~mindwatch.events.summaries.value_bytes`), for
:meth:`mindwatch.Monitor.log_values`; the projector writes files, not events. What they
write decodes to the same plugin data as ``tensorboardX.summary``'s builders for the
same inputs (the tests compare them): a run written by either looks the same in
TensorBoard. They use tensorboard's own protobuf classes (no TensorFlow) and take numpy
arrays (the front converts framework tensors first).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from mindwatch.events.summaries import value_bytes

Array = npt.NDArray[Any]

__all__ = [
    "TF_BINS",
    "audio_value",
    "custom_scalars_value",
    "embedding_files",
    "histogram_raw_value",
    "hparams_summaries",
    "image_array",
    "image_value",
    "numpy_histogram_value",
    "pr_curve_raw_value",
    "pr_curve_value",
    "scalar_tensor_value",
    "tensor_value",
    "text_summary_value",
    "to_hwc",
]


def _tf_bins() -> list[float]:
    """TensorFlow's histogram edges (torch's and tensorboardX's ``bins='tensorflow'``):
    +-1e-12 growing by 10 % up to 1e20, and 0."""
    v, buckets = 1e-12, []
    while v < 1e20:
        buckets.append(v)
        v *= 1.1
    return [-b for b in reversed(buckets)] + [0.0] + buckets


TF_BINS = _tf_bins()
_MAX_PR_THRESHOLDS = 127  # torch and tensorboardX cap it there (a protobuf limit, they say)


def scalar_tensor_value(tag: str, value: float, *, double: bool = False) -> bytes:
    """``add_scalar(new_style=True)``: the scalar as a tensor of the scalars plugin."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto

    if double:
        tensor = TensorProto(double_val=[value], dtype="DT_DOUBLE")
    else:
        tensor = TensorProto(float_val=[value], dtype="DT_FLOAT")
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    return value_bytes(Summary.Value(tag=tag, tensor=tensor, metadata=metadata))


def tensor_value(tag: str, array: Array) -> bytes:
    """``add_tensor``: the array as a ``TensorProto`` (TensorBoard's own encoder), under
    the ``tensor`` plugin, as torch files it."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.util import tensor_util

    if array.nbytes >= 1 << 31:  # a protobuf message holds at most 2 GiB
        raise ValueError(
            f"tensor '{tag}' holds {array.nbytes} bytes, beyond a protobuf's 2 GiB; log a "
            "slice or statistics of it"
        )
    tensor = tensor_util.make_tensor_proto(array)
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="tensor"))
    return value_bytes(Summary.Value(tag=tag, tensor=tensor, metadata=metadata))


def numpy_histogram_value(
    tag: str, values: Array, bins: Any = "tensorflow", max_bins: Optional[int] = None
) -> bytes:
    """A histogram bucketed as torch's and tensorboardX's ``add_histogram`` buckets it:
    ``np.histogram(values, bins)`` (``'tensorflow'``: TensorFlow's edges), merged down to
    ``max_bins``, trimmed to the buckets that hold values plus an empty one on the left."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    data = np.asarray(values, dtype=float).reshape(-1)
    if data.size == 0:
        raise ValueError(f"histogram '{tag}': the values are empty")
    if isinstance(bins, str) and bins == "tensorflow":
        bins = TF_BINS
    if not np.isfinite(data).all():
        raise ValueError(
            f"histogram '{tag}': the values hold NaN or Inf, which numpy cannot bucket "
            "(as with torch's SummaryWriter); log their count with add_scalar instead"
        )
    counts, limits = np.histogram(data, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        sub = len(counts) // max_bins
        rest = len(counts) % sub
        if rest:
            counts = np.pad(counts, [[0, sub - rest]], mode="constant", constant_values=0)
        counts = counts.reshape(-1, sub).sum(axis=-1)
        merged = np.empty((counts.size + 1,), limits.dtype)
        merged[:-1] = limits[:-1:sub]
        merged[-1] = limits[-1]
        limits = merged
    filled = np.cumsum(np.greater(counts, 0))
    start, end = np.searchsorted(filled, [0, filled[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1 : end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start : end + 1]
    histo = HistogramProto(
        min=data.min(),
        max=data.max(),
        num=len(data),
        sum=data.sum(),
        sum_squares=data.dot(data),
        bucket_limit=limits.tolist(),
        bucket=counts.tolist(),
    )
    return value_bytes(Summary.Value(tag=tag, histo=histo))


def histogram_raw_value(
    tag: str,
    *,
    minimum: float,
    maximum: float,
    num: float,
    total: float,
    sum_squares: float,
    bucket_limits: Sequence[float],
    bucket_counts: Sequence[float],
) -> bytes:
    """``add_histogram_raw``: a histogram bucketed by the caller (right edges, counts)."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary

    if len(bucket_limits) != len(bucket_counts):
        raise ValueError(
            f"histogram '{tag}': {len(bucket_limits)} bucket_limits for "
            f"{len(bucket_counts)} bucket_counts; give one right edge per bucket "
            "(np.histogram's edges[1:])"
        )
    histo = HistogramProto(
        min=minimum,
        max=maximum,
        num=num,
        sum=total,
        sum_squares=sum_squares,
        bucket_limit=[float(x) for x in bucket_limits],
        bucket=[float(x) for x in bucket_counts],
    )
    return value_bytes(Summary.Value(tag=tag, histo=histo))


def _grid(images: Array, ncols: int = 8) -> Array:
    """NCHW images (1 or 3 channels) side by side, ``ncols`` a row: one CHW image."""
    if images.shape[1] == 1:
        images = np.concatenate([images, images, images], 1)
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be N x (1 or 3) x H x W, got shape {images.shape}")
    count, _, height, width = images.shape
    ncols = min(count, ncols)
    nrows = math.ceil(count / ncols)
    canvas = np.zeros((3, height * nrows, width * ncols), dtype=images.dtype)
    for i in range(count):
        y, x = divmod(i, ncols)
        canvas[:, y * height : (y + 1) * height, x * width : (x + 1) * width] = images[i]
    return canvas


def to_hwc(array: Array, dataformats: str) -> Array:
    """An image (``CHW``, ``HWC``, ``HW``...) or a batch (``NCHW``, ``NHWC``) as one HWC
    image, a batch laid out in a grid of 8 a row (what torch's ``add_images`` shows)."""
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or not set(fmt) <= set("NCHW"):
        raise ValueError(f"dataformats '{dataformats}': use the letters N, C, H, W once each")
    if array.ndim != len(fmt):
        raise ValueError(
            f"an image of shape {array.shape} does not match dataformats '{dataformats}'"
        )
    if len(fmt) == 4:
        grid = _grid(array.transpose([fmt.find(c) for c in "NCHW"]))
        return grid.transpose(1, 2, 0)
    if len(fmt) == 3:
        if "N" in fmt:
            raise ValueError(f"dataformats '{dataformats}': a single image has no N")
        hwc = array.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([hwc, hwc, hwc], 2) if hwc.shape[2] == 1 else hwc
    if fmt in ("HW", "WH"):
        hw = array.transpose([fmt.find(c) for c in "HW"])
        return np.stack([hw, hw, hw], 2)
    raise ValueError(f"dataformats '{dataformats}': expected CHW, HWC, HW, NCHW or NHWC")


def image_array(array: Array, dataformats: str) -> Array:
    """An image as uint8 HWC pixels: uint8 as it is, other types scaled by 255 (values
    in [0, 1]) and clipped, as torch does."""
    hwc = to_hwc(array, dataformats)
    scale = 1 if hwc.dtype == np.uint8 else 255
    return (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)


def image_value(tag: str, pixels: Array) -> bytes:
    """A PNG image of ``pixels`` (uint8, HWC with 1, 3 or 4 channels)."""
    from PIL import Image
    from tensorboard.compat.proto.summary_pb2 import Summary

    height, width, channels = pixels.shape
    if channels not in (1, 3, 4):
        raise ValueError(f"image '{tag}': {channels} channels; use 1, 3 or 4")
    picture = Image.fromarray(pixels[:, :, 0] if channels == 1 else pixels)
    with io.BytesIO() as out:
        picture.save(out, format="PNG")
        png = out.getvalue()
    image = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png)
    return value_bytes(Summary.Value(tag=tag, image=image))


def audio_value(tag: str, samples: Array, sample_rate: int) -> bytes:
    """Mono audio in [-1, 1] as a 16-bit WAV (Python's ``wave``, as torch writes it)."""
    import wave

    from tensorboard.compat.proto.summary_pb2 import Summary

    array = np.asarray(samples, dtype=float).squeeze()
    if array.ndim != 1:
        raise ValueError(f"audio '{tag}': expected one channel of samples, got shape {array.shape}")
    if array.size and abs(array).max() > 1:
        array = array.clip(-1, 1)
    pcm = (array * np.iinfo(np.int16).max).astype("<i2")
    with io.BytesIO() as out:
        with wave.open(out, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            wav.writeframes(pcm.tobytes())
        encoded = out.getvalue()
    audio = Summary.Audio(
        sample_rate=sample_rate,
        num_channels=1,
        length_frames=pcm.shape[-1],
        encoded_audio_string=encoded,
        content_type="audio/wav",
    )
    return value_bytes(Summary.Value(tag=tag, audio=audio))


def text_summary_value(tag: str, text: str) -> bytes:
    """``add_text``: markdown under ``<tag>/text_summary``, as torch and tensorboardX name it."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData

    plugin = SummaryMetadata.PluginData(
        plugin_name="text", content=TextPluginData(version=0).SerializeToString()
    )
    tensor = TensorProto(
        dtype="DT_STRING",
        string_val=[text.encode("utf-8")],
        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
    )
    return value_bytes(
        Summary.Value(
            tag=f"{tag}/text_summary",
            metadata=SummaryMetadata(plugin_data=plugin),
            tensor=tensor,
        )
    )


def _pr_value(tag: str, data: Array, num_thresholds: int) -> bytes:
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData

    content = PrCurvePluginData(version=0, num_thresholds=num_thresholds).SerializeToString()
    metadata = SummaryMetadata(
        plugin_data=SummaryMetadata.PluginData(plugin_name="pr_curves", content=content)
    )
    tensor = TensorProto(
        dtype="DT_FLOAT",
        float_val=data.reshape(-1).tolist(),
        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=n) for n in data.shape]),
    )
    return value_bytes(Summary.Value(tag=tag, metadata=metadata, tensor=tensor))


def pr_curve_value(
    tag: str,
    labels: Array,
    predictions: Array,
    num_thresholds: int = 127,
    weights: Optional[Array] = None,
) -> bytes:
    """``add_pr_curve``: TP, FP, TN, FN, precision and recall at ``num_thresholds``
    thresholds over [0, 1] (at most 127), from binary labels and predicted probabilities."""
    num_thresholds = min(int(num_thresholds), _MAX_PR_THRESHOLDS)
    if num_thresholds < 2:
        raise ValueError(f"pr curve '{tag}': num_thresholds must be >= 2, got {num_thresholds}")
    predictions = np.asarray(predictions)
    weight: Any = 1.0 if weights is None else np.asarray(weights, dtype=np.float64)
    buckets = np.int32(np.floor(predictions * (num_thresholds - 1)))
    positive = np.asarray(labels).astype(np.float64)
    span = (0, num_thresholds - 1)
    tp_buckets, _ = np.histogram(
        buckets, bins=num_thresholds, range=span, weights=positive * weight
    )
    fp_buckets, _ = np.histogram(
        buckets, bins=num_thresholds, range=span, weights=(1.0 - positive) * weight
    )
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(1e-7, tp + fp)
    recall = tp / np.maximum(1e-7, tp + fn)
    return _pr_value(tag, np.stack((tp, fp, tn, fn, precision, recall)), num_thresholds)


def pr_curve_raw_value(tag: str, counts: Sequence[Any], num_thresholds: int = 127) -> bytes:
    """``add_pr_curve_raw``: the six rows (TP, FP, TN, FN, precision, recall) as given."""
    num_thresholds = min(int(num_thresholds), _MAX_PR_THRESHOLDS)
    rows = [np.asarray(row, dtype=np.float64).reshape(-1) for row in counts]
    if len({row.size for row in rows}) != 1:
        raise ValueError(
            f"pr curve '{tag}': the six rows differ in length "
            f"({', '.join(str(row.size) for row in rows)}); give one value per threshold"
        )
    return _pr_value(tag, np.stack(rows), num_thresholds)


def custom_scalars_value(layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> bytes:
    """``add_custom_scalars``: ``{category: {title: ['Multiline', [tags]] or ['Margin',
    [value, lower, upper]]}}`` as the CUSTOM SCALARS dashboard's layout."""
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.custom_scalar import layout_pb2

    categories = []
    for category, charts in layout.items():
        made = []
        for title, (kind, tags) in charts.items():
            if kind == "Margin":
                if len(tags) != 3:
                    raise ValueError(
                        f"custom scalars chart '{title}': a Margin chart takes three tags "
                        f"[value, lower, upper], got {len(tags)}"
                    )
                series = layout_pb2.MarginChartContent.Series(
                    value=tags[0], lower=tags[1], upper=tags[2]
                )
                chart = layout_pb2.Chart(
                    title=title, margin=layout_pb2.MarginChartContent(series=[series])
                )
            else:
                multiline = layout_pb2.MultilineChartContent(tag=list(tags))
                chart = layout_pb2.Chart(title=title, multiline=multiline)
            made.append(chart)
        categories.append(layout_pb2.Category(title=category, chart=made))
    tensor = TensorProto(
        dtype="DT_STRING",
        string_val=[layout_pb2.Layout(category=categories).SerializeToString()],
        tensor_shape=TensorShapeProto(),
    )
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="custom_scalars"))
    return value_bytes(
        Summary.Value(tag="custom_scalars__config__", tensor=tensor, metadata=metadata)
    )


HParam = Union[bool, int, float, str, None]


def hparams_summaries(
    hparams: Mapping[str, HParam],
    metrics: Sequence[str],
    domains: Optional[Mapping[str, Sequence[Any]]] = None,
) -> list[bytes]:
    """``add_hparams``: the experiment (which hparams and metrics exist), this session's
    values and its end (success), as three ``Summary.Value`` entries, in that order.

    Numbers are float64 hparams, ``bool`` a bool, ``str`` a string (as tensorboardX;
    torch files a bool as a number); ``None`` is left out. ``domains``: the discrete
    values an hparam takes (torch's ``hparam_domain_discrete``).
    """
    from google.protobuf import struct_pb2
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    domains = domains or {}
    for key, options in domains.items():
        if key not in hparams or not isinstance(options, list):
            raise TypeError(
                f"hparam_domain_discrete['{key}'] must be a list of the values hparam "
                f"'{key}' takes (and '{key}' one of the hparams)"
            )
    infos, start = [], plugin_data_pb2.SessionStartInfo()
    for key, value in hparams.items():
        if value is None:
            continue
        if isinstance(value, str):
            start.hparams[key].string_value = value
            kind = "DATA_TYPE_STRING"
            field = "string_value"
        elif isinstance(value, bool):
            start.hparams[key].bool_value = value
            kind, field = "DATA_TYPE_BOOL", "bool_value"
        elif isinstance(value, (int, float)):
            start.hparams[key].number_value = float(value)
            kind, field = "DATA_TYPE_FLOAT64", "number_value"
        else:
            raise TypeError(
                f"hparam '{key}' must be a bool, number or string, got {type(value).__name__}"
            )
        discrete = None
        if key in domains:
            discrete = struct_pb2.ListValue(
                values=[struct_pb2.Value(**{field: option}) for option in domains[key]]
            )
        infos.append(
            api_pb2.HParamInfo(
                name=key, type=api_pb2.DataType.Value(kind), domain_discrete=discrete
            )
        )

    def entry(tag: str, data: Any) -> bytes:
        plugin = SummaryMetadata.PluginData(
            plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString()
        )
        return value_bytes(Summary.Value(tag=tag, metadata=SummaryMetadata(plugin_data=plugin)))

    version = metadata.PLUGIN_DATA_VERSION
    experiment = api_pb2.Experiment(
        hparam_infos=infos,
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag)) for tag in metrics],
    )
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
    return [
        entry(
            metadata.EXPERIMENT_TAG,
            plugin_data_pb2.HParamsPluginData(experiment=experiment, version=version),
        ),
        entry(
            metadata.SESSION_START_INFO_TAG,
            plugin_data_pb2.HParamsPluginData(session_start_info=start, version=version),
        ),
        entry(
            metadata.SESSION_END_INFO_TAG,
            plugin_data_pb2.HParamsPluginData(session_end_info=end, version=version),
        ),
    ]


def embedding_files(
    run_folder: Path,
    projector: Any,
    mat: Array,
    *,
    metadata: Optional[Sequence[Any]],
    label_img: Optional[Array],
    step: int,
    tag: str,
    metadata_header: Optional[Sequence[str]],
) -> Path:
    """``add_embedding``: ``<step:05>/<tag>/tensors.tsv`` (and ``metadata.tsv``,
    ``sprite.png``) in the run folder, and the embedding added to ``projector`` (a
    ``ProjectorConfig``), rewritten as the run's ``projector_config.pbtxt`` (what the
    PROJECTOR tab reads). Returns the embedding's folder."""
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo

    if mat.ndim != 2:
        raise ValueError(f"embedding '{tag}': mat must be 2-D (points x dims), got {mat.shape}")
    # torch's folder name for the tag: %, / and \ escaped, nothing else.
    safe = tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")
    subdir = f"{step:05d}/{safe}"
    folder = run_folder / subdir
    folder.mkdir(parents=True, exist_ok=True)
    info = EmbeddingInfo(tensor_name=f"{tag}:{step:05d}", tensor_path=f"{subdir}/tensors.tsv")
    if metadata is not None:
        rows = list(metadata)
        if len(rows) != mat.shape[0]:
            raise ValueError(
                f"embedding '{tag}': {len(rows)} metadata rows for {mat.shape[0]} points"
            )
        if metadata_header:
            lines = ["\t".join(str(e) for e in row) for row in [list(metadata_header), *rows]]
        else:
            lines = [str(row) for row in rows]
        (folder / "metadata.tsv").write_text("".join(f"{line}\n" for line in lines), "utf-8")
        info.metadata_path = f"{subdir}/metadata.tsv"
    if label_img is not None:
        if label_img.ndim != 4 or label_img.shape[0] != mat.shape[0]:
            raise ValueError(
                f"embedding '{tag}': label_img must be N x C x H x W with one image per "
                f"point, got {label_img.shape} for {mat.shape[0]} points"
            )
        _sprite(label_img, folder / "sprite.png")
        info.sprite.image_path = f"{subdir}/sprite.png"
        info.sprite.single_image_dim.extend([label_img.shape[3], label_img.shape[2]])
    with open(folder / "tensors.tsv", "w", encoding="utf-8") as out:
        for row in mat:
            out.write("\t".join(str(x.item()) for x in row) + "\n")
    projector.embeddings.extend([info])
    (run_folder / "projector_config.pbtxt").write_text(
        text_format.MessageToString(projector), "utf-8"
    )
    return folder


def _sprite(images: Array, path: Path) -> None:
    """The projector's sprite: the images in a square grid, row by row (pixels in [0, 1])."""
    from PIL import Image

    ncols = math.ceil(images.shape[0] ** 0.5)
    grid = _grid(images, ncols=ncols).transpose(1, 2, 0)
    side = grid.shape[1]
    square = np.zeros((side, side, 3))
    square[: grid.shape[0], :, :] = grid
    Image.fromarray(np.uint8((square * 255).clip(0, 255))).save(path, format="PNG")
