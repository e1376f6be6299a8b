"""``mindwatch watch``: the anomaly rules from a separate process, on the event files.

The flow: a :class:`Watcher` (:mod:`.watcher`) reads every run below the folder
incrementally, feeds each step to the rules and keeps how far it read in a state file
(:mod:`.state`: its schema, checked whole); :func:`watch` polls it once or until
stopped. With ``--prometheus`` a :class:`WatchExporter` (:mod:`.prometheus`) observes
each poll and serves the runs' metrics.
"""

from mindwatch.tools.watch.prometheus import WatchExporter, parse_address
from mindwatch.tools.watch.watcher import (
    STATE_FILE,
    PollObserver,
    Watcher,
    default_state_path,
    watch,
)

__all__ = [
    "STATE_FILE",
    "PollObserver",
    "WatchExporter",
    "Watcher",
    "default_state_path",
    "parse_address",
    "watch",
]
