"""Folders that already mix runs: two series shown by TensorBoard as one run.

mindwatch itself never writes a second run into a folder (:mod:`mindwatch.run.claim`),
but older versions did, and so do other tools (a script's ``SummaryWriter`` pointed at
the same folder twice). TensorBoard then draws both runs as one zig-zag curve with two
points per step, and every statistic computed from it is wrong.

A folder mixes runs when one of its event files starts a tag again at a step an earlier
file had already passed, without TensorBoard's purge marker (``SessionLog.START``, which
a resumed run writes at its first step and which voids what came before from there on).
Files that continue each other (a writer's next file, a reopened run, evaluation added
after training) do not count; nor do files of different tools with different tags (e.g.
MindFormers' own writer beside mindwatch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from shlex import quote
from typing import Optional

from mindwatch.common.i18n import _, ngettext
from mindwatch.events.reader import RecordReader, event_files

__all__ = ["FileSteps", "MixedRuns", "file_steps", "mixed_runs"]

# DataType values of the tensors TensorBoard plots as scalars (float, double, int32, int64).
_NUMBER_DTYPES = (1, 2, 3, 9)


@dataclass(frozen=True)
class FileSteps:
    """The scalar steps of one event file: per tag ``(first, last)``, and the step of
    its first purge marker (None without one)."""

    name: str
    tags: dict[str, tuple[int, int]]
    purge: Optional[int]

    @property
    def first(self) -> Optional[int]:
        return min((lo for lo, _hi in self.tags.values()), default=None)

    @property
    def last(self) -> Optional[int]:
        return max((hi for _lo, hi in self.tags.values()), default=None)


@dataclass(frozen=True)
class MixedRuns:
    """A folder holding more than one run: its files, one list per run, oldest first."""

    folder: Path
    runs: list[list[FileSteps]]

    def describe(self) -> str:
        """``2 runs mixed in one folder: steps 1-200 (1 file), steps 1-200 (1 file)``."""
        parts = []
        for files in self.runs:
            first = min((f.first for f in files if f.first is not None), default=None)
            last = max((f.last for f in files if f.last is not None), default=None)
            part = ngettext(
                "steps {first}-{last} ({count} file)",
                "steps {first}-{last} ({count} files)",
                len(files),
            )
            parts.append(part.format(first=first, last=last, count=len(files)))
        return _("{count} runs mixed in one folder: {parts}").format(
            count=len(self.runs), parts=", ".join(parts)
        )

    def split_commands(self) -> list[str]:
        """Shell commands that move every run after the first into a folder of its own
        (``<folder>-2``, ``-3``...), which TensorBoard then shows as separate runs."""
        commands = []
        for n, files in enumerate(self.runs[1:], start=2):
            target = self.folder.with_name(f"{self.folder.name}-{n}")
            names = " ".join(quote(str(self.folder / f.name)) for f in files)
            commands.append(f"mkdir {quote(str(target))} && mv {names} {quote(str(target))}/")
        return commands


def file_steps(path: Path) -> FileSteps:
    """Read one event file's scalar step ranges and first purge marker."""
    from tensorboard.compat.proto.event_pb2 import Event

    from mindwatch.events.fastscalars import decode_uniform_groups

    payloads = list(RecordReader(path).read())
    fast = decode_uniform_groups(payloads)
    ranges: dict[str, tuple[int, int]] = {}

    def note(tag: str, step: int) -> None:
        lo, hi = ranges.get(tag, (step, step))
        ranges[tag] = (min(lo, step), max(hi, step))

    for tag_id, step in zip(fast.tag.tolist(), fast.step.tolist()):
        note(fast.tags[tag_id], step)
    purge: Optional[int] = None
    for i in (~fast.handled).nonzero()[0].tolist():
        try:
            event = Event.FromString(payloads[i])
        except Exception:  # not an event: the reader's corruption counters say so
            continue
        what = event.WhichOneof("what")
        if what == "session_log" and event.session_log.status == 1 and purge is None:
            purge = int(event.step)
        elif what == "summary":
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                numeric = kind == "tensor" and value.tensor.dtype in _NUMBER_DTYPES
                if kind == "simple_value" or numeric:
                    note(value.tag, int(event.step))
    return FileSteps(path.name, ranges, purge)


def mixed_runs(folder: Path) -> Optional[MixedRuns]:
    """The runs mixed in ``folder``, or None when its event files hold one run."""
    names = event_files(folder)
    if len(names) < 2:
        return None
    runs: list[list[FileSteps]] = []
    reached: dict[str, int] = {}  # tag -> last step of the current run
    for name in names:
        try:
            steps = file_steps(folder / name)
        except OSError:
            continue
        restarts = any(
            tag in reached and lo < reached[tag] and (steps.purge is None or steps.purge > lo)
            for tag, (lo, _) in steps.tags.items()
        )
        if restarts or not runs:
            runs.append([steps])
            reached = {}
        else:
            runs[-1].append(steps)
        for tag, (_lo, hi) in steps.tags.items():
            reached[tag] = max(hi, reached.get(tag, hi))
    return MixedRuns(folder, runs) if len(runs) > 1 else None
