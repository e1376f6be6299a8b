"""The ``Sink`` protocol and :class:`SinkGroup`, which keeps one failing sink from
stopping the others.

A sink is where a run's data goes: TensorBoard event files, the MindFormers tag view,
the console. The pipeline hands every sink every item (:mod:`mindwatch.sinks.items`);
a sink writes the kinds it cares about and ignores the rest. Sinks run on the pipeline's
thread, never on the training thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Optional, Protocol

from mindwatch.common.warn import WarnOnce
from mindwatch.sinks.items import Item

__all__ = ["Sink", "SinkGroup"]

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where items go. ``write`` must not block for long (the event writer's own queue
    bounds its wait): a sink that hangs holds up the sinks after it and the rules, though
    never training (with ``alerts.stop_on``, ``log_step`` waits for the rules' verdict a
    bounded time, then warns once and goes on). ``flush``/``close`` wait at most
    ``timeout`` seconds."""

    name: str

    def write(self, item: Item) -> None: ...

    def flush(self, timeout: Optional[float] = None) -> bool: ...

    def close(self, timeout: Optional[float] = None) -> None: ...


class SinkGroup:
    """Several sinks as one. An exception from a sink is a warning, once per sink (with
    what failed), and counted; the other sinks get the item all the same, and the
    failing one keeps getting later items (a full disk may come back)."""

    def __init__(self, sinks: Sequence[Sink] = ()) -> None:
        self.sinks: list[Sink] = list(sinks)
        self._warn = WarnOnce(log)

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def add(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def write(self, item: Item) -> None:
        for sink in self.sinks:
            try:
                sink.write(item)
            except Exception as exc:  # isolation: one sink's bug is not the others'
                self._failed(sink, "writing", exc)

    def flush(self, timeout: Optional[float] = None) -> bool:
        ok = True
        for sink in self.sinks:
            try:
                ok = sink.flush(timeout) and ok
            except Exception as exc:
                self._failed(sink, "flushing", exc)
                ok = False
        return ok

    def close(self, timeout: Optional[float] = None) -> None:
        for sink in self.sinks:
            try:
                sink.close(timeout)
            except Exception as exc:
                self._failed(sink, "closing", exc)

    @property
    def failures(self) -> dict[str, int]:
        """How often each sink failed, by name."""
        return dict(self._warn.counts)

    def _failed(self, sink: Sink, doing: str, exc: Exception) -> None:
        self._warn(
            sink.name,
            "mindwatch: the %s output failed %s: %r; the other outputs go on, and "
            "this one is tried again with the next values",
            sink.name,
            doing,
            exc,
        )
