"""TensorBoard sinks: a run folder's event files, and MindFormers' view of a step.

:class:`TensorBoardSink` hands each item TensorBoard shows (steps, evaluations, scalars,
histograms, text, summaries, resume markers) to an
:class:`~mindwatch.events.EventFileWriter` (which encodes and writes on its own thread);
:class:`MindFormersView` writes a training step again under MindFormers' tag names
(``tag_style: mindformers``, :mod:`mindwatch.metrics.mindformers_view`) into the same
writer. A run's main folder also gets, with its first step, the custom-scalars layout of
TensorBoard's first screen (:mod:`mindwatch.sinks.board_layout`).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Optional, Union

from mindwatch.events.summaries import custom_scalars_layout_value, import_layout_support
from mindwatch.events.writer import EventFileWriter, WriterStats
from mindwatch.metrics.derived import StepRates
from mindwatch.metrics.mindformers_view import mindformers_view, view_warnings
from mindwatch.sinks.base import SinkPlace, TypedSink, handles
from mindwatch.sinks.board_layout import first_screen_layout
from mindwatch.sinks.items import (
    EvalValues,
    Histogram,
    Scalars,
    SessionStart,
    StepValues,
    SummaryValues,
    Text,
)

if TYPE_CHECKING:
    from mindwatch.config import MonitorConfig

__all__ = ["MindFormersView", "TensorBoardSink"]


class TensorBoardSink(TypedSink):
    """One run folder's TensorBoard event files; with ``layout``, also the layout of
    TensorBoard's first screen (written once, at step 0, built from the first step's tags
    on the writer's thread)."""

    def __init__(
        self,
        writer: EventFileWriter,
        name: str = "TensorBoard",
        *,
        layout: bool = False,
        hardware: tuple[bool, bool] = (False, False),
    ) -> None:
        self.writer = writer
        self.name = f"{name} ({writer.logdir})"
        self._layout_pending = layout
        self._hardware = hardware  # (host, npu): the layout's Hardware charts
        # Steps' tags written under other names: a front that speaks another API's tags
        # (SummaryWriter's "loss" is Monitor's train/loss) fills it before it logs them.
        self.tag_names: dict[str, str] = {}
        if layout:
            import_layout_support()  # here, not on a background thread at exit

    @classmethod
    def from_config(cls, config: MonitorConfig, place: SinkPlace) -> Optional[TensorBoardSink]:
        """The event files of the route's folder (with the first screen's layout on
        ``main``: the folder TensorBoard shows for this process); none without one."""
        if place.writer is None:
            return None
        main = place.route == "main"
        name = "TensorBoard" if main and place.rank == 0 else "TensorBoard rank"
        hw = config.hardware
        host = hw.enabled and hw.host
        npu = hw.enabled and hw.npu_smi and shutil.which(hw.npu_smi_path or "npu-smi") is not None
        return cls(place.writer, name, layout=main, hardware=(host, npu))

    @handles(StepValues)
    def _step(self, item: StepValues) -> None:
        if self._layout_pending:
            self._layout_pending = False
            tags = [tag for tag, _ in item.values]
            host, npu = self._hardware
            self.writer.add_values_later(
                0,
                lambda: [
                    custom_scalars_layout_value(first_screen_layout(tags, host=host, npu=npu))
                ],
            )
        names = self.tag_names
        if names:
            values = [(names.get(tag, tag), value) for tag, value in item.values]
            self.writer.add_scalars(item.step, values, item.wall)
        else:
            self.writer.add_scalars(item.step, item.values, item.wall)

    def without_layout(self) -> None:
        """Write no first-screen layout (the caller writes its own, or none)."""
        self._layout_pending = False

    @handles(EvalValues, Scalars)
    def _scalars(self, item: Union[EvalValues, Scalars]) -> None:
        self.writer.add_scalars(item.step, item.values)

    @handles(Histogram)
    def _histogram(self, item: Histogram) -> None:
        self.writer.add_histogram(item.tag, item.data, item.step, copy=False)

    @handles(Text)
    def _text(self, item: Text) -> None:
        self.writer.add_text(item.tag, item.text, item.step)

    @handles(SummaryValues)
    def _summary(self, item: SummaryValues) -> None:
        self.writer.add_values(item.step, item.values, item.wall)

    @handles(SessionStart)
    def _session_start(self, item: SessionStart) -> None:
        self.writer.add_session_start(item.step)

    def flush(self, timeout: Optional[float] = None) -> bool:
        return self.writer.flush(timeout)

    def close(self, timeout: Optional[float] = None) -> None:
        self.writer.close(timeout)

    @property
    def stats(self) -> WriterStats:
        return self.writer.stats


class MindFormersView(TypedSink):
    """``tag_style: mindformers``: each training step also under MindFormers' names,
    against steps and samples (its ``<tag>_vs_samples`` twins). ``rates`` gives the
    model FLOPs per step for ``model-flops-throughput-per-npu``."""

    name = "MindFormers tag view"

    def __init__(self, writer: EventFileWriter, *, world_size: int, rates: StepRates) -> None:
        self.writer = writer
        self.world_size = world_size
        self.rates = rates
        self._warn = view_warnings()

    @classmethod
    def from_config(cls, config: MonitorConfig, place: SinkPlace) -> Optional[MindFormersView]:
        """With ``tag_style: mindformers``, into the ``main`` route's event files (the
        TensorBoard sink of the same writer flushes and closes them)."""
        if config.tag_style != "mindformers" or place.route != "main" or place.writer is None:
            return None
        return cls(place.writer, world_size=place.world_size, rates=place.rates)

    @handles(StepValues)
    def _step(self, item: StepValues) -> None:
        flops = self.rates.step_flops(item.samples)
        for x, view in mindformers_view(
            item.step,
            item.values,
            samples=item.samples,
            world_size=self.world_size,
            flops_per_step=flops,
            warn=self._warn,
        ):
            self.writer.add_scalars(x, view, item.wall)
