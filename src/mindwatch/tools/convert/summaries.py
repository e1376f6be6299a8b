"""``mindwatch convert`` for MindSpore's summary files (``SummaryCollector``, ``SummaryRecord``).

Every folder at or below the source that holds ``*_MS`` files becomes one TensorBoard
run at the same relative place below the destination; its files are read in name
(= creation time) order. What each summary kind becomes:

========================  ===================================================================
MindSpore                 TensorBoard
========================  ===================================================================
scalar                    scalar (wall time and step kept)
histogram (buckets)       histogram / distribution; NaN and inf counts, which TensorBoard
                          cannot show in a histogram, as the scalar ``<tag>/nonfinite``
                          from the first step that has any
image                     image (the PNG as MindSpore encoded it)
tensor                    one element: scalar; more: histogram of its values, and up to
                          1,000 values as a text table ``<tag>/values``
graph                     the GRAPHS tab (:mod:`mindwatch.mssummary.graph`)
``*_lineage``             the run's HPARAMS: optimizer, learning rate, batch size, ...
loss landscape, explain   skipped and counted (TensorBoard has no view for them)
========================  ===================================================================

Tags are made recognisable unless ``raw_tags``: MindSpore's type suffixes
(``[:Scalar]``) go, ``loss/auto`` becomes ``train/loss`` (the name ``mindwatch report``,
``compare`` and ``watch`` read), a parameter histogram ``conv.weight/auto`` becomes
``parameters/conv.weight`` (as mindwatch names its own), and other ``<name>/auto`` become
``<name>``.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from mindwatch.common.waits import wait_seconds
from mindwatch.events.summaries import (
    bucket_histogram_value,
    histogram_value,
    hparams_session_values,
    image_value,
    text_value,
)
from mindwatch.events.writer import EventFileWriter
from mindwatch.mssummary.format import (
    MsGraph,
    MsHistogram,
    MsImage,
    MsItem,
    MsScalar,
    MsTensor,
    SummaryFileReader,
    is_summary_file,
    lineage_hparams,
)
from mindwatch.mssummary.graph import graph_def_bytes
from mindwatch.mssummary.tables import TEXT_VALUES_LIMIT, markdown_table, values_tag

__all__ = [
    "SummaryConversion",
    "convert_summaries",
    "find_summary_folders",
    "summary_destinations",
    "tensorboard_tag",
]

log = logging.getLogger(__name__)

_TYPE_SUFFIX = re.compile(r"\[:(Scalar|Image|Tensor|Histogram)\]$")


@dataclass
class SummaryConversion:
    """What :func:`convert_summaries` found and wrote."""

    runs: list[str] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    kinds: Counter[str] = field(default_factory=Counter)  # scalars, histograms, ...
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # by reason

    @property
    def points(self) -> int:
        return sum(self.kinds.values())


def tensorboard_tag(tag: str, kind: str, *, raw: bool = False) -> str:
    """The TensorBoard tag for a MindSpore summary tag (see the module doc)."""
    if raw:
        return tag
    tag = _TYPE_SUFFIX.sub("", tag)
    if not tag.endswith("/auto"):
        return tag
    name = tag[: -len("/auto")]
    if name == "loss":
        return "train/loss"
    if kind == "histogram":
        return f"parameters/{name}"
    return name


def find_summary_folders(source: Path) -> list[Path]:
    """Folders at or below ``source`` (or ``source``'s folder, for a file) with ``*_MS`` files."""
    if source.is_file():
        return [source.parent] if is_summary_file(source.name) else []
    found = []
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames.sort()
        if any(is_summary_file(name) for name in filenames):
            found.append(Path(dirpath))
    return found


def summary_destinations(source: Path, dst: Path) -> list[Path]:
    """The run folders :func:`convert_summaries` writes for ``source``."""
    root = source.parent if source.is_file() else source
    return [dst / folder.relative_to(root) for folder in find_summary_folders(source)]


class _RunConverter:
    """One summary folder -> one TensorBoard run."""

    def __init__(self, folder: Path, dst: Path, only: Optional[str], raw_tags: bool) -> None:
        self.folder = folder
        self.only = only  # a single file to convert, or every *_MS file of the folder
        self.raw_tags = raw_tags
        self.writer = EventFileWriter(dst, flush_secs=0.5)
        self.readers: dict[str, SummaryFileReader] = {}
        self.hparams_written = False
        self.nonfinite_tags: set[str] = set()

    def poll(self, out: SummaryConversion) -> None:
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            names = []
        for name in names:
            wanted = is_summary_file(name) and (self.only is None or name == self.only)
            if wanted and name not in self.readers:
                self.readers[name] = SummaryFileReader(self.folder / name)
        for reader in self.readers.values():
            before = reader.records.stats.records
            for item in reader.read():
                self._write(item, out)
            out.records += reader.records.stats.records - before
        if not self.hparams_written:
            self._write_lineage(names, out)

    def finish(self, out: SummaryConversion) -> None:
        for reader in self.readers.values():
            out.skipped.update(reader.skipped)
            if reader.corrupt_records:
                out.skipped["damaged record"] += reader.corrupt_records
            try:
                unread = reader.records.path.stat().st_size - reader.records.offset
            except OSError:
                unread = 0
            if unread > 0:  # a writer that died mid-record, or one still writing
                out.skipped["incomplete last record"] += 1
        self.writer.close()

    def _write_lineage(self, names: list[str], out: SummaryConversion) -> None:
        hparams: dict[str, bool | int | float | str] = {}
        for name in names:
            if name.endswith("_lineage"):
                hparams.update(lineage_hparams(self.folder / name))
        if hparams:
            self.writer.add_values(0, hparams_session_values(hparams))
            out.kinds["hparam sets"] += 1
            self.hparams_written = True

    def _tag(self, tag: str, kind: str, out: SummaryConversion) -> str:
        converted = tensorboard_tag(tag, kind, raw=self.raw_tags)
        out.tags.add(converted)
        return converted

    def _write(self, item: MsItem, out: SummaryConversion) -> None:
        writer = self.writer
        if isinstance(item, MsScalar):
            tag = self._tag(item.tag, "scalar", out)
            writer.add_scalar(tag, item.value, item.step, item.wall_time)
            out.kinds["scalars"] += 1
        elif isinstance(item, MsHistogram):
            tag = self._tag(item.tag, "histogram", out)
            writer.add_values(item.step, [_histogram(tag, item)], item.wall_time)
            out.kinds["histograms"] += 1
            nonfinite = item.nan_count + item.pos_inf_count + item.neg_inf_count
            if nonfinite or tag in self.nonfinite_tags:  # from the first one on, 0s too
                self.nonfinite_tags.add(tag)
                writer.add_scalar(f"{tag}/nonfinite", nonfinite, item.step, item.wall_time)
        elif isinstance(item, MsImage):
            tag = self._tag(item.tag, "image", out)
            try:
                value = image_value(tag, item.encoded)
            except Exception:  # a damaged image message: protobuf's DecodeError
                out.skipped["undecodable image"] += 1
                return
            writer.add_values(item.step, [value], item.wall_time)
            out.kinds["images"] += 1
        elif isinstance(item, MsTensor):
            self._write_tensor(item, out)
        elif isinstance(item, MsGraph):
            try:
                graph = graph_def_bytes(item.graph)
            except Exception as exc:  # WireError, and protobuf's errors for odd values
                out.skipped["undecodable graph"] += 1
                log.warning("mindwatch: %s: a graph does not convert (%s)", self.folder, exc)
                return
            writer.add_graph(graph, item.wall_time)
            out.kinds["graphs"] += 1

    def _write_tensor(self, item: MsTensor, out: SummaryConversion) -> None:
        tag = self._tag(item.tag, "tensor", out)
        values = item.values
        if values.size == 1:
            self.writer.add_scalar(tag, float(values.reshape(-1)[0]), item.step, item.wall_time)
            out.kinds["scalars"] += 1
            return
        numeric = values.astype(np.float64) if values.dtype.kind in "biuf" else None
        if numeric is None or numeric.size == 0:
            out.skipped["empty or non-numeric tensor"] += 1
            return
        self.writer.add_values(item.step, [histogram_value(tag, numeric)], item.wall_time)
        if values.size <= TEXT_VALUES_LIMIT:
            table = markdown_table(values)
            self.writer.add_values(item.step, [text_value(values_tag(tag), table)], item.wall_time)
        out.kinds["tensors"] += 1


def _histogram(tag: str, item: MsHistogram) -> bytes:
    if not item.count.size:
        return bucket_histogram_value(tag, [], [], minimum=0.0, maximum=0.0, total=0.0)
    return bucket_histogram_value(
        tag,
        (item.left + item.width).tolist(),
        item.count.tolist(),
        minimum=item.min,
        maximum=item.max,
        total=item.sum,
    )


def convert_summaries(
    source: Path,
    dst: Path,
    *,
    raw_tags: bool = False,
    follow: bool = False,
    interval: float = 1.0,
    stop: Optional[Callable[[], bool]] = None,
) -> SummaryConversion:
    """Convert the MindSpore summary files at or below ``source`` into runs below ``dst``.

    ``source`` may be one ``*_MS`` file (only it is converted), a summary folder, or a
    folder of summary folders. With ``follow``, keeps converting what is appended and
    folders that appear later, until ``stop()`` is true or Ctrl-C.
    """
    out = SummaryConversion()
    root = source.parent if source.is_file() else source
    only = source.name if source.is_file() else None
    runs: dict[Path, _RunConverter] = {}
    try:
        while True:
            for folder in find_summary_folders(source):
                if folder not in runs:
                    relative = folder.relative_to(root)
                    runs[folder] = _RunConverter(folder, dst / relative, only, raw_tags)
                    out.runs.append(relative.as_posix())
                runs[folder].poll(out)
            finished = not follow or (stop is not None and stop())
            if finished:
                break
            for run in runs.values():
                run.writer.flush()
            time.sleep(wait_seconds(interval))
    except KeyboardInterrupt:
        pass
    finally:
        for run in runs.values():
            run.finish(out)
    return out
