"""``mindwatch.SummaryWriter``: ``torch.utils.tensorboard.SummaryWriter``'s API on a
:class:`~mindwatch.Monitor`, for training code that already logs that way.

    from mindwatch import SummaryWriter      # was: from torch.utils.tensorboard import ...

    writer = SummaryWriter()                 # runs/<Mon DD_HH-MM-SS>_<host>
    for step, (data, label) in enumerate(dataset.create_tuple_iterator(), start=1):
        loss = train_step(data, label)       # a MindSpore Tensor
        writer.add_scalar("loss", loss, step)
    writer.close()

The constructor takes torch's arguments (and tensorboardX's ``logdir=`` and
``write_to_disk``) and the methods take torch's arguments in torch's order; values may
be Python numbers, numpy arrays, MindSpore Tensors (read with ``asnumpy()``/``item()``,
once per call) or torch tensors, of every dtype torch's writer takes: a scalar is one
element of any shape (``()``, ``(1,)``, ``(1, 1)``), bfloat16 and float8 are exact
(through float32, where torch goes through float16), and what is not a real number
(several elements, complex, text, a tensor on torch's ``meta`` device) is a TypeError
naming the tag. The folder is made absolute at once (``~`` expanded, bytes decoded,
``file://`` read as a path); a remote store's URL (``s3://``...) is a LogDirError with
the fix (docs/coming-from-pytorch.md: the decisions, value by value and folder by
folder).

A scalar is a training value of the Monitor's: ``add_scalar("loss", v, step)`` is, for
the anomaly rules, the console, Prometheus, ``run.json`` and the cross-rank reduction,
what ``Monitor.log_step(step, loss=v)`` is (``train/loss``; a tag with a ``/`` is its
own name there, as in ``log_step``), while TensorBoard shows the tag as given; each
training step gets its ``perf/step_time_ms`` as with ``log_step``. The call
only checks the value and adds it to the step's row, handed to the Monitor's queue when
the next step begins (at once with ``alerts.stop_on``, so that the rules judge it before
the call returns); the pipeline's thread does the rest. Every other kind
of record is built on the calling thread, as torch builds it, and written by the
writer's thread (:meth:`mindwatch.Monitor.log_values`); what it writes decodes to the
same TensorBoard plugin data as tensorboardX's for the same inputs.

Where torch's method has no meaning here, it raises a ``NotImplementedError`` naming
what to do instead (``add_graph`` of a torch module, ``add_onnx_graph``, ``add_mesh``,
``add_video`` without moviepy...).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, Optional, Union

import numpy as np
import numpy.typing as npt

from mindwatch.aggregate import Collective
from mindwatch.common.i18n import _
from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig, ReduceKind
from mindwatch.events import EventFileWriter
from mindwatch.events import plugins as pb
from mindwatch.events.writer import PathLike, absolute_logdir
from mindwatch.metrics.derived import Timing
from mindwatch.metrics.tags import tag_for
from mindwatch.metrics.values import INT64, number, step_number
from mindwatch.monitor import Monitor
from mindwatch.sinks.items import Scalars

Array = npt.NDArray[Any]

__all__ = ["SummaryWriter"]

log = logging.getLogger(__name__)

Number = Union[int, float]


def default_log_dir(comment: str = "") -> str:
    """torch's default: ``runs/<Mon DD_HH-MM-SS>_<host><comment>``."""
    stamp = datetime.now().strftime("%b%d_%H-%M-%S")
    return str(Path("runs") / f"{stamp}_{socket.gethostname()}{comment}")


def as_array(value: Any, name: str = "values", *, complex_ok: bool = False) -> Array:
    """A MindSpore Tensor (``asnumpy``), a torch tensor, a list of either, or anything
    numpy takes, as a numpy array of real numbers: one read of the device's value.

    torch's dtypes that numpy lacks (``bfloat16``, the ``float8`` kinds) and MindSpore's
    (its ``asnumpy`` gives ml_dtypes' ``bfloat16``) become float32, which holds each of
    their values exactly (torch's writer goes through float16, which turns a bfloat16
    beyond 65504 into inf and one below 6e-8 into 0). A tensor on torch's ``meta``
    device (no values) and complex numbers (TensorBoard shows real ones) are refused
    with an error naming ``name``; torch's writer writes random numbers for the first
    and drops the imaginary part of the second."""
    if type(value) is np.ndarray:
        array = value
    elif hasattr(value, "asnumpy"):  # MindSpore
        array = np.asarray(value.asnumpy())
    elif _is_torch(value):
        array = _torch_array(value, name, complex_ok)
    elif (
        isinstance(value, (list, tuple))
        and value
        and (hasattr(value[0], "asnumpy") or _is_torch(value[0]))
    ):
        array = np.stack([as_array(v, name, complex_ok=complex_ok) for v in value])
    else:
        array = np.asarray(value)
    kind = array.dtype.kind
    if kind == "c" and not complex_ok:
        _complex_values(name, value)
    if kind == "V" and array.dtype.names is None:  # ml_dtypes' bfloat16, float8...
        with contextlib.suppress(TypeError, ValueError):  # not numbers: the reader says so
            array = array.astype(np.float32)
    return array


