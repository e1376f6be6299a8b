"""Spike forensics: what moved first before an alert, and the batch to skip.

:class:`FlightRecorder` keeps the last K steps in memory (per-parameter gradient norms,
loss, lr, loss scale, max attention logits, sample ids); :func:`analyse` ranks the
series that departed first before an alert; :mod:`~mindwatch.forensics.exchange` packs
one rank's analysis into a fixed-size slot for the job-wide view under data
parallelism; :class:`SkipList` is ``<run>/skip.json``, which a resumed run filters its
dataset with. Framework-free: the MindSpore adapter feeds the recorder, the pipeline
analyses its window when an alert asks (:mod:`mindwatch.pipeline.investigate`). The
user's guide: docs/forensics.md.
"""

from mindwatch.forensics.analysis import Mover, analyse, first_nonfinite, movers
from mindwatch.forensics.recorder import FlightRecorder, Window, recorded_scalars
from mindwatch.forensics.skiplist import SKIP_FILE, SkipList, resume_hint

__all__ = [
    "SKIP_FILE",
    "FlightRecorder",
    "Mover",
    "SkipList",
    "Window",
    "analyse",
    "first_nonfinite",
    "movers",
    "recorded_scalars",
    "resume_hint",
]
