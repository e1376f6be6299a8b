"""Step time and throughput from wall-clock time between consecutive logged steps.

Pure bookkeeping, no I/O: ``StepClock.tick(step)`` returns how long the steps since the
previous tick took. When ``step`` advanced by ``k`` (logging every ``k`` steps, or
MindSpore's sink mode on Ascend, where the callback fires once per sink), the interval
is shared equally by those ``k`` steps: that is all the clock can honestly know.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple, Optional

__all__ = ["Every", "StepClock", "StepTiming"]


class StepTiming(NamedTuple):
    """One interval between ticks: ``seconds`` of wall time covering ``steps`` steps."""

    seconds: float
    steps: int

    @property
    def step_time_ms(self) -> float:
        return self.seconds * 1000.0 / self.steps

    def per_second(self, count_per_step: float) -> float:
        """Rate of a per-step count (samples, tokens) over this interval."""
        return count_per_step * self.steps / self.seconds


class StepClock:
    """Measure the interval between consecutive steps.

    The first tick measures from construction or from the last :meth:`restart` and
    counts as one step unless :meth:`rebase` said where counting starts. Call
    ``restart()`` after time that is not a training step (evaluation) or right before
    the first step: the steps since the last tick still count, so a sink reported after
    an evaluation is still shared among all of its steps.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last_time = clock()
        self._last_step: Optional[int] = None

    def restart(self) -> None:
        """The next tick measures time from now; steps still count from the last tick."""
        self._last_time = self._clock()

    def rebase(self, step: Optional[int]) -> None:
        """The next tick counts its steps from ``step`` (None: the next tick is one step)."""
        self._last_step = step

    def skip(self, step: int) -> None:
        """``step`` ended but is not recorded: the next tick's interval covers it too."""
        if self._last_step is None:
            self._last_step = step - 1

    def tick(self, step: int) -> Optional[tuple[float, int]]:
        """Record that ``step`` ended now: ``(seconds, steps)`` since the previous tick, or
        None if no time passed or the step went back. (A plain tuple: this runs every
        step; wrap it in :class:`StepTiming` for the derived values.)"""
        now = self._clock()
        last_step = self._last_step
        steps = step - last_step if last_step is not None else 1
        seconds = now - self._last_time
        self._last_time = now
        self._last_step = step
        if steps <= 0 or seconds <= 0:
            return None
        return seconds, steps


class Every:
    """Is a step due under "every N steps"? True when a multiple of N was reached since
    the previous call, not only when ``step % N == 0``: in sink mode the step jumps by
    the sink size, and "every 64 steps" with sinks of 100 must still record every sink
    (``step % 64`` would hit only every 1,600 steps)."""

    def __init__(self, every: Optional[int]) -> None:
        self.every = every
        self._prev = 0

    def __call__(self, step: int) -> bool:
        every = self.every
        if not every:
            return False
        if step < self._prev:  # the step axis restarted (a new Model.train from step 1)
            self._prev = 0
        due = step // every > self._prev // every
        self._prev = step
        return due