def _is_torch(value: Any) -> bool:
    """A torch tensor (or Parameter), told without importing torch."""
    return hasattr(value, "detach") and hasattr(value, "cpu") and hasattr(value, "is_meta")


def _torch_array(value: Any, name: str, complex_ok: bool = False) -> Array:
    torch = sys.modules["torch"]  # a torch tensor was made: torch is imported
    tensor = value.detach()
    if tensor.is_meta:
        raise TypeError(
            f"mindwatch: {name} is a tensor on torch's 'meta' device, which has a shape but "
            "no values; log a tensor on a device that holds them (cpu, cuda...)"
        )
    if tensor.is_complex():
        if not complex_ok:
            _complex_values(name, value)
        if tensor.dtype == torch.complex32:  # numpy has no complex32
            tensor = tensor.to(torch.complex64)
    if tensor.is_floating_point() and tensor.dtype not in (
        torch.float16,
        torch.float32,
        torch.float64,
    ):
        tensor = tensor.float()  # bfloat16, float8: numpy has no such type; exact
    try:
        return np.asarray(tensor.cpu().numpy())
    except (TypeError, RuntimeError) as exc:  # sparse, quantized...
        raise TypeError(
            f"mindwatch: cannot read {name}, a torch tensor of {tensor.dtype} "
            f"({tensor.layout}, on {tensor.device}): {exc}. Pass a dense tensor of real "
            "numbers (t.to_dense(), t.dequantize(), t.float())."
        ) from None


def _complex_values(name: str, value: Any) -> NoReturn:
    raise TypeError(
        f"mindwatch: {name} holds complex numbers ({getattr(value, 'dtype', type(value))}), "
        "which TensorBoard does not show; log their real part, imaginary part or "
        "magnitude (abs) instead"
    )


def _walltime(walltime: Any) -> float:
    """A ``walltime`` argument (seconds since the epoch, any real number) as a float."""
    return number("walltime", walltime)


def _hparam(key: str, value: Any) -> Union[bool, str, float, None]:
    """An hparam's value as the HPARAMS table files it: a bool (numpy's too), a str,
    None, or a number (TypeError naming the key otherwise)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    try:
        return number(key, value)
    except TypeError as exc:
        raise TypeError(
            f"mindwatch: hparam '{key}' must be a number, a str, a bool or None, got "
            f"{type(value).__name__}: {value!r:.60} ({exc})"
        ) from None


def _unsupported(method: str, instead: str) -> NoReturn:
    raise NotImplementedError(f"mindwatch.SummaryWriter.{method} is not supported: {instead}")


def _with(config: MonitorConfig, **settings: Any) -> MonitorConfig:
    """``config`` with the settings the constructor's arguments give (checked as the
    config's own: ``flush_secs=-1`` is a ConfigError naming it)."""
    fields = config.model_dump(exclude_unset=True)
    fields.update(settings)
    return MonitorConfig.from_dict(fields)


def _log_dir(log_dir: Optional[PathLike], logdir: Optional[PathLike]) -> Optional[PathLike]:
    """torch's ``log_dir`` or tensorboardX's ``logdir``; an empty one is none, as in
    both (the default folder then)."""
    if logdir is not None:
        if log_dir is not None and log_dir != logdir:
            raise TypeError(
                f"mindwatch: SummaryWriter got log_dir={log_dir!r} and logdir={logdir!r}; "
                "they are the same argument (torch's and tensorboardX's names): pass one"
            )
        log_dir = logdir
    if isinstance(log_dir, (str, bytes)) and not log_dir:
        return None
    return log_dir


