"""``Sampler``: reads hardware probes on its own thread, so the training thread only ever
reads the latest sample.

Decisions:

* **The training thread never waits for hardware.** :meth:`Sampler.latest` is one
  attribute read: the sampler thread builds a new, immutable :class:`HardwareSample`
  and swaps it in with one assignment (atomic in CPython), so no lock is taken and a
  reader never sees half a sample.
* **Each probe runs on its own worker thread, under a time budget.** ``npu-smi`` can
  take 2 s, psutil a millisecond; run in turn, the slow one would hold every other value
  back. At each tick the sampler starts every idle probe, waits at most ``budget_s``
  (by default the period) for them, and publishes what arrived. A probe past its budget
  costs one warning and is skipped: its late result is dropped (its values would be
  from another moment than the sample's), and it is not started again until it has
  returned, so a hung probe holds one thread and nothing piles up. A probe that raises
  costs one warning too, and is skipped for that sample; the others are unaffected.
  Periods should therefore exceed the slowest probe's time (the 5 s default leaves
  npu-smi room); a probe that is always too slow gives no values and says so once.
* **The first tick is not published.** It only primes the rates (CPU %, disk and
  network MB/s need two reads), so the first sample a reader sees, one period after the
  start, is complete, and a run shorter than one period gets no half-empty point.
* **Ticks are on a fixed schedule** (start + k * period, on the monotonic clock), so a
  slow sample does not drift every later one; ticks missed while the process was
  suspended are skipped, not caught up in a burst.
* **Tags are under** ``hw/``; a probe's key without the prefix gets it, so a probe can
  name its values either way.
* **Memory growth per rank**, computed here from the sampler's own history of
  ``hw/rss_mb`` (so each rank judges its own process, and the training thread pays
  nothing): ``hw/rss_growth_mb_per_min`` (Theil-Sen slope) and ``hw/rss_rising_share``
  over the samples of the last ``growth_window_s``, once the window holds
  :data:`~mindwatch.hardware.growth.MIN_SAMPLES` samples (see :mod:`.growth`). What
  growth counts as a leak is a rule's decision, not the sampler's.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Callable, NamedTuple, Optional, Union

from mindwatch.common.waits import finite_seconds, wait_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.hardware.growth import growth_stats

__all__ = ["HardwareSample", "Probe", "Sampler"]

_log = logging.getLogger(__name__)

Probe = Callable[[], Mapping[str, float]]
"""A probe: one call, one reading of ``{tag: value}``; it may raise or be slow."""

RSS_TAG = "hw/rss_mb"
GROWTH_TAG = "hw/rss_growth_mb_per_min"
RISING_TAG = "hw/rss_rising_share"


class HardwareSample(NamedTuple):
    """One sample: every probe's values that arrived within budget at one tick."""

    seq: int
    """1 for the first sample, then one more per sample."""
    wall_time: float
    """``time.time()`` at the tick (when the probes were started)."""
    values: Mapping[str, float]
    """``{"hw/...": value}``, read-only."""


class _Outcome(NamedTuple):
    values: Optional[Mapping[str, float]]
    error: Optional[BaseException]


class _ProbeWorker:
    """One probe's thread: waits to be started, runs the probe once, reports back."""

    def __init__(self, name: str, probe: Probe, sampler: Sampler) -> None:
        self.name = name
        self.busy = False  # guarded by the sampler's condition
        self._probe = probe
        self._sampler = sampler
        self._tick = 0
        self._go = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mindwatch-hw-{name}", daemon=True)
        self._thread.start()

    def start(self, tick: int) -> None:
        """Run the probe once for ``tick`` (the caller holds the sampler's condition)."""
        self.busy = True
        self._tick = tick
        self._go.set()

    def wake(self) -> None:
        self._go.set()

    def join(self, timeout: float) -> None:
        self._thread.join(wait_seconds(timeout))

    def _run(self) -> None:
        while True:
            self._go.wait()
            self._go.clear()
            if self._sampler.closed:
                return
            tick = self._tick
            try:
                outcome = _Outcome(self._probe(), None)
            except Exception as exc:
                outcome = _Outcome(None, exc)
            self._sampler._arrived(self, tick, outcome)


