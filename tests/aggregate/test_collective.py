"""``CollectiveGuard``: the waits it promises to bound stay bounded when the writing
after a collective (``after``: this rank's own output) hangs."""

from __future__ import annotations

import threading
from typing import Any, Callable

from mindwatch.aggregate.collective import CollectiveGuard


def returns_within(seconds: float, call: Callable[[], Any]) -> list[Any]:
    """``call()`` on a helper thread; its result, or an AssertionError if it is still
    running after ``seconds`` (a wait that ignored its bound)."""
    result: list[Any] = []
    helper = threading.Thread(target=lambda: result.append(call()), daemon=True)
    helper.start()
    helper.join(seconds)
    assert not helper.is_alive(), f"{call} did not return within {seconds} s"
    return result


def test_sync_and_stop_do_not_wait_for_a_hung_writer_past_their_bounds() -> None:
    """The collective answered; its ``after`` hangs (a writer stuck on a full disk).
    ``sync(0.2)`` says False instead of waiting for it, ``stop()`` joins the thread only
    briefly (2 s) and returns with the thread still there; the writing ends later."""
    guard = CollectiveGuard()
    release = threading.Event()
    written: list[int] = []

    def after(result: int) -> None:
        release.wait(30)
        written.append(result)

    assert guard.call(lambda: 42, 5.0, after=after) == 42
    assert returns_within(10, lambda: guard.sync(0.2)) == [False]
    returns_within(10, guard.stop)
    assert guard._thread.is_alive()
    assert written == []
    release.set()
    guard._thread.join(10)
    assert written == [42]
    assert not guard._thread.is_alive()
