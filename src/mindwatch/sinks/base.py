"""What a sink is: the ``Sink`` protocol, :class:`TypedSink` (one method per item type
it writes), how a sink is opened from the config (:class:`SinkPlace`), and
:class:`SinkGroup`, which routes each item to the sinks that write its type and keeps
one failing sink from stopping the others.

A sink is where a run's data goes: TensorBoard event files, the MindFormers tag view,
the console, the Prometheus exporter. Sinks run on the pipeline's thread, never on the
training thread. Two methods carry the data, as in torchtitan's loggers: ``write`` an
item (:mod:`mindwatch.sinks.items`), ``close`` at the end (and ``flush`` on the way).
mindwatch's own sinks are :class:`TypedSink` subclasses, whose methods marked
``@handles(StepValues)`` (and so on) declare the types they write; any other object
with ``name``, ``write``, ``flush`` and ``close`` (``Monitor.add_sink``) gets every item.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, MethodType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional, Protocol, TypeVar

from mindwatch.common.warn import WarnOnce
from mindwatch.sinks.items import Item

if TYPE_CHECKING:
    from mindwatch.config import MonitorConfig
    from mindwatch.events.writer import EventFileWriter
    from mindwatch.exporter import RunExporter
    from mindwatch.metrics.derived import StepRates

__all__ = ["Sink", "SinkGroup", "SinkKind", "SinkPlace", "TypedSink", "handles"]

log = logging.getLogger(__name__)

_Handler = TypeVar("_Handler", bound=Callable[..., None])
_HANDLES = "_mindwatch_sink_handles"  # the item types a marked method writes


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


def handles(*kinds: type) -> Callable[[_Handler], _Handler]:
    """Mark a method of a :class:`TypedSink` as the one that writes items of ``kinds``
    (exact types of :mod:`mindwatch.sinks.items`)."""

    def mark(method: _Handler) -> _Handler:
        setattr(method, _HANDLES, kinds)
        return method

    return mark


class TypedSink:
    """A sink whose item types are declared, one ``@handles`` method each.

    The table (:attr:`handlers`, item type -> method) is built once, when the class is
    defined (a subclass inherits and may override the methods), so writing an item is
    one dict lookup and no chain of ``isinstance``; a :class:`SinkGroup` calls the
    handlers itself and hands a sink only the types it writes. ``flush`` and ``close``
    do nothing unless a subclass has something to flush or close.
    """

    name: str
    handlers: ClassVar[Mapping[type, Callable[[Any, Any], None]]] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        methods: dict[type, str] = {}
        for klass in reversed(cls.__mro__):  # a subclass's marks win
            for attr, value in vars(klass).items():
                for kind in getattr(value, _HANDLES, ()):
                    methods[kind] = attr
        # getattr on the class: a subclass's override of a marked method is the handler.
        cls.handlers = MappingProxyType({kind: getattr(cls, a) for kind, a in methods.items()})

    def write(self, item: Item) -> None:
        handler = self.handlers.get(type(item))
        if handler is not None:
            handler(self, item)

    def handler_for(self, kind: type) -> Optional[Callable[[Any], None]]:
        """This sink's bound method for items of ``kind``; None when it writes none."""
        handler = self.handlers.get(kind)
        return None if handler is None else MethodType(handler, self)

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self, timeout: Optional[float] = None) -> None:
        return None


@dataclass(frozen=True)
class SinkPlace:
    """Where a sink would go, for :meth:`SinkKind.from_config`: a route of this
    process's pipeline and what is open for it.

    ``route``: ``main`` (the run this process writes: shared values, rules, run.json)
    or ``rank`` (this rank's own folder under reduction). ``writer``: the route's event
    files (None: it has none). ``exporter``: this process's Prometheus exporter, when
    the config gives it one.
    """

    route: Literal["main", "rank"]
    rank: int
    world_size: int
    reduced: bool
    total_steps: Optional[int]
    rates: StepRates
    writer: Optional[EventFileWriter] = None
    exporter: Optional[RunExporter] = None


class SinkKind(Protocol):
    """A kind of sink the config may ask for: its class, whose ``from_config`` returns
    the sink for ``place``, or None when the config (or the place) leaves it off."""

    def from_config(self, config: MonitorConfig, place: SinkPlace) -> Optional[Sink]: ...


# (sink, the callable that writes one item to it), in the group's order
_Route = tuple[tuple[Sink, Callable[[Any], None]], ...]


class SinkGroup:
    """Several sinks as one. Each item goes to the sinks that write its type, in the
    order they were added (one route per item type, built at its first item). An
    exception from a sink is a warning, once per sink (with what failed), and counted;
    the other sinks get the item all the same, and the failing one keeps getting later
    items (a full disk may come back)."""

    def __init__(self, sinks: Sequence[Sink] = ()) -> None:
        self._sinks: list[Sink] = list(sinks)
        self._routes: dict[type, _Route] = {}
        self._warn = WarnOnce(log)

    def __bool__(self) -> bool:
        return bool(self._sinks)

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The sinks, in the order they get items."""
        return tuple(self._sinks)

    def add(self, sink: Sink) -> None:
        self._sinks.append(sink)
        self._routes = {}  # built again, with this sink, at each type's next item

    def write(self, item: Item) -> None:
        route = self._routes.get(type(item))
        if route is None:
            route = self._routes[type(item)] = self._route(type(item))
        for sink, write in route:
            try:
                write(item)
            except Exception as exc:  # isolation: one sink's bug is not the others'
                self._failed(sink, "writing", exc)

    def _route(self, kind: type) -> _Route:
        """The sinks that write items of ``kind``: a :class:`TypedSink` by its table
        (none of its methods: it is skipped), any other sink by its ``write``."""
        route: list[tuple[Sink, Callable[[Any], None]]] = []
        for sink in self._sinks:
            write = sink.handler_for(kind) if isinstance(sink, TypedSink) else sink.write
            if write is not None:
                route.append((sink, write))
        return tuple(route)

    def flush(self, timeout: Optional[float] = None) -> bool:
        ok = True
        for sink in self._sinks:
            try:
                ok = sink.flush(timeout) and ok
            except Exception as exc:
                self._failed(sink, "flushing", exc)
                ok = False
        return ok

    def close(self, timeout: Optional[float] = None) -> None:
        for sink in self._sinks:
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