class Sampler:
    """Read ``probes`` every ``period_s`` on a daemon thread; :meth:`latest` is the
    newest sample.

    ``probes`` is ``{name: probe}`` or a sequence of probes (each named by its ``name``
    attribute, else its ``__name__``, else its type). ``budget_s`` (default
    ``period_s``) is how long a tick waits for its probes. ``growth_window_s`` is the
    window of the RSS growth statistics.
    """

    def __init__(
        self,
        probes: Union[Mapping[str, Probe], Sequence[Probe]],
        period_s: float,
        *,
        budget_s: Optional[float] = None,
        growth_window_s: float = 300.0,
    ) -> None:
        self.period_s = finite_seconds("period_s", period_s, positive=True)
        self.budget_s = (
            self.period_s
            if budget_s is None
            else finite_seconds("budget_s", budget_s, positive=True)
        )
        self.growth_window_s = finite_seconds("growth_window_s", growth_window_s, positive=True)
        named = _named(probes)
        self.closed = False
        self._warn = WarnOnce(_log)
        self._cond = threading.Condition()
        self._collecting = 0  # the tick whose outcomes are taken; 0: none (guarded)
        self._outcomes: dict[str, _Outcome] = {}  # guarded by _cond
        self._stop = threading.Event()
        self._latest: Optional[HardwareSample] = None
        self.published = 0  # samples published so far (written by the sampler thread only)
        self._rss_history: deque[tuple[float, float]] = deque()
        self._workers = [_ProbeWorker(name, probe, self) for name, probe in named.items()]
        self._thread = threading.Thread(target=self._run, name="mindwatch-hw", daemon=True)
        self._thread.start()

    def add_probe(self, name: str, probe: Probe) -> None:
        """Read ``probe`` too from the next tick on (one under ``name`` replaces it):
        a framework adapter adds what only it can read once training begins."""
        worker = _ProbeWorker(name, probe, self)
        with self._cond:
            if self.closed:
                worker.wake()  # it sees the sampler closed and ends
                return
            self._workers = [w for w in self._workers if w.name != name] + [worker]

    def latest(self) -> Optional[HardwareSample]:
        """The newest sample, or None before the first; one attribute read, no lock."""
        return self._latest

    @property
    def warnings(self) -> Mapping[str, int]:
        """How often each problem happened (``"error:<probe>"``, ``"slow:<probe>"``,
        ``"value:<probe>"``, ``"sampler"``); each one was logged once."""
        return dict(self._warn.counts)

    def close(self, timeout: float = 2.0) -> None:
        """Stop sampling; wait at most ``timeout`` seconds in all for the threads.

        A probe stuck in a call is not waited for beyond that: its thread is a daemon
        and ends with the process (a thread cannot be killed from outside).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            self.closed = True
            self._cond.notify_all()
        self._stop.set()
        for worker in self._workers:
            worker.wake()
        self._thread.join(wait_seconds(deadline - time.monotonic()))
        for worker in self._workers:
            worker.join(deadline - time.monotonic())

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the sampler thread -------------------------------------------------------------

    def _run(self) -> None:
        tick = 0
        next_time = time.monotonic()
        while not self._stop.is_set():
            tick += 1
            try:
                self._sample(tick)
            except Exception as exc:  # a bug here must not end sampling silently
                self._warn(
                    "sampler",
                    "mindwatch: hardware sampling failed: %s: %s",
                    type(exc).__name__,
                    exc,
                )
            next_time += self.period_s
            now = time.monotonic()
            if next_time < now:  # suspended, or a tick took longer than a period
                next_time = now + self.period_s
            self._stop.wait(wait_seconds(next_time - now))

    def _sample(self, tick: int) -> None:
        wall_time = time.time()
        started_at = time.monotonic()
        deadline = started_at + self.budget_s
        with self._cond:
            self._collecting = tick
            self._outcomes = {}
            started = []
            for worker in self._workers:
                if not worker.busy:  # a busy one is still past its budget from before
                    worker.start(tick)
                    started.append(worker)
            while not self.closed and any(w.busy for w in started):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(wait_seconds(remaining))
            self._collecting = 0
            outcomes = self._outcomes
            slow = [w.name for w in self._workers if w.busy]
        if self.closed:
            return
        for name in slow:
            self._warn(
                f"slow:{name}",
                "mindwatch: hardware probe %r took longer than its %.3g s budget; it is "
                "skipped until it returns (raise hardware.period_s if it is always this slow)",
                name,
                self.budget_s,
            )
        values: dict[str, float] = {}
        for name, outcome in outcomes.items():
            if outcome.error is not None:
                self._warn(
                    f"error:{name}",
                    "mindwatch: hardware probe %r failed (%s: %s); it is skipped for this "
                    "sample and tried again at the next",
                    name,
                    type(outcome.error).__name__,
                    outcome.error,
                )
            elif outcome.values is not None:
                values.update(self._checked(name, outcome.values))
        self._add_growth(started_at, values)
        if tick > 1:  # the first tick only primes the rates (CPU %, disk, network)
            self._latest = HardwareSample(tick, wall_time, MappingProxyType(values))
            self.published += 1

    def _arrived(self, worker: _ProbeWorker, tick: int, outcome: _Outcome) -> None:
        """A worker's outcome (on the worker's thread); a late one is dropped."""
        with self._cond:
            worker.busy = False
            if tick == self._collecting:
                self._outcomes[worker.name] = outcome
                self._cond.notify_all()

    def _checked(self, name: str, raw: Mapping[str, float]) -> dict[str, float]:
        """``raw`` with ``hw/`` tags and float values; anything else is dropped, warned."""
        values: dict[str, float] = {}
        try:
            items = list(raw.items())
        except Exception:
            self._warn(
                f"value:{name}",
                "mindwatch: hardware probe %r returned %s, not a {tag: number} mapping",
                name,
                type(raw).__name__,
            )
            return values
        for key, value in items:
            tag = key if str(key).startswith("hw/") else f"hw/{key}"
            # Any error, not only TypeError and ValueError: an int beyond a float's range
            # raises OverflowError, a value's own __float__ may raise anything, and an
            # error let through here would cost every probe's values, tick after tick.
            try:
                values[tag] = float(value)
            except Exception:
                self._warn(
                    f"value:{name}",
                    "mindwatch: hardware probe %r gave %s = %r, not a number; it is left out",
                    name,
                    tag,
                    value,
                )
        return values

    def _add_growth(self, now: float, values: dict[str, float]) -> None:
        rss = values.get(RSS_TAG)
        if rss is not None and math.isfinite(rss):
            self._rss_history.append((now, rss))
        while self._rss_history and self._rss_history[0][0] < now - self.growth_window_s:
            self._rss_history.popleft()
        stats = growth_stats([t for t, _ in self._rss_history], [v for _, v in self._rss_history])
        if stats is not None:
            values[GROWTH_TAG] = stats.per_minute
            values[RISING_TAG] = stats.rising_share


def _named(probes: Union[Mapping[str, Probe], Sequence[Probe]]) -> dict[str, Probe]:
    """``probes`` by name; a repeated name gets ``#2``, ``#3`` (warnings need to say
    which probe failed)."""
    pairs = (
        list(probes.items())
        if isinstance(probes, Mapping)
        else [(_probe_name(probe), probe) for probe in probes]
    )
    named: dict[str, Probe] = {}
    for name, probe in pairs:
        if not callable(probe):
            raise TypeError(f"probe {name!r} must be callable, got {type(probe).__name__}")
        unique, n = name, 1
        while unique in named:
            n += 1
            unique = f"{name}#{n}"
        named[unique] = probe
    return named


def _probe_name(probe: Probe) -> str:
    name = getattr(probe, "name", None) or getattr(probe, "__name__", None)
    return str(name) if name else type(probe).__name__
