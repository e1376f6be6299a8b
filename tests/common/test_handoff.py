"""``Handoff``: the bounded queue both the pipeline and the event writer hand work over.

Real threads, no mocks: a worker is held inside ``process`` by an event or a semaphore
the test controls, so what waits, what is dropped and what is counted follows from the
order of events, not from timing. Time bounds are only generous hang detectors.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest

from mindwatch.common.handoff import Handoff

HANG = 30.0  # seconds: only ever reached when something hangs


class Boom(BaseException):
    """What no ``except Exception`` catches."""


class Owner:
    """The hooks of a hand-off, recording what they are called with.

    Entries: ``("data", points)``, ``("setting",)`` (not data), ``("hold",)`` (the
    worker waits on :attr:`gate` first, a semaphore), ``("boom",)`` (ends the worker).
    """

    def __init__(self, **options: Any) -> None:
        self.processed: list[tuple[Any, ...]] = []
        self.events: list[str] = []  # processed entries, commits, stops, in order
        self.drops: list[int] = []
        self.deaths: list[BaseException] = []
        self.stops: list[Optional[float]] = []
        self.gate = threading.Semaphore(0)
        self.queue_for_itself: Optional[tuple[Any, ...]] = None
        settings: dict[str, Any] = {
            "max_queue": 8,
            "max_block_secs": HANG,
            "period": 0.05,
            "wake_at": 4,
            "room_at": 4,
            "chunk": 2,
        }
        settings.update(options)
        self.handoff: Handoff[tuple[Any, ...]] = Handoff(
            name="test-handoff",
            points=self.points,
            process=self.process,
            commit=lambda: self.events.append("commit"),
            stop=self.stop,
            dropped=self.drops.append,
            died=self.deaths.append,
            **settings,
        )
        self.handoff.start()

    @staticmethod
    def points(entry: tuple[Any, ...]) -> Optional[int]:
        if entry[0] == "data":
            return int(entry[1])
        return None if entry[0] == "setting" else 1

    def process(self, entry: tuple[Any, ...]) -> None:
        if entry[0] == "hold":
            assert self.gate.acquire(timeout=HANG)
        if entry[0] == "boom":
            raise Boom("the worker blew up")
        if entry[0] == "self" and self.queue_for_itself is not None:
            self.handoff.put(self.queue_for_itself)  # e.g. a sink logging from the pipeline
        self.processed.append(entry)
        self.events.append(f"{entry[0]}")

    def stop(self, timeout: Optional[float]) -> None:
        self.stops.append(timeout)
        self.events.append("stop")

    def hold(self) -> None:
        """Have the worker stuck in ``process`` until :attr:`gate` is released."""
        self.handoff.put(("hold",))
        self.handoff.wake()

    def fill(self) -> None:
        """Fill the queue to max_queue with one-point data."""
        while len(self.handoff.queue) < self.handoff.max_queue:
            self.handoff.queue.append(("data", 1))


def held_owner(**options: Any) -> Owner:
    """An owner whose worker is inside ``process`` (held) and whose queue is full."""
    owner = Owner(**options)
    owner.hold()
    wait_until(lambda: not owner.handoff.queue)  # the worker took the hold entry
    owner.fill()
    return owner


def wait_until(condition: Any, timeout: float = HANG) -> None:
    done = threading.Event()
    deadline = threading.Timer(timeout, done.set)
    deadline.start()
    try:
        while not condition():
            assert not done.wait(0.005), "timed out"
    finally:
        deadline.cancel()


def in_thread(target: Any) -> threading.Event:
    done = threading.Event()

    def run() -> None:
        target()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done


def test_below_the_fast_limit_a_producer_may_append_itself() -> None:
    owner = Owner(max_queue=8, wake_at=4)
    handoff = owner.handoff
    assert handoff.fast_limit == 4
    small = Owner(max_queue=3, wake_at=4).handoff
    assert small.fast_limit == 3  # never beyond the queue
    small.close()
    handoff.queue.append(("data", 1))  # the hot path: one append
    assert handoff.barrier().wait(HANG)
    assert owner.processed == [("data", 1)]
    handoff.close()
    assert handoff.fast_limit == 0  # closed: the hot path takes put(), which counts


def test_a_full_queue_makes_data_wait_for_room_and_loses_nothing() -> None:
    owner = held_owner(max_block_secs=HANG)
    put = in_thread(lambda: owner.handoff.put(("data", 1)))
    wait_until(lambda: owner.handoff._blocked)  # waiting for room
    owner.gate.release()  # the worker goes on, and makes room
    assert put.wait(HANG)
    owner.handoff.close()
    assert len(owner.processed) == 1 + 8 + 1
    assert owner.handoff.dropped == 0
    assert owner.drops == []


def test_a_wait_for_room_is_bounded_then_data_is_dropped_and_counted_until_caught_up() -> None:
    owner = held_owner(max_block_secs=0.2)
    handoff = owner.handoff
    put = in_thread(lambda: handoff.put(("data", 3)))
    assert put.wait(HANG)  # it waited at most max_block_secs, then dropped
    assert handoff.stalled
    assert (handoff.dropped, owner.drops) == (3, [3])
    handoff.put(("data", 2))  # stalled: dropped at once, without waiting
    assert (handoff.dropped, owner.drops) == (5, [3, 2])
    handoff.put(("setting",))  # not data: never waits, never dropped
    assert handoff.queue[-1] == ("setting",)
    owner.gate.release()
    assert handoff.barrier().wait(HANG)
    wait_until(lambda: not handoff.stalled)  # caught up: data may wait for room again
    handoff.close()
    assert [e for e in owner.processed if e[0] == "data"] == [("data", 1)] * 8
    assert ("setting",) in owner.processed


def test_the_worker_lets_a_waiting_producer_go_on_after_a_chunk_below_room_at() -> None:
    owner = Owner(max_queue=8, room_at=4, chunk=2)
    handoff = owner.handoff
    handoff.put(("hold",))
    handoff.wake()
    wait_until(lambda: not handoff.queue)
    for _ in range(8):
        handoff.queue.append(("hold",))  # each one waits for a permit
    put = in_thread(lambda: handoff.put(("data", 1)))
    wait_until(lambda: handoff._blocked)
    owner.gate.release(5)  # the first 5 holds: the third chunk is not done yet
    wait_until(lambda: len(owner.processed) == 5)
    assert not put.wait(0.2)  # room is given at a chunk's end, not within one
    owner.gate.release()  # the sixth ends the third chunk; 3 wait, fewer than room_at
    assert put.wait(HANG)
    assert len(owner.processed) == 6  # the producer went on while the worker had work
    owner.gate.release(3)
    handoff.close()
    assert owner.processed[-1] == ("data", 1)
    assert handoff.dropped == 0


def test_a_barrier_is_set_once_everything_before_it_is_processed_and_committed() -> None:
    owner = held_owner()
    done = owner.handoff.barrier()  # beyond max_queue: a barrier never waits for room
    assert not done.is_set()
    owner.gate.release()
    assert done.wait(HANG)
    before = owner.events[: owner.events.index("commit") + 1]
    assert before == ["hold"] + ["data"] * 8 + ["commit"]  # committed before it was set
    owner.handoff.close()
    assert owner.events[-2:] == ["commit", "stop"]


def test_a_dead_worker_is_one_death_everything_counted_and_later_data_dropped() -> None:
    owner = held_owner()
    handoff = owner.handoff
    handoff.queue.appendleft(("boom",))  # next after the hold
    waiting = handoff.barrier()
    owner.gate.release()
    assert waiting.wait(HANG)  # released, not left waiting for a dead worker
    wait_until(lambda: owner.deaths)
    assert [type(exc) for exc in owner.deaths] == [Boom]
    assert handoff.died is not None
    assert "Boom" in handoff.died
    assert "the worker blew up" in handoff.died
    assert handoff.dropped == 1 + 8  # the entry that killed it, and what was queued
    assert handoff.fast_limit == 0  # the hot path now takes put()
    handoff.put(("data", 4))
    assert handoff.dropped == 13
    assert owner.drops == []  # said once, by the death, not per drop
    assert handoff.barrier().wait(HANG)
    handoff.queue.append(("data", 2))  # a producer that had read the fast limit before
    assert handoff.close()
    assert handoff.dropped == 15  # close() counts it
    assert owner.stops == []  # a dead worker does not run the stop hook
    assert len(owner.deaths) == 1


def test_close_processes_what_is_queued_then_stops_once_and_drops_later_data() -> None:
    owner = Owner()
    handoff = owner.handoff
    for _ in range(5):
        handoff.put(("data", 1))
    assert handoff.close(timeout=HANG)  # the first caller
    assert not handoff.running
    assert [e for e in owner.events if e != "commit"] == ["data"] * 5 + ["stop"]
    assert owner.stops == [HANG]
    handoff.put(("data", 2))
    handoff.put(("setting",))  # not data: nothing to count
    assert (handoff.dropped, owner.drops) == (2, [2])
    assert not handoff.close()  # idempotent
    assert handoff.barrier().is_set()
    assert owner.stops == [HANG]


def test_close_waits_at_most_its_timeout_for_a_hung_worker_and_every_caller_waits() -> None:
    owner = held_owner()
    handoff = owner.handoff
    assert handoff.close(timeout=0.1)
    assert handoff.running  # the worker is still held: close gave up waiting
    handoff.put(("data", 1))
    assert handoff.dropped == 1  # closed: dropped and counted at once
    second = in_thread(handoff.close)  # no limit: waits for the worker
    assert not second.wait(0.2)
    owner.gate.release()
    assert second.wait(HANG)
    assert not handoff.running
    assert owner.stops == [0.1]
    assert len(owner.processed) == 1 + 8  # what was queued before close() is processed


def test_the_worker_queueing_for_itself_never_waits_for_itself() -> None:
    owner = Owner(max_queue=2, max_block_secs=HANG, wake_at=2)
    handoff = owner.handoff
    owner.queue_for_itself = ("data", 1)
    handoff.put(("hold",))
    handoff.wake()
    wait_until(lambda: not handoff.queue)
    handoff.queue.extend([("self",), ("data", 1), ("data", 1)])  # full at "self"
    owner.gate.release()
    assert handoff.barrier().wait(HANG)  # it appended beyond max_queue instead of hanging
    handoff.close()
    assert [e[0] for e in owner.processed] == ["hold", "self", "data", "data", "data"]
    assert handoff.dropped == 0


@pytest.mark.parametrize("timeout", [None, 1e300])
def test_a_barrier_and_close_on_an_idle_worker_take_any_timeout(timeout: Optional[float]) -> None:
    owner = Owner(period=1e10)  # clamped below threading.TIMEOUT_MAX where it waits
    handoff = owner.handoff
    handoff.put(("data", 1))
    assert handoff.barrier().wait(HANG)
    handoff.close(timeout)
    assert not handoff.running
    assert owner.processed == [("data", 1)]


def test_pending_counts_the_owners_entries_not_the_handoffs_barriers_and_stop() -> None:
    """What a "queued items may not reach it" warning quotes after a close timed out."""
    owner = Owner()
    owner.hold()
    wait_until(lambda: not owner.handoff.queue)  # the worker is stuck in the hold entry
    handoff = owner.handoff
    for _ in range(3):
        handoff.put(("data", 1))
    handoff.put(("setting",))  # not data, but the owner's entry: it may be lost too
    assert handoff.pending() == 4
    assert not handoff.barrier().wait(0.05)
    assert handoff.close(timeout=0.05)
    assert len(handoff.queue) == 6  # four entries, a barrier and the stop entry
    assert handoff.pending() == 4
    owner.gate.release()
    wait_until(lambda: not handoff.running)
    assert handoff.pending() == 0
