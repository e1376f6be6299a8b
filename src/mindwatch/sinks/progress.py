"""The progress display: a rich progress bar with ETA, or one plain line per interval.

Printing happens only on the steps that are shown (every ``print_every`` steps), so the
other steps pay one integer comparison. A bar needs a known total and a terminal;
otherwise (log files, CI, ``msrun`` worker logs) plain lines are printed, which stay
readable when captured.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import IO, Any, Optional

from mindwatch.sinks.items import EvalValues, Item, StepValues, TotalSteps

__all__ = ["ProgressReporter", "ProgressSink", "format_values"]

_SHOWN = (
    ("train/loss", "loss", "{:.4f}"),
    ("train/lr", "lr", "{:.3e}"),
    ("train/grad_norm", "grad_norm", "{:.3f}"),
    ("perf/step_time_ms", "step", "{:.1f} ms"),
    ("perf/samples_per_s", "samples/s", "{:.0f}"),
    ("perf/tokens_per_s", "tokens/s", "{:.0f}"),
    ("perf/mfu", "MFU", "{:.1%}"),
)


def _fmt(fmt: str, value: float) -> str:
    return fmt.format(value) if math.isfinite(value) else str(value)


def format_values(values: Mapping[str, float]) -> str:
    """``loss 0.1234 | lr 1.000e-03 | ...`` for the tags that are present."""
    parts = [f"{label} {_fmt(fmt, values[tag])}" for tag, label, fmt in _SHOWN if tag in values]
    return " | ".join(parts)


def _fmt_eta(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


class ProgressReporter:
    """Show training progress every ``every`` steps (0: never)."""

    def __init__(
        self,
        *,
        every: int,
        mode: str = "auto",
        total: Optional[int] = None,
        stream: Optional[IO[str]] = None,
    ) -> None:
        self.every = every
        self.total = total
        self._stream = stream if stream is not None else sys.stdout
        self._next = every
        self._bar: Any = None
        self._task: Any = None
        self._start_step: Optional[int] = None
        self._start_time = 0.0
        interactive = bool(getattr(self._stream, "isatty", lambda: False)())
        use_bar = mode == "bar" or (mode == "auto" and interactive)
        self.enabled = mode != "off" and every > 0
        if self.enabled and use_bar and total:
            self._start_bar(total)

    def _start_bar(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[values]}"),
            console=Console(file=self._stream),
            transient=False,
        )
        self._task = self._bar.add_task("train", total=total, values="")
        self._bar.start()

    def due(self, step: int) -> bool:
        """True when ``step`` should be shown (cheap: called every step)."""
        if self._start_step is None:
            self._start_step, self._start_time = step, time.time()
        return self.enabled and step >= self._next

    def update(self, step: int, values: Mapping[str, float], now: float) -> None:
        """Show ``values`` at ``step``; call when :meth:`due` says so."""
        self._next = (step // self.every + 1) * self.every
        text = format_values(values)
        if self._bar is not None:
            self._bar.update(self._task, completed=step, values=text)
            return
        if self.total:
            head = f"step {step}/{self.total}"
            done = step - (self._start_step or 0)
            if done > 0 and step < self.total:
                eta = (now - self._start_time) / done * (self.total - step)
                text = f"{text} | ETA {_fmt_eta(eta)}"
        else:
            head = f"step {step}"
        print(f"[mindwatch] {head} | {text}", file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class ProgressSink:
    """The console: progress every ``every`` steps and each evaluation's results (rank 0).

    Lines are printed on the pipeline's thread, shortly after the step (at most the
    pipeline's wake-up period, a tenth of a second).
    """

    name = "console progress"

    def __init__(
        self,
        *,
        every: int,
        mode: str = "auto",
        total: Optional[int] = None,
        stream: Optional[IO[str]] = None,
    ) -> None:
        self._every, self._mode = every, mode
        self._stream = stream if stream is not None else sys.stdout
        self.reporter = ProgressReporter(every=every, mode=mode, total=total, stream=self._stream)

    def write(self, item: Item) -> None:
        reporter = self.reporter
        if isinstance(item, StepValues):
            if reporter.due(item.step):
                reporter.update(item.step, dict(item.values), item.wall)
        elif isinstance(item, EvalValues):
            if item.values and reporter.enabled:
                shown = ", ".join(f"{tag} {value:.4g}" for tag, value in item.values)
                print(
                    f"[mindwatch] eval at step {item.step} | {shown}", file=self._stream, flush=True
                )
        elif isinstance(item, TotalSteps):
            reporter.close()
            self.reporter = ProgressReporter(
                every=self._every, mode=self._mode, total=item.total, stream=self._stream
            )

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self, timeout: Optional[float] = None) -> None:
        self.reporter.close()
