"""``SummaryRecord``: MindSpore's ``SummaryRecord``, writing TensorBoard event files.

    from mindwatch.mindspore import SummaryRecord   # was: from mindspore import SummaryRecord

    with SummaryRecord("./summary_dir") as summary_record:
        summary_record.add_value("scalar", "grad_norm", grad_norm)
        summary_record.record(step)

The signature, the plugins and the errors are MindSpore 2.10's; what is written is
TensorBoard's format, through a :class:`mindwatch.Monitor`, so the run gets its
``run.json``, the console line, the rules and the exporters like any other. Each
``record(step)`` is one step of the run (``perf/step_time_ms`` comes with it). What
each plugin becomes in TensorBoard:

==============  ===================================================================
``add_value``   TensorBoard
==============  ===================================================================
``scalar``      SCALARS, under ``name`` as given
``histogram``   HISTOGRAMS and DISTRIBUTIONS
``image``       IMAGES: the NCHW batch on one canvas, as MindSpore draws it
``tensor``      one element: a scalar; more: a histogram of its values and, up to
                1,000 values, a text table ``<name>/values``
                (:mod:`mindwatch.mssummary.tables`); ``export_options=
                {"tensor_format": "npy"}`` also saves it as MindSpore does
``graph``       GRAPHS (also ``network=``: the compiled graph, at the first record)
lineage, ...    not recorded: one warning names what to use instead
==============  ===================================================================

Values may be MindSpore Tensors, numpy arrays or Python numbers (MindSpore takes
Tensors only); a Tensor is read once, when it is added. The summary operators in the
network (``ops.ScalarSummary``, ``ops.HistogramSummary``, ...) are recorded at each
``record`` in ``train`` mode, as MindSpore does.

What differs from MindSpore, on purpose: the files are named as TensorBoard needs
(``events.out.tfevents.*``; TensorBoard reads no other name), so ``file_prefix`` and
``file_suffix`` are checked and then unused; ``max_file_size`` starts a new file instead
of stopping the writing (each file stays below it, nothing is lost); ``num_process`` is
unused (one background thread writes); several instances may be open at once (each
writes its own run folder).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional, Union
from urllib.parse import quote

import numpy as np

from mindwatch.common.i18n import _
from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig
from mindwatch.events.summaries import histogram_value, text_value
from mindwatch.events.writer import PathLike
from mindwatch.mindspore.summary_checks import (
    check_file_affixes,
    check_record_file_size,
    make_directory,
    process_export_options,
    validator_check_type,
)
from mindwatch.mindspore.summary_images import image_summary_value
from mindwatch.mindspore.summary_values import (
    ALL_PLUGINS,
    LINEAGE_TYPES,
    UNRECORDED_PLUGINS,
    VALUE_PLUGINS,
    network_summaries,
    note_small_file_size,
    summary_array,
    with_file_size,
)
from mindwatch.monitor import Monitor
from mindwatch.mssummary.graph import graph_def_bytes
from mindwatch.mssummary.tables import TEXT_VALUES_LIMIT, markdown_table, values_tag

__all__ = ["SummaryRecord"]

log = logging.getLogger(__name__)


class SummaryRecord:
    """MindSpore's ``SummaryRecord(log_dir, ...)``, writing a TensorBoard run.

    Args:
        log_dir: the run folder (created; an unwritable one raises
            :class:`~mindwatch.LogDirError` here).
        file_prefix: checked as MindSpore checks them (strings); the files
            are named as TensorBoard reads them (``events.out.tfevents.*``).
        file_suffix: see ``file_prefix``.
        num_process: accepted for MindSpore's signature; one background thread writes.
        network: a Cell whose compiled graph goes to the GRAPHS tab at the first
            :meth:`record`.
        max_file_size: each event file stays below this many bytes: a new one is
            started (MindSpore stops writing instead). At least 1024.
        raise_exception: raise a RuntimeError from :meth:`record`, :meth:`flush` and
            :meth:`close` when a file could not be written (by default, as in
            MindSpore, the error is logged and training goes on).
        export_options: ``{"tensor_format": "npy"}`` also saves each ``tensor`` value as
            ``<log_dir>/export_<time>/tensor/<name>_<step>.npy``, as MindSpore does.
        config: mindwatch's own settings (a :class:`~mindwatch.MonitorConfig`, a dict
            or a YAML path): rules, alerts, Prometheus, ...
        monitor: an existing :class:`~mindwatch.Monitor` to write through instead (its
            steps are the caller's: :meth:`record` does not log one, and :meth:`close`
            flushes it without closing it).
    """

    def __init__(  # noqa: PLR0917 - MindSpore's positional signature
        self,
        log_dir: PathLike,
        file_prefix: str = "events",
        file_suffix: str = "_MS",
        num_process: int = 32,
        network: Any = None,
        max_file_size: Optional[int] = None,
        raise_exception: bool = False,
        export_options: Optional[dict[str, Optional[str]]] = None,
        *,
        config: Union[MonitorConfig, Mapping[str, Any], str, Path, None] = None,
        monitor: Optional[Monitor] = None,
    ) -> None:
        # MindSpore's checks, in its order (the folder first: it is created even when a
        # later argument is wrong, as MindSpore creates it).
        make_directory(log_dir, "log_dir")
        max_file_size = check_record_file_size(max_file_size)
        check_file_affixes(file_prefix, file_suffix)
        self._warn = WarnOnce(log)
        if max_file_size is not None and max_file_size < 0:
            # MindSpore's meaning: no limit, with a warning.
            self._warn(
                "max_file_size",
                _("mindwatch: SummaryRecord: max_file_size {size} is negative: no limit").format(
                    size=max_file_size
                ),
            )
            max_file_size = None
        validator_check_type("raise_exception", raise_exception, bool)
        self._export = process_export_options(export_options)
        note_small_file_size(max_file_size, log)
        self.file_prefix = file_prefix
        self.file_suffix = file_suffix
        self.network = network
        self.max_file_size = max_file_size
        self.raise_exception = raise_exception
        self._owns_monitor = monitor is None
        if monitor is None:
            monitor = Monitor(
                log_dir, with_file_size(MonitorConfig.from_any(config), max_file_size)
            )
        self.monitor = monitor
        self.base_log_dir = os.fspath(log_dir)
        self._mode = "train"
        self._pending: dict[str, dict[str, np.ndarray[Any, Any]]] = {}
        self._graph_pending = network is not None
        self._export_dir: Optional[Path] = None
        if self._export and self._export.get("tensor_format"):
            self._export_dir = Path(self.monitor.logdir) / f"export_{int(time.time())}"
        # Writer counters cost ~16 us to gather: read only when they may raise.
        self._errors = self._write_errors() if raise_exception else 0
        self._closed = False

    # ---------------------------------------------------------------- MindSpore's API

    def __enter__(self) -> SummaryRecord:
        if self._closed:
            raise ValueError(
                'For "SummaryRecord", SummaryRecord has been closed, please check if '
                "close() method is called"
            )
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        """Close; leaving on an exception closes the run as ``failed`` (``run.json``),
        with everything recorded written."""
        if exc is not None and self._owns_monitor and not self._closed:
            self._closed = True
            self.monitor.abort(exc)
            return
        self.close()

    def set_mode(self, mode: str) -> None:
        """``'train'`` or ``'eval'``; in ``'eval'`` the network's summary operators are
        not recorded (MindSpore's meaning)."""
        if mode not in ("train", "eval"):
            raise ValueError(
                f'For "SummaryRecord.set_mode", {mode!r} is not a recognized mode, expect '
                'the parameter "mode" is "train" or "eval"'
            )
        self._mode = mode

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        """Add a value to be written at the next :meth:`record` (the newest one per
        ``plugin`` and ``name`` wins, as in MindSpore).

        ``plugin``: ``scalar``, ``image`` (NCHW), ``tensor``, ``histogram`` or
        ``graph`` (a MindSpore ``GraphProto``); MindSpore's lineage and landscape
        plugins are accepted and not recorded (one warning each).
        """
        if plugin in VALUE_PLUGINS:
            if not name or not isinstance(name, str):
                raise ValueError(
                    'For "SummaryRecord", the parameter "name" type should be str, '
                    f"but got {type(name)}."
                    + (" The name is empty: pass a tag such as 'loss'." if name == "" else "")
                )
            array = summary_array(plugin, name, value)
            pending = self._pending.setdefault(plugin, {})
            if name in pending:
                self._warn(
                    f"duplicate:{plugin}:{name}",
                    _(
                        "mindwatch: SummaryRecord.add_value: {entry!r} was added twice "
                        "before record(); only the newest one is recorded"
                    ).format(entry=f"{name}/{plugin}"),
                )
            pending[name] = array
        elif plugin in tuple(LINEAGE_TYPES):
            from mindspore.train import lineage_pb2

            expected = getattr(lineage_pb2, LINEAGE_TYPES[plugin])
            if not isinstance(value, expected):
                raise TypeError(f"Plugin {plugin!r} expects a {expected.__name__} value.")
            self._tell_unrecorded(plugin)
        elif plugin == "graph":
            self._write_graph(graph_proto_bytes(value))
        elif plugin == "landscape":
            if not hasattr(value, "SerializeToString"):  # MindSpore serializes it here
                raise AttributeError(
                    f"'{type(value).__name__}' object has no attribute 'SerializeToString'"
                )
            self._tell_unrecorded(plugin)
        else:
            raise ValueError(
                f'For "SummaryRecord.add_value", no such "plugin" of {plugin!r} , expect '
                f"value is one of [{ALL_PLUGINS}]"
            )

    def _tell_unrecorded(self, plugin: str) -> None:
        self._warn(
            f"plugin:{plugin}",
            _(
                "mindwatch: SummaryRecord.add_value({plugin!r}, ...) is not recorded: "
                "TensorBoard has no view for it. Instead: {instead}"
            ).format(plugin=plugin, instead=_(UNRECORDED_PLUGINS[plugin])),
        )

    def record(
        self,
        step: int,
        train_network: Any = None,
        plugin_filter: Optional[Callable[[str], bool]] = None,
    ) -> bool:
        """Write what was added since the last call (and, in ``train`` mode, what the
        network's summary operators produced) at ``step``; ``plugin_filter(plugin)``
        chooses the plugins written (the rest is dropped). False if closed."""
        if isinstance(step, np.integer):
            step = int(step)  # mindwatch also takes numpy's integers
        validator_check_type("step", step, int)
        if train_network is not None:
            from mindspore.nn import Cell

            validator_check_type("train_network", train_network, [Cell, type(None)])
        if self._closed:
            self._warn(
                "closed",
                _("mindwatch: SummaryRecord.record({step}) after close(): nothing written").format(
                    step=step
                ),
            )
            return False
        if self._graph_pending:
            self._record_graph(train_network)
        if self._mode == "train":
            self._add_network_summaries(step)
        pending, self._pending = self._pending, {}
        if plugin_filter is not None:
            pending = {p: values for p, values in pending.items() if plugin_filter(p)}
        self._write(step, pending)
        if self._owns_monitor and (self.monitor.last_step is None or step > self.monitor.last_step):
            # One record is one step of the run: its time, its rules, its progress line.
            self.monitor.log_step(step)
        self._check_errors()
        return True

    def flush(self) -> None:
        """Block until everything recorded so far is handed to the OS."""
        if self._closed:
            self._warn(
                "closed-flush",
                _("mindwatch: SummaryRecord.flush() after close(): nothing to flush"),
            )
            return
        self.monitor.flush()
        self._check_errors()

    def close(self) -> None:
        """Write everything and close the run (``run.json`` says ``finished``); a monitor
        passed in is flushed, not closed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_monitor:
            self.monitor.close()
        else:
            self.monitor.flush()
        self._check_errors()

    @property
    def log_dir(self) -> str:
        """The event file written now (MindSpore's meaning: the log file's full path)."""
        files = self.monitor.stats.files
        return files[-1] if files else os.fspath(self.monitor.logdir)

    # ---------------------------------------------------------------- writing

    def _write(self, step: int, pending: Mapping[str, Mapping[str, np.ndarray[Any, Any]]]) -> None:
        monitor = self.monitor
        scalars = {name: float(a.reshape(-1)[0]) for name, a in pending.get("scalar", {}).items()}
        values: list[bytes] = []
        for name, array in pending.get("tensor", {}).items():
            if array.size == 1:
                scalars[name] = float(array.reshape(-1)[0])
            elif array.dtype.kind in "biuf":
                values.append(histogram_value(name, array.astype(np.float64)))
                if array.size <= TEXT_VALUES_LIMIT:
                    values.append(text_value(values_tag(name), markdown_table(array)))
            self._export_tensor(name, step, array)
        for name, array in pending.get("image", {}).items():
            if array.shape[1] not in (1, 3) or 0 in array.shape:
                # MindSpore takes it in add_value, then logs an error and writes nothing.
                self._warn(
                    f"image:{name}",
                    _(
                        "mindwatch: SummaryRecord: the image {name!r} of shape {shape} is "
                        "not written: an image is an NCHW batch with 1 or 3 channels and no "
                        "empty dimension (MindSpore drops it too)"
                    ).format(name=name, shape=array.shape),
                )
                continue
            values.append(image_summary_value(name, array))
        if scalars:
            monitor.log_scalars(step, scalars)
        for name, array in pending.get("histogram", {}).items():
            monitor.log_histogram(name, array, step)
        if values:
            monitor.log_values(step, values)

    def _export_tensor(self, name: str, step: int, array: np.ndarray[Any, Any]) -> None:
        """MindSpore's ``tensor_format: npy`` export: ``<name>_<step>.npy``."""
        if self._export_dir is None:
            return
        folder = self._export_dir / "tensor"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            np.save(folder / f"{quote(name, safe='')}_{step}.npy", array)
        except OSError as exc:
            if self.raise_exception:
                raise RuntimeError(f"SummaryRecord: cannot export {name!r}: {exc}") from exc
            self._warn(
                "export",
                _("mindwatch: SummaryRecord: cannot export tensors to {folder}: {error}").format(
                    folder=folder, error=exc
                ),
            )

    def _add_network_summaries(self, step: int) -> None:
        """The summary operators' data, added as MindSpore adds it (errors are logged:
        a network's summaries never stop training)."""
        try:
            found = network_summaries()
        except Exception as exc:
            self._warn(
                "operators",
                _("mindwatch: SummaryRecord: cannot read the summary operators: {error!r}").format(
                    error=exc
                ),
            )
            return
        for plugin, tag, tensor in found:
            try:
                self.add_value(plugin, tag, tensor)
            except (TypeError, ValueError) as exc:
                self._warn(f"operator:{tag}", "mindwatch: %s", exc)

    def _record_graph(self, train_network: Any) -> None:
        """The network's compiled graph, once (MindSpore: at the first record)."""
        try:
            from mindspore.common.api import _cell_graph_executor

            proto = _cell_graph_executor.get_optimize_graph_proto(self.network)
            if proto is None and train_network is not None:
                proto = _cell_graph_executor.get_optimize_graph_proto(train_network)
        except Exception as exc:  # a MindSpore that keeps its graphs elsewhere
            self._graph_pending = False
            self._warn(
                "graph",
                _("mindwatch: SummaryRecord: cannot read the compiled graph: {error!r}").format(
                    error=exc
                ),
            )
            return
        if proto is None:
            return  # not compiled yet (PyNative, or before the first step): next time
        self._graph_pending = False
        from mindspore.train.anf_ir_pb2 import ModelProto

        model = ModelProto()
        model.ParseFromString(proto)  # the executor's ModelProto holds the GraphProto
        self._write_graph(model.graph.SerializeToString())

    def _write_graph(self, proto: bytes) -> None:
        if not self.monitor.writes_shared:
            return
        try:
            graph = graph_def_bytes(proto)
        except Exception as exc:
            self._warn(
                "graph",
                _("mindwatch: SummaryRecord: the graph does not convert: {error}").format(
                    error=exc
                ),
            )
            return
        self.monitor.writer.add_graph(graph)

    def _write_errors(self) -> int:
        return int(self.monitor.stats.write_errors)

    def _check_errors(self) -> None:
        if not self.raise_exception:
            return  # the Monitor warns about a failing write itself (once)
        errors = self._write_errors()
        if errors > self._errors:
            self._errors = errors
            if self.raise_exception:
                raise RuntimeError(
                    f"SummaryRecord: {errors} write error(s) in {self.monitor.logdir} "
                    "(raise_exception=True); the warnings above say which"
                )


def graph_proto_bytes(value: Any) -> bytes:
    """The serialized ``GraphProto`` of ``add_value('graph', value)``: MindSpore 2.10
    takes a serialized ``ModelProto`` (what ``Cell.get_func_graph_proto()`` returns) and
    raises its parser's TypeError for anything else; mindwatch also takes a
    ``GraphProto`` or ``ModelProto`` message (MindSpore's docstring names a GraphProto)."""
    from mindspore.train.anf_ir_pb2 import GraphProto, ModelProto

    if isinstance(value, GraphProto):
        return bytes(value.SerializeToString())
    if isinstance(value, ModelProto):
        return bytes(value.graph.SerializeToString())
    model = ModelProto()
    model.ParseFromString(value)
    return bytes(model.graph.SerializeToString())
