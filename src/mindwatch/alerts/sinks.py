"""``AlertLog``: ``<run>/alerts.jsonl`` (:data:`~mindwatch.run.layout.ALERTS_FILE`), one
alert per line, written as it happens."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from mindwatch.alerts.model import Alert
from mindwatch.common.warn import WarnOnce

__all__ = ["AlertLog"]

log = logging.getLogger(__name__)


class AlertLog:
    """Append alerts to a JSON-lines file and to the log.

    Each alert is one ``write`` of a whole line in append mode, flushed at once, so a
    reader (``mindwatch watch``, a report) never sees half an alert and a crash loses
    none. A file that cannot be written is a warning, once; the alerts still reach
    the log.
    """

    def __init__(self, path: Path, *, echo: bool = True) -> None:
        self.path = path
        self.echo = echo
        self.count = 0
        self._lock = threading.Lock()
        self._warn = WarnOnce(log)

    def write(self, alert: Alert) -> None:
        with self._lock:
            self.count += 1
            if self.echo:
                log.warning("mindwatch: %s", alert.line())
            try:
                # The run folder deleted or moved mid-run: made again, as the event
                # writer makes it (mindwatch.events.writer), and the alerts go on there.
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # backslashreplace: a lone surrogate in a tag (a file name's bytes) is
                # written as its JSON escape instead of losing the alert
                with open(self.path, "a", encoding="utf-8", errors="backslashreplace") as handle:
                    handle.write(alert.to_json() + "\n")
            except OSError as exc:
                self._warn(
                    "write",
                    "mindwatch: cannot write alerts to %s: %s; they still go to the log",
                    self.path,
                    exc.strerror or exc,
                )
