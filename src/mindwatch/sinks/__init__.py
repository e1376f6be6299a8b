"""Where a run's data goes: the ``Sink`` protocol, a group that isolates failures, and
the sinks mindwatch has (TensorBoard event files, MindFormers' tag view, the console,
the Prometheus exporter)."""

from mindwatch.sinks.base import Sink, SinkGroup
from mindwatch.sinks.progress import ProgressReporter, ProgressSink
from mindwatch.sinks.prometheus import PrometheusSink
from mindwatch.sinks.tensorboard import MindFormersView, TensorBoardSink

__all__ = [
    "MindFormersView",
    "ProgressReporter",
    "ProgressSink",
    "PrometheusSink",
    "Sink",
    "SinkGroup",
    "TensorBoardSink",
]
