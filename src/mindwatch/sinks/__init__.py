"""Where a run's data goes: the ``Sink`` protocol (:class:`TypedSink`: one method per
item type), a group that routes items by type and isolates failures, and the sinks
mindwatch has (TensorBoard event files, MindFormers' tag view, the console, the
Prometheus exporter), each opened from the config (:data:`SINK_KINDS`)."""

from mindwatch.sinks.base import Sink, SinkGroup, SinkKind, SinkPlace, TypedSink, handles
from mindwatch.sinks.kinds import SINK_KINDS, open_sinks
from mindwatch.sinks.progress import ProgressReporter, ProgressSink
from mindwatch.sinks.prometheus import PrometheusSink
from mindwatch.sinks.tensorboard import MindFormersView, TensorBoardSink

__all__ = [
    "SINK_KINDS",
    "MindFormersView",
    "ProgressReporter",
    "ProgressSink",
    "PrometheusSink",
    "Sink",
    "SinkGroup",
    "SinkKind",
    "SinkPlace",
    "TensorBoardSink",
    "TypedSink",
    "handles",
    "open_sinks",
]
