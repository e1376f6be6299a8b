"""Spike forensics (issue 23, in progress): what moved first before an alert.

:class:`FlightRecorder` keeps the last K steps in memory (per-parameter gradient norms,
loss, lr, loss scale, max attention logits, sample ids); :func:`analyse` ranks the
series that departed first before an alert. Framework-free: the MindSpore adapter feeds
the recorder, the pipeline analyses its window when an alert asks for it (wiring them
in is the next step of the issue; nothing calls this package yet).
"""

from mindwatch.forensics.analysis import Mover, analyse, first_nonfinite, movers
from mindwatch.forensics.recorder import FlightRecorder, Window, recorded_scalars

__all__ = [
    "FlightRecorder",
    "Mover",
    "Window",
    "analyse",
    "first_nonfinite",
    "movers",
    "recorded_scalars",
]
