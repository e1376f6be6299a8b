"""TensorBoard's event-file format: records, encoding and the background writer.

Nothing here imports TensorFlow or MindSpore; tensorboard's protobuf classes are used
only for the rare summary kinds (histograms, text, hparams).
"""

from mindwatch.events.writer import (
    DEFAULT_FLUSH_SECS,
    DEFAULT_MAX_QUEUE,
    EventFileWriter,
    LogDirError,
    WriterStats,
)

__all__ = [
    "DEFAULT_FLUSH_SECS",
    "DEFAULT_MAX_QUEUE",
    "EventFileWriter",
    "LogDirError",
    "WriterStats",
]
