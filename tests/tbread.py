"""Read event files back with TensorBoard's own EventAccumulator, keeping every point.

An independent reader is what proves the writer (STYLE lesson 12).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

KEEP_ALL = {"scalars": 0, "histograms": 0, "tensors": 0, "compressedHistograms": 0, "images": 0}


def accumulator(logdir: str | Path) -> Any:
    acc = EventAccumulator(str(logdir), size_guidance=KEEP_ALL)
    acc.Reload()
    return acc


def scalars(logdir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` for every scalar tag of one run folder."""
    acc = accumulator(logdir)
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def same_float32(a: float, b: float) -> bool:
    """Equal as float32 values, with NaN equal to NaN."""
    import numpy as np

    fa, fb = float(np.float32(a)), float(np.float32(b))
    return (math.isnan(fa) and math.isnan(fb)) or fa == fb
