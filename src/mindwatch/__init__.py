"""mindwatch: an online training monitor for MindSpore and MindSpore Transformers.

The core (this package) imports no MindSpore; the MindSpore callbacks live in
:mod:`mindwatch.mindspore`, which imports MindSpore when it is first used.
"""

from mindwatch._version import __version__
from mindwatch.config import ConfigError, MonitorConfig
from mindwatch.events import EventFileWriter, LogDirError
from mindwatch.events.reader import RunReader
from mindwatch.monitor import Monitor
from mindwatch.summarywriter import SummaryWriter
from mindwatch.tools.tables import read_scalars

__all__ = [
    "ConfigError",
    "EventFileWriter",
    "LogDirError",
    "Monitor",
    "MonitorConfig",
    "RunReader",
    "SummaryWriter",
    "__version__",
    "read_scalars",
]
