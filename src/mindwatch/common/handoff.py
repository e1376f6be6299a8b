"""``Handoff``: a bounded queue from producer threads to one worker thread.

Both background threads of a monitor hand work over this way: the pipeline (records
from the training and collective threads) and each event writer (events to encode).
What the two share, written once here:

* **A hot path of one append.** Below :attr:`Handoff.fast_limit` a producer may append
  to :attr:`Handoff.queue` itself (a ``collections.deque``: atomic under the GIL, no
  lock); no wake-up is due and nothing waits or is dropped. At or above it, and for
  anything else, :meth:`Handoff.put`. The entries are the owner's plain tuples, queued
  as they are (docs/dev/architecture.md, "The hot path": no wrapper).
* **A worker that wakes** every ``period`` seconds, once ``wake_at`` entries wait, or
  when asked (:meth:`Handoff.wake`, a barrier, :meth:`Handoff.close`), and then takes
  everything queued in chunks of ``chunk`` entries, yielding the GIL between chunks so
  a producer waits at most about a chunk's work for it.
* **Back-pressure, bounded.** When ``max_queue`` entries wait, a producer of *data* (an
  entry with points) waits for room, at most ``max_block_secs`` in all; the worker lets
  it go on once fewer than ``room_at`` wait (hysteresis: one wake-up per batch of work,
  not per entry). If that wait times out the hand-off is *stalled*: new data is dropped
  and counted at once, without waiting, until the worker has caught up. Entries with no
  points (settings, markers) never wait and are never dropped while the worker runs.
* **Barriers.** :meth:`Handoff.barrier` returns an event set once everything queued
  before it has been processed (and committed).
* **A dead worker is one warning and counted.** An exception the owner's ``process``
  lets out ends the worker: the entry and everything queued are counted as dropped,
  the owner's ``died`` hook says so once, and from then on new data is dropped and
  counted at once (``fast_limit`` becomes 0, so the hot path takes :meth:`put`).
* **A bounded close.** :meth:`Handoff.close` processes what is queued (and what raced
  with it), runs the owner's ``stop`` hook on the worker, and waits at most ``timeout``.

What differs between owners comes in as hooks: how many points an entry holds
(``None``: not data), what processing one entry means, what "commit" means (the writer
writes its batch to the file), what happens on stop, and what to say when data is
dropped or the worker dies.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable, Generic, Optional, TypeVar

from mindwatch.common.waits import wait_seconds

__all__ = ["Handoff"]

Entry = TypeVar("Entry", bound="tuple[Any, ...]")


class _Signal:
    """The head of an entry the hand-off itself queues (never the owner's: ``is``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<handoff {self.name}>"


# (_BARRIER, event): set once everything before it is processed;
# (_STOP, timeout): process the rest, then the owner's stop hook, then end.
_BARRIER = _Signal("barrier")
_STOP = _Signal("stop")


def _nothing(*_: Any) -> None:
    return None


class Handoff(Generic[Entry]):
    """Entries from any producer thread, processed in order on one worker thread.

    Args:
        name: the worker thread's name.
        points: how many points an entry holds (what a drop counts), ``None`` for an
            entry that is not data: it never waits for room and is never dropped.
        process: what the worker does with one entry; an exception it lets out ends
            the worker (so it catches what one bad entry may raise itself).
        commit: hand on what was processed (called at a barrier, when the queue runs
            dry, and before ``stop``).
        stop: the worker's last work, after everything queued before :meth:`close`
            (and what raced with it) is processed; given close's ``timeout``.
        dropped: data of these points was dropped on a producer's thread (a full,
            stalled or closed hand-off); not called once the worker died.
        died: the worker ended on this exception; everything queued is already counted.
        max_queue: entries that may wait; at this many, data waits for room.
        max_block_secs: the longest a producer waits for room in one :meth:`put`.
        period: the longest the worker sleeps before taking what is queued.
        wake_at: wake the worker once this many entries wait.
        room_at: a producer waiting for room goes on once fewer than this wait.
        chunk: entries processed per hold of the GIL.
    """

    def __init__(
        self,
        *,
        name: str,
        points: Callable[[Entry], Optional[int]],
        process: Callable[[Entry], None],
        commit: Callable[[], None] = _nothing,
        stop: Callable[[Optional[float]], None] = _nothing,
        dropped: Callable[[int], None] = _nothing,
        died: Callable[[BaseException], None] = _nothing,
        max_queue: int,
        max_block_secs: float,
        period: float,
        wake_at: int,
        room_at: int,
        chunk: int,
    ) -> None:
        self._points = points
        self._process = process
        self._commit = commit
        self._stop = stop
        self._dropped = dropped
        self._died = died
        self.max_queue = max_queue
        self._max_block_secs = max_block_secs
        self._period = period
        self._wake_at = wake_at
        self._room_at = room_at
        self._chunk = chunk
        # What producers append to, and below which length they may do so directly.
        self.queue: deque[Any] = deque()
        self.fast_limit = min(wake_at, max_queue)
        self.closed = False
        self.died: Optional[str] = None  # why the worker ended, if it did on an error
        self.dropped = 0  # points dropped or discarded here
        self._wake = threading.Event()
        self._room = threading.Event()
        self._blocked = False  # a producer waits for room
        self._stalled = False  # a wait for room timed out: drop until caught up
        self._close_lock = threading.RLock()  # close() may re-enter from a signal handler
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the worker (once the owner's hooks can run)."""
        self._thread.start()

    # ------------------------------------------------------------ producer threads

    def put(self, entry: Entry) -> None:
        """Queue ``entry``; at ``max_queue``, data waits for room (bounded) or is dropped."""
        queue = self.queue
        if self.closed or self.died is not None:
            self._drop(entry)
            return
        if (
            len(queue) >= self.max_queue
            and self._points(entry) is not None
            and not self._wait_for_room()
        ):
            self._drop(entry)
            return
        queue.append(entry)
        if len(queue) >= self._wake_at and not self._wake.is_set():
            self._wake.set()

    def _wait_for_room(self) -> bool:
        """Wait (at most max_block_secs) until the queue has room; False if it has none."""
        thread = self._thread
        if self._stalled or not thread.is_alive():
            return False
        if thread is threading.current_thread():
            return True  # the worker queueing for itself (a sink logging): never wait
        deadline = time.monotonic() + self._max_block_secs
        while len(self.queue) >= self.max_queue and not self.closed and self.died is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._stalled = True  # drop without waiting until the worker catches up
                return False
            self._room.clear()
            self._blocked = True
            self._wake.set()
            self._room.wait(wait_seconds(remaining))
        return not self.closed and self.died is None

    def _drop(self, entry: Entry) -> None:
        points = self._points(entry)
        if points is None:
            return  # not data (a setting, a marker): nothing to count or say
        self.dropped += points
        if self.died is None:  # a dead worker said so once, when it ended
            self._dropped(points)

    @property
    def stalled(self) -> bool:
        """Whether new data is dropped at once until the worker catches up."""
        return self._stalled

    @property
    def running(self) -> bool:
        """Whether the worker thread is alive."""
        return self._thread.is_alive()

    def wake(self) -> None:
        """Have the worker take what is queued now."""
        self._wake.set()

    def barrier(self) -> threading.Event:
        """An event set once everything queued before the call is processed."""
        done = threading.Event()
        thread = self._thread
        if (
            self.closed
            or self.died is not None
            or not thread.is_alive()
            or thread is threading.current_thread()
        ):
            # Closing processes everything queued before it, or nothing will; and the
            # worker (a sink asking) cannot wait for itself.
            done.set()
            return done
        self.queue.append((_BARRIER, done))
        self._wake.set()
        if not thread.is_alive() or self.died is not None:  # it ended meanwhile
            done.set()
        return done

    def pending(self) -> int:
        """How many of the owner's entries are queued (the hand-off's own barriers and
        stop entry are not counted: a warning quoting this number counts what may be
        lost)."""
        return sum(1 for entry in list(self.queue) if not isinstance(entry[0], _Signal))

    def close(self, timeout: Optional[float] = None) -> bool:
        """Stop taking entries (later ones are dropped and counted); the worker processes
        what is queued, then runs ``stop``. Every caller waits for it, at most
        ``timeout`` seconds (``None``: no limit), unless it is the worker itself.
        True for the first caller."""
        with self._close_lock:
            first = not self.closed
            if first:
                self.closed = True
                self.fast_limit = 0  # the hot path takes put(), which drops and counts
                self.queue.append((_STOP, timeout))
            self._wake.set()
            self._room.set()
        # Every caller waits, not only the first: a SIGTERM handler closing while the
        # program's own close() runs must not return before the work is done.
        thread = self._thread
        if thread.is_alive() and thread is not threading.current_thread():
            thread.join(wait_seconds(timeout))
        if first and self.died is not None:
            self._discard()  # appended in the instant before the producers saw it
        return first

    # ------------------------------------------------------------ the worker thread

    def _run(self) -> None:
        try:
            wake, period = self._wake, wait_seconds(self._period)
            while True:
                wake.wait(period)
                wake.clear()
                if self._drain():
                    return
        except BaseException as exc:  # a dead worker must not be silent
            self.died = f"{type(exc).__name__}: {exc}"[:300]
            self.fast_limit = 0  # every put() from now on drops and counts
            self._discard()
            self._died(exc)

    def _drain(self) -> bool:
        """Process everything queued; True once the stop entry was met (and done)."""
        queue, process, chunk = self.queue, self._process, self._chunk
        stop: Optional[tuple[Any, ...]] = None
        while queue:
            for _ in range(chunk):
                if not queue:
                    break
                entry = queue.popleft()
                head = entry[0]
                if head is _BARRIER:
                    self._commit()
                    entry[1].set()
                    continue
                if head is _STOP:
                    stop = entry  # the rest raced with close(): processed too, then stop
                    continue
                try:
                    process(entry)
                except BaseException:  # the worker ends (see _run): this entry is lost too
                    self.dropped += self._points(entry) or 0
                    raise
            if self._blocked and len(queue) < self._room_at:
                self._blocked = False
                self._room.set()
            time.sleep(0)  # let the producers have the GIL between chunks
        self._commit()
        self._stalled = False  # caught up: producers may wait for room again
        if self._blocked:
            self._blocked = False
            self._room.set()
        if stop is None:
            return False
        self._stop(stop[1])
        self._discard()  # appended after the last look (counted), barriers released
        return True

    def _discard(self) -> None:
        """Count what is queued as dropped and release its barriers: nothing will
        process it; nor may a producer wait for room any longer."""
        queue = self.queue
        lost = 0
        while queue:
            entry = queue.popleft()
            head = entry[0]
            if head is _BARRIER:
                entry[1].set()
            elif head is not _STOP:
                lost += self._points(entry) or 0
        self.dropped += lost
        self._room.set()