class SummaryWriter:
    """Write TensorBoard event files with ``torch.utils.tensorboard``'s API, through a
    :class:`~mindwatch.Monitor`.

    Args:
        log_dir: the run folder; by default ``runs/<Mon DD_HH-MM-SS>_<host><comment>``
            as torch makes it (``logdir=`` as tensorboardX names it). A folder another
            process already wrote a run into is left as it is and this run goes to
            ``<log_dir>-2`` (runs never mix; :meth:`get_logdir` says where); with
            ``purge_step`` it continues that run instead.
        comment: appended to the default folder's name (ignored with ``log_dir``).
        purge_step: this attempt resumes at this step: what an earlier attempt wrote in
            ``log_dir`` from that step on is hidden (TensorBoard's purge marker,
            :meth:`Monitor.mark_resume`).
        max_queue: accepted for torch's code; here events are written by a background
            thread every ``flush_secs`` (or sooner under load) whatever their number,
            and the queue's bound is the config's ``max_queue``.
        flush_secs: the longest a value waits before it reaches the OS (the config's
            ``flush_secs``; None: the config's, 2 s by default, not torch's 120 s).
        filename_suffix: appended to the name of every event file this writer makes,
            the run's and its sub-runs' (``add_scalars``, ``add_hparams``), as torch's
            (the config's ``filename_suffix``).
        write_to_disk: tensorboardX's: False writes nothing at all (no folder, no file,
            no Monitor: :attr:`monitor` raises) and every call is accepted, as the
            ranks that do not write take them (scalars, steps and walltimes are still
            checked; images, histograms... are not built). tensorboardX itself still
            writes ``add_hparams``' sub-run and ``add_embedding``'s files then.
        config: a :class:`~mindwatch.MonitorConfig`, a dict or a YAML path: the rules,
            console, Prometheus... as for ``Monitor``.
        rank: as for ``Monitor``: under ``msrun``
            rank 0 writes the run and rank ``r`` writes ``<run>/rank_<r>/``; with a
            collective, rank 0 writes every scalar reduced across ranks and the other
            ranks write nothing there.
        world_size: see ``rank``.
        collective: see ``rank``.
        reductions: see ``rank``.
    """

    def __init__(
        self,
        log_dir: Optional[PathLike] = None,
        comment: str = "",
        purge_step: Optional[int] = None,
        max_queue: int = 10,
        flush_secs: Optional[float] = None,
        filename_suffix: str = "",
        write_to_disk: bool = True,
        *,
        logdir: Optional[PathLike] = None,
        config: Union[MonitorConfig, Mapping[str, Any], str, Path, None] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        collective: Optional[Collective] = None,
        reductions: Optional[Mapping[str, ReduceKind]] = None,
    ) -> None:
        log_dir = _log_dir(log_dir, logdir)
        cfg = MonitorConfig.from_any(config)
        if log_dir is None:
            log_dir = cfg.logdir if cfg.logdir is not None else default_log_dir(comment)
        settings: dict[str, Any] = {}
        if flush_secs is not None:
            settings["flush_secs"] = flush_secs
        if filename_suffix:
            settings["filename_suffix"] = filename_suffix
        if settings:
            cfg = _with(cfg, **settings)
        if type(max_queue) is not int or max_queue < 1:
            raise ValueError(f"mindwatch: max_queue must be an int >= 1, got {max_queue!r}")
        self.filename_suffix = cfg.filename_suffix
        self._names: dict[str, str] = {}  # a tag as given -> its name for the Monitor
        self._literal: set[str] = set()  # Monitor's names the tags given take
        # Monitor's names the TensorBoard sinks write as the tags given (one dict, shared
        # by every sink, also those of a writer reopened after close()).
        self._tag_names: dict[str, str] = {}
        self._last_step: Optional[int] = None
        self._timed: Optional[int] = None  # the furthest step given a step time
        self._sub_runs: dict[str, EventFileWriter] = {}
        self._projector: Any = None
        self._warn = WarnOnce(log)
        self._rank, self._world_size = rank, world_size
        self._collective, self._reductions = collective, reductions
        self._on_disk = bool(write_to_disk)
        if not self._on_disk:
            self._logdir = absolute_logdir(log_dir)  # checked all the same, not made
            self._closed = True
            return
        self._open(self._new_monitor(log_dir, cfg, resume_step=purge_step))

    def _new_monitor(
        self,
        logdir: PathLike,
        config: MonitorConfig,
        *,
        resume_step: Optional[int] = None,
        resume: Optional[bool] = None,
    ) -> Monitor:
        return Monitor(
            logdir,
            config,
            resume_step=resume_step,
            resume=resume,
            rank=self._rank,
            world_size=self._world_size,
            collective=self._collective,
            reductions=self._reductions,
        )

    def _open(self, mon: Monitor) -> None:
        self._mon = mon
        self._closed = False
        outputs = mon._session.outputs
        sinks = [tb for tb in (outputs.global_tb, outputs.rank_tb) if tb is not None]
        for sink in sinks:
            sink.without_layout()  # its tags would be Monitor's, not the ones written
            sink.tag_names = self._tag_names
        main = outputs.global_tb or outputs.rank_tb
        self._logdir = main.writer.logdir if main is not None else mon.logdir
        self._route_log = mon._route.log
        # The step being gathered: step, wall time, values, timing, and the walltime the
        # caller gave (None: now), which every value of the row shares.
        self._pending: Optional[
            tuple[int, float, dict[str, float], Optional[Timing], Optional[float]]
        ] = None
        self._timing: Optional[Timing] = None  # the new step's, until its row takes it
        route = mon._route
        # A step is one row for the pipeline (its rules, console, reduction), as
        # log_step's: the values of a step are gathered here and handed on when the
        # next step begins, a tag repeats, or at flush/close. Only with alerts.stop_on
        # (and no reduction) each value goes at once, so that the rules judge it
        # before add_scalar returns and a stop takes effect at the step that raised it.
        self._add = (
            self._add_now if route.judge_each_step and mon.aggregator is None else self._gather
        )
        if self._last_step is not None:  # reopened: the steps go on
            mon._started = True
            mon.continue_at(self._last_step)

    @property
    def monitor(self) -> Monitor:
        """The Monitor this writer writes through (reopened if the writer was closed,
        as torch's writer reopens its files)."""
        if self._closed:
            if not self._on_disk:
                raise RuntimeError(
                    "mindwatch: this SummaryWriter was made with write_to_disk=False: it "
                    "writes nothing and has no Monitor; check writer.write_to_disk first"
                )
            self._reopen()
        return self._mon

    @property
    def write_to_disk(self) -> bool:
        """Whether this writer writes (tensorboardX's ``write_to_disk``)."""
        return self._on_disk

    @property
    def _writes(self) -> bool:
        """Whether this process writes the run's records (rank 0's, or each rank's own
        without a collective; never with ``write_to_disk=False``)."""
        return self._on_disk and self.monitor.writes_shared

    def _reopen(self) -> None:
        """A record after :meth:`close`: the run goes on in the same folder (torch's
        tutorial closes its writer and goes on logging)."""
        mon = self._mon
        self._open(self._new_monitor(mon.logdir, mon.config, resume=True))

    def _add_now(
        self, step: int, wall: float, name: str, value: float, walltime: Optional[float]
    ) -> None:
        timing, self._timing = self._timing, None
        self._route_log((step, wall, None, None, None, (name,), (value,), None, None, timing))

    def _gather(
        self, step: int, wall: float, name: str, value: float, walltime: Optional[float]
    ) -> None:
        pending = self._pending
        if (
            pending is None
            or pending[0] != step
            or name in pending[2]
            or walltime != pending[4]  # a row has one wall time: the caller's, or now
        ):
            self._hand_on()
            pending = self._pending = (step, wall, {}, self._timing, walltime)
            self._timing = None
        pending[2][name] = value

    def _hand_on(self) -> None:
        """The gathered step, as one ``log_step`` would have logged it."""
        pending, self._pending = self._pending, None
        if pending is not None:
            step, wall, values, timing, _ = pending
            logged = (step, wall, None, None, None, tuple(values), tuple(values.values()))
            self._route_log((*logged, None, None, timing))

    def _add_reopened(
        self, step: int, wall: float, name: str, value: float, walltime: Optional[float]
    ) -> None:
        self._reopen()
        self._add(step, wall, name, value, walltime)

    # ------------------------------------------------------------------ scalars

    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        """One scalar at ``global_step`` (0 when None); ``walltime``: seconds since the
        epoch (default now). ``new_style``: written in the tensor form (float32, or
        float64 with ``double_precision``), as torch does; the rules, console and
        Prometheus watch values written the default way."""
        name = self._names.get(tag)
        if name is None:
            name = self._name(tag)
        value = scalar_value if type(scalar_value) is float else number(tag, scalar_value)
        if type(global_step) is int and -INT64 <= global_step < INT64:  # the fast path
            step = global_step
        else:  # None, numpy ints, tensors..., and an int beyond int64: refused as _step does
            step = self._step(global_step)
        if walltime is None:
            wall = time.time()
        else:  # any number, as torch's (a numpy float, an int, 0: the epoch itself)
            wall = walltime = walltime if type(walltime) is float else _walltime(walltime)
        if not self._on_disk:
            return
        if new_style:
            entry = pb.scalar_tensor_value(tag, value, double=double_precision)
            self.monitor.log_values(step, [entry], wall)
            return
        if step != self._last_step:
            self._new_step(step)
        if name:
            self._add(step, wall, name, value, walltime)
        else:  # a tag whose Monitor name another tag took: written as it is
            self.monitor._pipeline.item(Scalars(step, [(tag, value)]))

    def _name(self, tag: Any) -> str:
        """The name the Monitor knows ``tag`` by (first use): ``log_step``'s key for it.
        TensorBoard gets ``tag`` itself. Empty if another tag has that name already."""
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"mindwatch: a tag must be a non-empty str, got {tag!r:.60}")
        tag_name = tag_for(tag)
        if tag_name in self._literal:
            other = next(t for t, n in self._names.items() if n and tag_for(n) == tag_name)
            self._warn(
                f"tag {tag}",
                "mindwatch: %s",
                _(
                    "the tags '{tag}' and '{other}' are both {name} for the anomaly rules "
                    "and the console; '{tag}' is written to TensorBoard only"
                ).format(tag=tag, other=other, name=tag_name),
            )
            self._names[tag] = ""
            return ""
        self._literal.add(tag_name)
        if tag_name != tag:  # before the first value reaches the pipeline
            self._tag_names[tag_name] = tag
        self._names[tag] = tag
        return tag

    @staticmethod
    def _step(global_step: Any) -> int:
        return 0 if global_step is None else step_number(global_step, "global_step")

    def _new_step(self, step: int) -> None:
        """The first value of a step: the Monitor's step bookkeeping (run.json's
        ``last_step`` and ``steps_logged``, the hparams with the first step) and the
        step's time (``perf/step_time_ms``, ``perf/steps_per_s``). A training loop logs
        a step's values when its work is done, as it calls ``log_step``, so the time
        since the previous step's first value is the step's. A step behind the furthest
        one timed (an evaluation logged at its epoch's step) gets no time and leaves
        the clock alone: the next training step is timed from the previous one. The
        first step after a reopen (a record after :meth:`close`) starts the new
        Monitor's clock and gets no time: the time before it was not training."""
        reopened = self._closed
        mon = self.monitor
        if self._last_step is None:
            mon._started = True
            mon._session.write_hparams()
        timed = self._timed
        if timed is None or step > timed:
            timing = mon._clock.tick(step)
            self._timing = None if reopened else timing
            self._timed = step
        else:
            self._timing = None
        self._last_step = step
        mon.last_step = step
        mon.steps_logged += 1

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Mapping[str, Any],
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
    ) -> None:
        """Several scalars in one chart: each key ``k`` is its own run,
        ``<log_dir>/<main_tag>_<k>`` (``/`` in main_tag becomes ``_``), holding
        ``main_tag``, as torch writes them."""
        step = self._step(global_step)
        wall = time.time() if walltime is None else _walltime(walltime)
        values = [(key, number(f"{main_tag}/{key}", v)) for key, v in tag_scalar_dict.items()]
        if not self._writes:
            return
        for key, value in values:
            writer = self._sub_run(f"{main_tag.replace('/', '_')}_{key}")
            writer.add_scalar(main_tag, value, step, wall)

    def _sub_run(self, name: str) -> EventFileWriter:
        writer = self._sub_runs.get(name)
        if writer is None:
            cfg = self.monitor.config
            writer = self._sub_runs[name] = EventFileWriter(
                self._logdir / name,
                flush_secs=cfg.flush_secs,
                max_queue=cfg.max_queue,
                max_block_secs=cfg.max_block_secs,
                filename_suffix=self.filename_suffix,
            )
        return writer

    # ------------------------------------------------------------------ other kinds

    def _values(self, global_step: Any, walltime: Optional[float], values: list[bytes]) -> None:
        wall = None if walltime is None else _walltime(walltime)
        step = self._step(global_step)
        if self._on_disk:
            self.monitor.log_values(step, values, wall)

    def add_tensor(
        self,
        tag: str,
        tensor: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
    ) -> None:
        """A whole tensor, as a ``TensorProto`` of TensorBoard's own encoding (read back
        with ``tensorboard.util.tensor_util.make_ndarray``); complex numbers are kept.
        Where torch's encoding differs it is not followed: torch writes float16 halves
        as float32 bit patterns, which TensorBoard reads back as 0, and bfloat16 as
        ``DT_BFLOAT16`` in the same form; here float16 is TensorBoard's ``DT_HALF`` and
        bfloat16 (and float8) values are float32, exactly."""
        if self._writes:
            array = as_array(tensor, "add_tensor's tensor", complex_ok=True)
            self._values(global_step, walltime, [pb.tensor_value(tag, array)])

    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: Optional[int] = None,
        bins: Any = "tensorflow",
        walltime: Optional[float] = None,
        max_bins: Optional[int] = None,
    ) -> None:
        """A histogram of ``values`` with numpy's ``bins`` (``'tensorflow'``: TensorFlow's
        exponential edges; ``'auto'``, ``'fd'``, ``'sqrt'``..., an int, or the edges)."""
        if self._writes:
            entry = pb.numpy_histogram_value(
                tag, as_array(values, "add_histogram's values"), bins, max_bins
            )
            self._values(global_step, walltime, [entry])

    def add_histogram_raw(
        self,
        tag: str,
        min: Number,
        max: Number,
        num: Number,
        sum: Number,
        sum_squares: Number,
        bucket_limits: Any,
        bucket_counts: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
    ) -> None:
        """A histogram already bucketed: ``bucket_limits[i]`` is bucket i's right edge."""
        limits = as_array(bucket_limits, "bucket_limits").reshape(-1).tolist()
        counts = as_array(bucket_counts, "bucket_counts").reshape(-1).tolist()
        entry = pb.histogram_raw_value(
            tag,
            minimum=number("min", min),
            maximum=number("max", max),
            num=number("num", num),
            total=number("sum", sum),
            sum_squares=number("sum_squares", sum_squares),
            bucket_limits=limits,
            bucket_counts=counts,
        )
        self._values(global_step, walltime, [entry])

    def add_image(
        self,
        tag: str,
        img_tensor: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
        dataformats: str = "CHW",
    ) -> None:
        """An image: uint8 in [0, 255], or floats in [0, 1]; ``dataformats`` ``CHW``
        (torch's default), ``HWC``, ``HW``..."""
        if self._writes:
            pixels = pb.image_array(as_array(img_tensor, "img_tensor"), dataformats)
            self._values(global_step, walltime, [pb.image_value(tag, pixels)])

    def add_images(
        self,
        tag: str,
        img_tensor: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
        dataformats: str = "NCHW",
    ) -> None:
        """A batch of images shown as one grid, 8 a row (``NCHW`` or ``NHWC``); a list
        of images of one size with ``dataformats`` ``CHW`` or ``HWC``, as tensorboardX
        takes them."""
        if isinstance(img_tensor, (list, tuple)) and "N" not in dataformats.upper():
            img_tensor = as_array(img_tensor, "img_tensor")  # stacked: a new first axis
            dataformats = "N" + dataformats
        self.add_image(tag, img_tensor, global_step, walltime, dataformats)

    def add_figure(
        self,
        tag: str,
        figure: Any,
        global_step: Optional[int] = None,
        close: bool = True,
        walltime: Optional[float] = None,
    ) -> None:
        """A matplotlib figure (or a list of them, shown as a grid), rendered with Agg;
        ``close``: close the figure(s) after."""
        figures = figure if isinstance(figure, list) else [figure]
        images = np.stack([_render(f, close) for f in figures])
        if isinstance(figure, list):
            self.add_image(tag, images, global_step, walltime, dataformats="NCHW")
        else:
            self.add_image(tag, images[0], global_step, walltime, dataformats="CHW")

    def add_text(
        self,
        tag: str,
        text_string: str,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
    ) -> None:
        """Markdown text (the TEXT tab), under ``<tag>/text_summary`` as torch names it."""
        if not isinstance(text_string, str):
            raise TypeError(f"mindwatch: add_text takes a str, got {type(text_string).__name__}")
        self._values(global_step, walltime, [pb.text_summary_value(tag, text_string)])

    def add_audio(
        self,
        tag: str,
        snd_tensor: Any,
        global_step: Optional[int] = None,
        sample_rate: int = 44100,
        walltime: Optional[float] = None,
    ) -> None:
        """Mono audio, samples in [-1, 1] (clipped), as a 16-bit WAV."""
        if self._writes:
            entry = pb.audio_value(tag, as_array(snd_tensor, "snd_tensor"), int(sample_rate))
            self._values(global_step, walltime, [entry])

    def add_pr_curve(
        self,
        tag: str,
        labels: Any,
        predictions: Any,
        global_step: Optional[int] = None,
        num_thresholds: int = 127,
        weights: Any = None,
        walltime: Optional[float] = None,
    ) -> None:
        """A precision-recall curve from binary ``labels`` and probabilities in [0, 1]."""
        if self._writes:
            entry = pb.pr_curve_value(
                tag,
                as_array(labels, "labels"),
                as_array(predictions, "predictions"),
                num_thresholds,
                None if weights is None else as_array(weights, "weights"),
            )
            self._values(global_step, walltime, [entry])

    def add_pr_curve_raw(
        self,
        tag: str,
        true_positive_counts: Any,
        false_positive_counts: Any,
        true_negative_counts: Any,
        false_negative_counts: Any,
        precision: Any,
        recall: Any,
        global_step: Optional[int] = None,
        num_thresholds: int = 127,
        weights: Any = None,
        walltime: Optional[float] = None,
    ) -> None:
        """A precision-recall curve from counts computed already (one per threshold)."""
        rows = [
            as_array(row, "add_pr_curve_raw's counts")
            for row in (
                true_positive_counts,
                false_positive_counts,
                true_negative_counts,
                false_negative_counts,
                precision,
                recall,
            )
        ]
        self._values(global_step, walltime, [pb.pr_curve_raw_value(tag, rows, num_thresholds)])

    def add_custom_scalars(self, layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> None:
        """The CUSTOM SCALARS dashboard's charts: ``{category: {title: ['Multiline',
        [tags]] or ['Margin', [value, lower, upper]]}}``; call it once per run."""
        self._values(0, None, [pb.custom_scalars_value(layout)])

    def add_custom_scalars_multilinechart(
        self, tags: Sequence[str], category: str = "default", title: str = "untitled"
    ) -> None:
        """One multiline chart of ``tags`` (tensorboardX's shorthand)."""
        self.add_custom_scalars({category: {title: ["Multiline", list(tags)]}})

    def add_custom_scalars_marginchart(
        self, tags: Sequence[str], category: str = "default", title: str = "untitled"
    ) -> None:
        """One margin chart of ``[value, lower, upper]`` (tensorboardX's shorthand)."""
        self.add_custom_scalars({category: {title: ["Margin", list(tags)]}})

    def add_hparams(
        self,
        hparam_dict: Mapping[str, Any],
        metric_dict: Mapping[str, Any],
        hparam_domain_discrete: Optional[Mapping[str, Sequence[Any]]] = None,
        run_name: Optional[str] = None,
        global_step: Optional[int] = None,
        *,
        name: Optional[str] = None,
    ) -> None:
        """One row of the HPARAMS table: a sub-run ``<log_dir>/<run_name>`` (default the
        time) holding the hparams and ``metric_dict``'s values as scalars, as torch
        writes it.

        Hparam values: ``bool`` (a bool hparam; torch files it as a number), ``str``,
        None (left out, as torch does) or any number ``add_scalar`` takes (numpy
        scalars, one-element tensors); metrics: any number ``add_scalar`` takes.
        tensorboardX's form works too: ``name=`` is ``run_name``, and its positional
        order ``add_hparams(hparams, metrics, name, global_step)`` is told apart by the
        third argument being a str (torch's is a dict)."""
        if isinstance(hparam_domain_discrete, str):  # tensorboardX's positional name
            if name is not None:
                raise TypeError(
                    f"mindwatch: add_hparams got the run name twice ({hparam_domain_discrete!r} "
                    f"and name={name!r}); pass one"
                )
            name, hparam_domain_discrete = hparam_domain_discrete, None
            if global_step is None and run_name is not None and not isinstance(run_name, str):
                global_step, run_name = run_name, None  # tensorboardX's fourth: the step
        if name is not None:
            if run_name is not None and run_name != name:
                raise TypeError(
                    f"mindwatch: add_hparams got run_name={run_name!r} and name={name!r}; "
                    "they are the same argument (torch's and tensorboardX's names): pass one"
                )
            run_name = name
        if not isinstance(hparam_dict, Mapping) or not isinstance(metric_dict, Mapping):
            raise TypeError("mindwatch: add_hparams takes two dicts: hparams and metrics")
        hparams = {key: _hparam(key, value) for key, value in hparam_dict.items()}
        metrics = {key: number(key, value) for key, value in metric_dict.items()}
        entries = pb.hparams_summaries(hparams, list(metrics), hparam_domain_discrete)
        if not self._writes:
            return
        step = self._step(global_step)
        name = run_name or str(time.time())
        cfg = self.monitor.config
        with EventFileWriter(
            self._logdir / name,
            flush_secs=cfg.flush_secs,
            filename_suffix=self.filename_suffix,
        ) as writer:
            for entry in entries:
                writer.add_values(step, [entry])
            for key, value in metrics.items():
                writer.add_scalar(key, value, step)

    def add_embedding(
        self,
        mat: Any,
        metadata: Optional[Sequence[Any]] = None,
        label_img: Any = None,
        global_step: Optional[int] = None,
        tag: str = "default",
        metadata_header: Optional[Sequence[str]] = None,
    ) -> None:
        """Points for the PROJECTOR tab: ``mat`` (N x D), a label per point
        (``metadata``, rows of columns with ``metadata_header``) and an image per point
        (``label_img``, N x C x H x W in [0, 1]), written as torch writes them
        (``<step:05>/<tag>/`` and ``projector_config.pbtxt`` in the run folder)."""
        if not self._writes:
            return
        from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

        if self._projector is None:
            self._projector = ProjectorConfig()
        pb.embedding_files(
            self._logdir,
            self._projector,
            as_array(mat, "mat"),
            metadata=metadata,
            label_img=None if label_img is None else as_array(label_img, "label_img"),
            step=self._step(global_step),
            tag=tag,
            metadata_header=metadata_header,
        )

    # ------------------------------------------------------------------ not here

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False,
                  use_strict_trace: bool = True) -> NoReturn:  # fmt: skip
        """Not supported: a torch module's graph has no meaning for a MindSpore run."""
        _unsupported(
            "add_graph",
            "it traces a torch.nn.Module. For a MindSpore network's graph, export it with "
            "mindspore.export(net, *inputs, file_name='net', file_format='MINDIR') and open "
            "net.mindir in Netron, or set mindspore.set_context(save_graphs=True)",
        )

    def add_onnx_graph(self, prototxt: Any) -> NoReturn:
        """Not supported (see :meth:`add_graph`)."""
        _unsupported(
            "add_onnx_graph",
            "export a MindSpore network with mindspore.export(net, *inputs, "
            "file_name='net', file_format='ONNX') and open net.onnx in Netron",
        )

    def add_mesh(self, tag: str, vertices: Any, *args: Any, **kwargs: Any) -> NoReturn:
        """Not supported: mindwatch writes no 3-D meshes."""
        _unsupported("add_mesh", "mindwatch writes no meshes; log their statistics as scalars")

    def add_video(self, tag: str, vid_tensor: Any, *args: Any, **kwargs: Any) -> NoReturn:
        """Not supported: encoding video needs moviepy, which mindwatch does not use."""
        _unsupported(
            "add_video",
            "encoding video needs moviepy, which mindwatch does not depend on; log frames "
            "with add_images(tag, frames, step, dataformats='NCHW') instead",
        )

    def add_image_with_boxes(self, tag: str, img_tensor: Any, box_tensor: Any,
                             *args: Any, **kwargs: Any) -> NoReturn:  # fmt: skip
        """Not supported: draw the boxes on the image first, then :meth:`add_image`."""
        _unsupported(
            "add_image_with_boxes",
            "draw the boxes into the image (e.g. with PIL.ImageDraw) and log it with add_image",
        )

    # ------------------------------------------------------------------ lifecycle

    def get_logdir(self) -> str:
        """The run folder this writer writes (``<log_dir>-2`` when ``log_dir`` held
        another run; ``<run>/rank_<r>`` on rank r without a collective)."""
        return str(self._logdir)

    def flush(self) -> None:
        """Hand everything logged so far to the OS."""
        if not self._closed:
            self._hand_on()
            self._mon.flush()
        for writer in self._sub_runs.values():
            writer.flush()

    def close(self) -> None:
        """Write everything and end the run (``run.json``'s status: finished). A record
        logged after it reopens the run, as torch's writer does."""
        self._end(None, None, None)

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._end(exc_type, exc, tb)

    def _end(self, exc_type: object, exc: object, tb: object) -> None:
        for writer in self._sub_runs.values():
            writer.close()
        self._sub_runs.clear()
        if not self._closed:
            self._hand_on()
            self._closed = True
            self._add = self._add_reopened
            self._mon.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"SummaryWriter(log_dir={self.get_logdir()!r})"


def _render(figure: Any, close: bool) -> Array:
    """A matplotlib figure as CHW uint8 RGB pixels (Agg, as torch renders it)."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()  # type: ignore[no-untyped-call]
    width, height = figure.canvas.get_width_height()
    buffer = canvas.buffer_rgba()  # type: ignore[no-untyped-call]
    rgba = np.frombuffer(buffer, dtype=np.uint8).reshape([height, width, 4])
    if close:
        plt.close(figure)
    return np.moveaxis(rgba[:, :, :3], 2, 0)
