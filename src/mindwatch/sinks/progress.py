"""The progress display: one line per report, or a rich progress bar, fitted to the width.

Printing happens only on the steps that are shown (every ``print_every`` steps, at
least ``print_secs`` apart, and the last step), so the other steps pay one integer
comparison. The seconds are the steps' own times (when ``log_step`` was called), not
the printing thread's, so the pacing is the same however late the lines are printed,
and a test sets it with the times it gives. A bar needs a known total and a terminal;
otherwise (log files, CI, ``msrun`` worker logs) plain lines are printed, which stay
readable when captured.

**Width.** A report is one line that fits the width: the step count (``step 120/300``)
and the ETA always stay; the other fields drop out, least important first
(:data:`FIELDS` lists them most important first). On a terminal the width is the
terminal's (rich's measure: ``COLUMNS`` when set, else the terminal's size). Elsewhere
(a pipe, a log file, CI) the line is printed without escape codes and fitted to
``COLUMNS`` when that environment variable is set, else printed whole.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, Optional

from mindwatch.sinks.base import SinkPlace, TypedSink, handles
from mindwatch.sinks.items import EvalValues, StepValues, TotalSteps

if TYPE_CHECKING:
    from mindwatch.config import MonitorConfig

__all__ = ["FIELDS", "ProgressReporter", "ProgressSink", "fit_line", "format_values"]

PREFIX = "[mindwatch] "
SEPARATOR = " | "

#: (tag, label, format) of the fields a report shows, most important first: on a
#: narrow terminal the last ones are left out first.
FIELDS = (
    ("train/loss", "loss", "{:.4f}"),
    ("train/grad_norm", "grad_norm", "{:.3f}"),
    ("train/lr", "lr", "{:.3e}"),
    ("perf/step_time_ms", "", "{:.1f} ms/step"),
    ("perf/tokens_per_s", "tokens/s", "{:.0f}"),
    ("perf/samples_per_s", "samples/s", "{:.0f}"),
    ("perf/mfu", "MFU", "{:.1%}"),
)


def _fmt(fmt: str, value: float) -> str:
    return fmt.format(value) if math.isfinite(value) else str(value)


def _fields(values: Mapping[str, float]) -> list[str]:
    return [
        f"{label} {_fmt(fmt, values[tag])}".strip() for tag, label, fmt in FIELDS if tag in values
    ]


def format_values(values: Mapping[str, float]) -> str:
    """``loss 0.1234 | grad_norm 1.234 | ...`` for the tags that are present (all of them)."""
    return SEPARATOR.join(_fields(values))


def fit_line(head: str, fields: Sequence[str], tail: Optional[str], width: Optional[int]) -> str:
    """``head | fields... | tail`` in at most ``width`` cells (None: no limit).

    ``head`` and ``tail`` always stay; ``fields`` (most important first) are dropped from
    the end until the line fits. A line that cannot fit even then is cut with an ellipsis.
    """
    from rich.cells import cell_len
    from rich.text import Text

    kept = list(fields)
    while True:
        line = SEPARATOR.join([head, *kept, *([tail] if tail else [])])
        if width is None or cell_len(line) <= width:
            return line
        if not kept:
            text = Text(line)
            text.truncate(max(width, 1), overflow="ellipsis")
            return text.plain
        kept.pop()


def _fmt_duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _env_columns() -> Optional[int]:
    """``COLUMNS`` as a width, if it is set to a positive number."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return columns if columns > 0 else None


