"""TensorBoard sinks: a run folder's event files, and MindFormers' view of a step.

:class:`TensorBoardSink` hands every item to an
:class:`~mindwatch.events.EventFileWriter` (which encodes and writes on its own thread);
:class:`MindFormersView` writes a training step again under MindFormers' tag names
(``tag_style: mindformers``, :mod:`mindwatch.metrics.mindformers_view`) into the same
writer. A run's main folder also gets, with its first step, the custom-scalars layout of
TensorBoard's first screen (:mod:`mindwatch.sinks.board_layout`).
"""

from __future__ import annotations

from typing import Optional

from mindwatch.events.summaries import custom_scalars_layout_value, import_layout_support
from mindwatch.events.writer import EventFileWriter, WriterStats
from mindwatch.metrics.derived import StepRates
from mindwatch.metrics.mindformers_view import mindformers_view, view_warnings
from mindwatch.sinks.board_layout import first_screen_layout
from mindwatch.sinks.items import (
    EvalValues,
    Histogram,
    Item,
    Scalars,
    SessionStart,
    StepValues,
    SummaryValues,
    Text,
)

__all__ = ["MindFormersView", "TensorBoardSink"]


class TensorBoardSink:
    """One run folder's TensorBoard event files; with ``layout``, also the layout of
    TensorBoard's first screen (written once, at step 0, built from the first step's tags
    on the writer's thread)."""

    def __init__(
        self, writer: EventFileWriter, name: str = "TensorBoard", *, layout: bool = False
    ) -> None:
        self.writer = writer
        self.name = f"{name} ({writer.logdir})"
        self._layout_pending = layout
        if layout:
            import_layout_support()  # here, not on a background thread at exit

    def write(self, item: Item) -> None:
        writer = self.writer
        if isinstance(item, StepValues):
            if self._layout_pending:
                self._layout_pending = False
                tags = [tag for tag, _ in item.values]
                writer.add_values_later(
                    0, lambda: [custom_scalars_layout_value(first_screen_layout(tags))]
                )
            writer.add_scalars(item.step, item.values, item.wall)
        elif isinstance(item, (EvalValues, Scalars)):
            writer.add_scalars(item.step, item.values)
        elif isinstance(item, Histogram):
            writer.add_histogram(item.tag, item.data, item.step, copy=False)
        elif isinstance(item, Text):
            writer.add_text(item.tag, item.text, item.step)
        elif isinstance(item, SummaryValues):
            writer.add_values(item.step, item.values)
        elif isinstance(item, SessionStart):
            writer.add_session_start(item.step)

    def flush(self, timeout: Optional[float] = None) -> bool:
        return self.writer.flush(timeout)

    def close(self, timeout: Optional[float] = None) -> None:
        self.writer.close(timeout)

    @property
    def stats(self) -> WriterStats:
        return self.writer.stats


class MindFormersView:
    """``tag_style: mindformers``: each training step also under MindFormers' names,
    against steps and samples (its ``<tag>_vs_samples`` twins). ``rates`` gives the
    model FLOPs per step for ``model-flops-throughput-per-npu``."""

    name = "MindFormers tag view"

    def __init__(self, writer: EventFileWriter, *, world_size: int, rates: StepRates) -> None:
        self.writer = writer
        self.world_size = world_size
        self.rates = rates
        self._warn = view_warnings()

    def write(self, item: Item) -> None:
        if not isinstance(item, StepValues):
            return
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

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True  # the TensorBoard sink of the same writer flushes it

    def close(self, timeout: Optional[float] = None) -> None:
        pass
