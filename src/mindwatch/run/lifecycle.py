"""Close open writers at interpreter exit and on SIGTERM, so nothing logged is lost.

``atexit`` covers normal exits and uncaught exceptions. SIGTERM (what ``kill``, job
schedulers and ``msrun`` send) would otherwise end the process without running
``atexit``. The handler installed here:

* when SIGTERM had its default action: closes every registered object (bounded by
  :data:`EXIT_TIMEOUT_SECS` each, so a hung network file system cannot keep the job
  alive), then dies by SIGTERM again, so the exit status still says "terminated";
* when the program had its own Python handler (often a graceful shutdown that sets a
  flag, finishes the step and saves a checkpoint): flushes everything, then calls that
  handler and leaves closing to ``close()`` / ``atexit``, so the steps the program
  still runs are logged too;
* when SIGTERM was ignored, or handled outside Python: leaves it alone.

A second SIGTERM while the first is being handled is ignored (launchers often forward
one on top of the scheduler's), so it cannot cut the first close short. Forked children
(e.g. dataset worker processes) forget the parent's objects and get the parent's
original handler back, so terminating a worker never touches the parent's files.

SIGKILL cannot be caught: what survives it is what the writers had already handed to
the OS, which is everything logged up to ``flush_secs`` before the kill.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import threading
import weakref
from types import FrameType
from typing import Any, Callable, Optional, Protocol, Union

__all__ = ["EXIT_TIMEOUT_SECS", "Closeable", "close_all", "flush_all", "register", "unregister"]

log = logging.getLogger(__name__)

_SignalHandler = Union[Callable[[int, Optional[FrameType]], Any], int, signal.Handlers, None]

# How long exit and SIGTERM wait for each object.
EXIT_TIMEOUT_SECS = 30.0


class Closeable(Protocol):
    def flush(self, timeout: Optional[float] = None) -> bool: ...

    def close(self, timeout: Optional[float] = None) -> None: ...


# True once close_all() runs (interpreter exit or SIGTERM).
closing_all = False
# The signal that made us close everything, if any (run.json then says "terminated").
signal_received: Optional[int] = None

# Reentrant: SIGTERM can arrive while the main thread is inside register().
_lock = threading.RLock()
# Insertion-ordered weak registry: closing in reverse order closes a Monitor before the
# writers it owns, so its final records still reach their files.
_objects: dict[int, weakref.ReferenceType[Closeable]] = {}
_atexit_installed = False
_sigterm_installed = False
_previous_sigterm: _SignalHandler = None
_handling = False


def register(obj: Closeable) -> None:
    """Close ``obj`` at interpreter exit or SIGTERM unless it is closed earlier."""
    global _atexit_installed
    with _lock:
        _objects[id(obj)] = weakref.ref(obj)
        if not _atexit_installed:
            _atexit_installed = True
            atexit.register(close_all)
        if not _sigterm_installed:
            _install_sigterm()  # retried until a registration comes from the main thread


def unregister(obj: Closeable) -> None:
    with _lock:
        _objects.pop(id(obj), None)


def _live_objects() -> list[Closeable]:
    with _lock:
        refs = list(_objects.values())
    return [obj for obj in (ref() for ref in refs) if obj is not None]


def close_all(timeout: Optional[float] = EXIT_TIMEOUT_SECS) -> None:
    """Close every registered object, newest first; errors are logged, never raised."""
    global closing_all
    closing_all = True  # objects may skip work that needs other processes (collectives)
    objects = _live_objects()
    with _lock:
        _objects.clear()
    for obj in reversed(objects):
        try:
            obj.close(timeout=timeout)
        except Exception:  # a failing close must not stop the others
            log.exception("mindwatch: closing %r at exit failed", obj)


def flush_all(timeout: Optional[float] = EXIT_TIMEOUT_SECS) -> None:
    """Flush every registered object; errors are logged, never raised."""
    for obj in reversed(_live_objects()):
        try:
            obj.flush(timeout=timeout)
        except Exception:
            log.exception("mindwatch: flushing %r failed", obj)


def _install_sigterm() -> None:
    global _previous_sigterm, _sigterm_installed
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):  # pragma: no cover - exotic embedded interpreters
        return
    _sigterm_installed = True
    if previous is signal.SIG_IGN or previous is None:
        return  # ignored on purpose, or handled outside Python: leave it alone
    _previous_sigterm = previous
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global signal_received, _handling
    if _handling:
        return  # a second SIGTERM must not cut the first one's close short
    _handling = True
    try:
        previous = _previous_sigterm
        if callable(previous):
            flush_all()
            previous(signum, frame)
            return
        signal_received = signum
        close_all()
    finally:
        _handling = False
    # Default action: die by the same signal, so the parent sees the usual status.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _after_fork_in_child() -> None:
    global _sigterm_installed, _previous_sigterm, _handling, _lock
    _lock = threading.RLock()  # the parent's lock may have been held at fork time
    _objects.clear()
    _handling = False
    if _sigterm_installed and _previous_sigterm is not None:
        with contextlib.suppress(ValueError, OSError, TypeError):
            signal.signal(signal.SIGTERM, _previous_sigterm)
    _sigterm_installed = False
    _previous_sigterm = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
