"""``WarnOnce``: a warning the first time something goes wrong, a count every time.

Monitoring must never take training down, so what fails in it degrades to a warning;
but a failure that repeats every step must not flood the log. Each component holds one
``WarnOnce`` and names what went wrong by a key (the file, the kind of error, the
reading that failed).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["WarnOnce"]


class WarnOnce:
    """Log ``message`` at WARNING the first time ``key`` is reported; count them all."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def __call__(self, key: str, message: str, *args: Any) -> bool:
        """Report ``key``; True if this was its first time (and the warning was logged)."""
        with self._lock:
            count = self.counts.get(key, 0)
            self.counts[key] = count + 1
        if count == 0:
            self._logger.warning(message, *args)
        return count == 0

    def __contains__(self, key: str) -> bool:
        return key in self.counts
