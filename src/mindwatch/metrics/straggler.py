"""Each rank's input-pipeline wait over an interval, for the ``straggler`` rule.

The hot path appends two floats per step; once per ``interval`` steps (on a step the
monitor collects, the same on every rank because the steps are) the medians of the
interval's data waits and step times are handed out as ``straggler/input_wait_ms`` and
``straggler/step_ms``. One ``numpy.median`` per interval costs about 10 us on the
training thread, which is nothing against a step; medians rather than means so one
slow batch does not move an interval.

An interval during which the compute micro-benchmark paused every rank is dropped
(:meth:`InputWaitMedians.disturb`): while every rank computes the benchmark, every
input pipeline runs ahead and fills its prefetch buffer, so the next steps wait for
nothing (measured: a healthy input-bound 4-rank job's spread of waits fell from about
19 ms to 2-4 ms in the interval after each run, and with runs every 10 steps the rule's
baseline came out low enough to name a healthy rank). The benchmark runs at the same
step on every rank, so every rank drops the same interval.
"""

from __future__ import annotations

import numpy as np

from mindwatch.rules.straggler import INPUT_WAIT, STEP

__all__ = ["InputWaitMedians"]


class InputWaitMedians:
    """Keeps one interval's data waits and step times (ms) and yields their medians."""

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.waits: list[float] = []
        self.steps: list[float] = []
        self.disturbed = False

    def disturb(self) -> None:
        """The steps from the next on are not the pipeline's pace: drop the interval
        that holds the next step."""
        self.disturbed = True

    def add(self, data_wait_ms: float, compute_ms: float) -> None:
        self.waits.append(data_wait_ms)
        self.steps.append(data_wait_ms + compute_ms)

    def due(self) -> dict[str, float]:
        """The interval's medians once it is full (and a fresh interval), else {}."""
        if len(self.waits) < self.interval:
            return {}
        if self.disturbed:
            self.disturbed = False
            self.waits, self.steps = [], []
            return {}
        values = {
            INPUT_WAIT: float(np.median(self.waits)),
            STEP: float(np.median(self.steps)),
        }
        self.waits, self.steps = [], []
        return values
