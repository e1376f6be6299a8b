"""Close open writers at interpreter exit and on SIGTERM, so nothing logged is lost.

``atexit`` covers normal exits and uncaught exceptions. SIGTERM (what ``kill``, job
schedulers and ``msrun`` send) would otherwise end the process without running
``atexit``; the handler installed here closes every registered object, then hands the
signal on to whatever handler was there before (or re-raises it with the default
action, so the exit status still says "terminated by SIGTERM"). SIGKILL cannot be
caught: what survives it is what the writer had already handed to the OS, which is
everything logged up to ``flush_secs`` before the kill.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref
from types import FrameType
from typing import Any, Callable, Optional, Protocol, Union

__all__ = ["Closeable", "close_all", "register", "unregister"]

log = logging.getLogger(__name__)

_SignalHandler = Union[Callable[[int, Optional[FrameType]], Any], int, signal.Handlers, None]


class Closeable(Protocol):
    def close(self, timeout: Optional[float] = None) -> None: ...


# How long exit and SIGTERM wait for each object: a hung network file system must not
# keep a terminated job alive forever.
EXIT_TIMEOUT_SECS = 30.0

# The signal that made us close everything, if any (run.json then says "terminated").
signal_received: Optional[int] = None

# Reentrant: SIGTERM can arrive while the main thread is inside register().
_lock = threading.RLock()
# Insertion-ordered weak registry: closing in reverse order closes a Monitor before the
# writers it owns, so its final records still reach their files.
_objects: dict[int, weakref.ReferenceType[Closeable]] = {}
_installed = False
_previous_sigterm: _SignalHandler = None


def register(obj: Closeable) -> None:
    """Close ``obj`` at interpreter exit or SIGTERM unless it is closed earlier."""
    global _installed
    with _lock:
        _objects[id(obj)] = weakref.ref(obj)
        if not _installed:
            _installed = True
            atexit.register(close_all)
            _install_sigterm()


def unregister(obj: Closeable) -> None:
    with _lock:
        _objects.pop(id(obj), None)


def close_all(timeout: Optional[float] = EXIT_TIMEOUT_SECS) -> None:
    """Close every registered object, newest first; errors are logged, never raised."""
    with _lock:
        refs = list(_objects.values())
        _objects.clear()
    for ref in reversed(refs):
        obj = ref()
        if obj is None:
            continue
        try:
            obj.close(timeout=timeout)
        except Exception:  # a failing close must not stop the others
            log.exception("mindwatch: closing %r at exit failed", obj)


def _install_sigterm() -> None:
    global _previous_sigterm
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):  # pragma: no cover - exotic embedded interpreters
        return
    if previous is signal.SIG_IGN:
        return  # the process chose to ignore SIGTERM; respect that
    _previous_sigterm = previous
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global signal_received
    signal_received = signum
    close_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    # Default action: die by the same signal, so the parent sees the usual status.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
