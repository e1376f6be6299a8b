"""The ranks of a data-parallel run, read back from their folders: where each ran
(:mod:`mindwatch.run.rank_file`), how far each got, and which one stopped reporting
(:mod:`.progress`). ``mindwatch doctor``, ``watch`` and ``report`` share it."""

from mindwatch.tools.ranks.progress import (
    RankProgress,
    behind,
    rank_folders,
    rank_progress,
    stopped_message,
)

__all__ = ["RankProgress", "behind", "rank_folders", "rank_progress", "stopped_message"]
