"""The kinds of sink a process opens from its config: one list, walked for each route.

Each kind is a class whose ``from_config(config, place)`` returns its sink for a route
of this process (:class:`~mindwatch.sinks.base.SinkPlace`), or None when the config or
the place leaves it off. A route's sinks get each item in this order: the TensorBoard
event files before the MindFormers view that writes into the same files, the console,
then the exporter. A new sink is its own module with ``from_config``, one entry here,
and its test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mindwatch.sinks.base import Sink, SinkKind, SinkPlace
from mindwatch.sinks.progress import ProgressSink
from mindwatch.sinks.prometheus import PrometheusSink
from mindwatch.sinks.tensorboard import MindFormersView, TensorBoardSink

if TYPE_CHECKING:
    from mindwatch.config import MonitorConfig

__all__ = ["SINK_KINDS", "open_sinks"]

SINK_KINDS: tuple[SinkKind, ...] = (TensorBoardSink, MindFormersView, ProgressSink, PrometheusSink)


def open_sinks(config: MonitorConfig, place: SinkPlace) -> list[Sink]:
    """The sinks ``config`` asks for at ``place``, in :data:`SINK_KINDS`' order."""
    sinks: list[Sink] = []
    for kind in SINK_KINDS:
        sink = kind.from_config(config, place)
        if sink is not None:
            sinks.append(sink)
    return sinks
