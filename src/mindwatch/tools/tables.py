"""``read_scalars``: every scalar below a folder as one pandas DataFrame, no sampling."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from mindwatch.events.reader import RunReader, find_runs
from mindwatch.events.writer import PathLike

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "read_scalars"]

COLUMNS = ("run", "tag", "step", "wall_time", "value")


def read_scalars(
    logdir: PathLike,
    *,
    runs: Optional[Collection[str]] = None,
    tags: Optional[Collection[str]] = None,
    progress: Optional[Callable[[int, int, str], None]] = None,
) -> pd.DataFrame:
    """Every scalar of every run below ``logdir``: columns ``run, tag, step, wall_time,
    value``, one row per point, in reading order (run, then file, then position).

    Args:
        logdir: a run folder or a folder of runs. Runs are named as TensorBoard names
            them: the folder's path relative to ``logdir`` (``"."`` for ``logdir``).
        runs: keep only these run names / tags.
        tags: see ``runs``.
        progress: called as ``progress(runs_done, runs_total, run)`` after each run.

    Nothing is sampled (TensorBoard's ``EventAccumulator`` keeps 10,000 random points
    per tag by default). Points a restart voided (TensorBoard's ``SessionLog.START``
    purge marker, written by mindwatch on resume and by torch's ``purge_step``) are left
    out, as TensorBoard leaves them out. CRCs are checked; damaged records are skipped
    with a warning naming the file and offset; an incomplete last record (a file still
    being written) is simply not read yet.
    """
    import pandas as pd

    root = Path(logdir)
    if not root.is_dir():
        raise FileNotFoundError(f"no such folder: '{root}' (give the folder of a run or of runs)")
    names: list[str] = []
    counts: list[int] = []
    tag_parts: list[np.ndarray[Any, Any]] = []
    step_parts, wall_parts, value_parts = [], [], []
    found = [(n, f) for n, f in find_runs(root) if runs is None or n in runs]
    for done, (name, folder) in enumerate(found, start=1):
        run_tags, run_steps, run_walls, run_values = RunReader(folder).scalar_columns()
        if progress is not None:
            progress(done, len(found), name)
        names.append(name)
        counts.append(len(run_tags))
        tag_parts.append(run_tags)
        step_parts.append(run_steps)
        wall_parts.append(run_walls)
        value_parts.append(run_values)

    def joined(parts: list[np.ndarray[Any, Any]], dtype: Any) -> np.ndarray[Any, Any]:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    frame = pd.DataFrame(
        {
            "run": pd.Series(np.repeat(np.array(names, dtype=object), counts), dtype=object),
            "tag": pd.Series(joined(tag_parts, object), dtype=object),
            "step": joined(step_parts, np.int64),
            "wall_time": joined(wall_parts, np.float64),
            "value": joined(value_parts, np.float64),
        },
        columns=list(COLUMNS),
    )
    if tags is not None:
        frame = frame[frame["tag"].isin(list(tags))].reset_index(drop=True)
    return frame