class ProgressReporter:
    """Show training progress every ``every`` steps (0: never), at least ``secs``
    seconds apart, and at step ``total``."""

    def __init__(
        self,
        *,
        every: int,
        secs: float = 0.0,
        mode: str = "auto",
        total: Optional[int] = None,
        stream: Optional[IO[str]] = None,
    ) -> None:
        self.every = every
        self.secs = secs
        self.total = total
        self._shown_wall = -math.inf  # the time of the step shown last
        self._stream = stream if stream is not None else sys.stdout
        self._next = min(every, total) if total else every
        self._bar: Any = None
        self._bar_column: Any = None
        self._task: Any = None
        self._start_step: Optional[int] = None
        self._start_time = 0.0
        self.last_shown: Optional[int] = None
        self._shown: tuple[int, Mapping[str, float], float] = (0, {}, 0.0)
        self._interactive = bool(getattr(self._stream, "isatty", lambda: False)())
        self._console: Any = None
        use_bar = mode == "bar" or (mode == "auto" and self._interactive)
        self.enabled = mode != "off" and every > 0
        if self.enabled and use_bar and total:
            self._start_bar(total)

    # ----------------------------------------------------------------- the width

    def _terminal(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self._stream, highlight=False)
        return self._console

    def width(self) -> Optional[int]:
        """The cells a line may take (None: no limit); see the module's docstring."""
        if self._interactive or self._bar is not None:
            return int(self._terminal().width)
        return _env_columns()

    # ------------------------------------------------------------------- the bar

    def _start_bar(self, total: int) -> None:
        from rich.progress import BarColumn, Progress, ProgressColumn, Task
        from rich.text import Text

        reporter = self

        class LineColumn(ProgressColumn):
            """The report, fitted to what the bar leaves of the terminal's width."""

            def render(self, task: Task) -> Text:
                return Text(reporter._bar_text(), no_wrap=True, overflow="crop")

        self._bar_column = BarColumn(bar_width=10)
        self._bar = Progress(
            self._bar_column,
            LineColumn(),
            console=self._terminal(),
            transient=False,
        )
        self._task = self._bar.add_task("train", total=total)
        self._bar.start()

    def _fit_bar(self) -> None:
        """The bar takes what the whole report leaves (10 to 40 cells): the report's
        fields matter more than a long bar."""
        from rich.cells import cell_len

        step, values, now = self._shown
        spare = int(self._terminal().width) - cell_len(self._line(step, values, now, None)) - 1
        self._bar_column.bar_width = max(10, min(40, spare))

    def _bar_text(self) -> str:
        step, values, now = self._shown
        width = int(self._terminal().width) - int(self._bar_column.bar_width) - 1  # a space
        return self._line(step, values, now, max(width, 1))

    # ----------------------------------------------------------------- reporting

    def due(self, step: int, wall: Optional[float] = None) -> bool:
        """True when ``step`` (logged at ``wall``, default now) should be shown (cheap:
        called every step)."""
        if self._start_step is None:
            self._start_step = step
            self._start_time = time.time() if wall is None else wall
        if not self.enabled or step < self._next:
            return False
        if step == self.total or self.secs <= 0:
            return True
        if (time.time() if wall is None else wall) - self._shown_wall >= self.secs:
            return True
        self._advance(step)  # too soon after the last line: wait for the next round step
        return False

    def _advance(self, step: int) -> None:
        nxt = (step // self.every + 1) * self.every
        self._next = min(nxt, self.total) if self.total and step < self.total else nxt

    def _line(
        self, step: int, values: Mapping[str, float], now: float, width: Optional[int]
    ) -> str:
        total, tail = self.total, None
        if total and step <= total:
            head = f"step {step}/{total}"
            done = step - (self._start_step or 0)
            if step == total:
                took = now - self._start_time  # since the first step (after compiling)
                tail = f"elapsed {took:.1f} s" if took < 60 else f"elapsed {_fmt_duration(took)}"
            elif done > 0:
                eta = (now - self._start_time) / done * (total - step)
                tail = f"ETA {_fmt_duration(eta)}"
        else:  # no total, or a total that was wrong: no ETA rather than a false one
            head = f"step {step}"
        return fit_line(head, _fields(values), tail, width)

    def update(self, step: int, values: Mapping[str, float], now: float) -> None:
        """Show ``values`` at ``step``; call when :meth:`due` says so."""
        self._advance(step)
        self._shown_wall = now
        self.last_shown = step
        self._shown = (step, values, now)
        if self._bar is not None:
            self._fit_bar()
            self._bar.update(self._task, completed=min(step, self._bar.tasks[0].total))
            self._bar.refresh()
            return
        width = self.width()
        line = self._line(step, values, now, None if width is None else width - len(PREFIX))
        print(PREFIX + line, file=self._stream, flush=True)

    def say(self, line: str) -> None:
        """Print ``line`` (an evaluation's results): above the bar when there is one."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class ProgressSink(TypedSink):
    """The console: progress every ``every`` steps, at least ``secs`` seconds apart, and
    each evaluation's results (rank 0).

    Lines are printed on the pipeline's thread, shortly after the step (at most the
    pipeline's wake-up period, a tenth of a second). The last step logged is always
    shown: at the known total, or when the sink closes.
    """

    name = "console progress"

    def __init__(
        self,
        *,
        every: int,
        secs: float = 0.0,
        mode: str = "auto",
        total: Optional[int] = None,
        stream: Optional[IO[str]] = None,
    ) -> None:
        self._every, self._secs, self._mode = every, secs, mode
        self._stream = stream if stream is not None else sys.stdout
        self.reporter = self._reporter(total)
        self._last: Optional[StepValues] = None
        self._evals: list[EvalValues] = []  # waiting for the step they were made at

    @classmethod
    def from_config(cls, config: MonitorConfig, place: SinkPlace) -> Optional[ProgressSink]:
        """On rank 0's ``main`` route: the job's progress, printed once."""
        if place.route != "main" or place.rank != 0:
            return None
        return cls(
            every=config.print_every,
            secs=config.print_secs,
            mode=config.progress,
            total=place.total_steps,
        )

    def _reporter(self, total: Optional[int]) -> ProgressReporter:
        return ProgressReporter(
            every=self._every, secs=self._secs, mode=self._mode, total=total, stream=self._stream
        )

    @handles(StepValues)
    def _step(self, item: StepValues) -> None:
        reporter = self.reporter
        self._last = item
        if reporter.due(item.step, item.wall):
            reporter.update(item.step, dict(item.values), item.wall)
        if self._evals:
            self._show_evals(item.step)

    @handles(EvalValues)
    def _eval(self, item: EvalValues) -> None:
        if item.values and self.reporter.enabled:
            self._evals.append(item)
            self._show_evals(self._last.step if self._last is not None else None)

    @handles(TotalSteps)
    def _total(self, item: TotalSteps) -> None:
        self.reporter.close()
        self.reporter = self._reporter(item.total)

    def _show_evals(self, step: Optional[int], *, every_one: bool = False) -> None:
        """Evaluation results up to ``step``: under reduction the steps arrive in batches,
        after the evaluations made at their end, which would otherwise print first."""
        while self._evals and (every_one or (step is not None and self._evals[0].step <= step)):
            item = self._evals.pop(0)
            shown = ", ".join(f"{tag} {value:.4g}" for tag, value in item.values)
            self.reporter.say(f"{PREFIX}eval at step {item.step} | {shown}")

    def _show_last(self) -> None:
        """The last step logged, if it was not shown (a run shorter than its total, or
        with no total, ends between two reports)."""
        last, reporter = self._last, self.reporter
        if last is not None and reporter.enabled and reporter.last_shown != last.step:
            reporter.due(last.step, last.wall)
            reporter.update(last.step, dict(last.values), last.wall)

    def close(self, timeout: Optional[float] = None) -> None:
        self._show_last()
        self._show_evals(None, every_one=True)
        self.reporter.close()
