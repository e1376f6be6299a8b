"""What the event files of a run folder really hold, for the checks that compare it with
what should be there (``mindwatch doctor``, ``mindwatch tensorboard``).

Per file (:class:`FileContents`): its size, the records read, the damaged regions (and
whether each is zero-filled, what power loss leaves), an incomplete last record (a torn
tail), whether it holds anything TensorBoard shows or only its header, and the tags
whose steps go back or repeat inside it (:mod:`mindwatch.events.steporder`). Per folder
(:class:`RunContents`): the steps the files hold, as TensorBoard shows them (restart
markers applied across files).
"""

from __future__ import annotations

import contextlib
import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from mindwatch.events.reader import HEADER, RecordReader, _tensor_scalar, event_files
from mindwatch.events.steporder import StepOrder, is_step_axis, steps_out_of_order

__all__ = ["FileContents", "RunContents", "file_contents", "run_contents", "shows_something"]

_SHOWN = ("summary", "graph_def", "meta_graph_def", "tagged_run_metadata")


@dataclass
class FileContents:
    """One event file, read to its end."""

    path: Path
    size: int
    records: int = 0
    shown: int = 0  # records holding something TensorBoard shows (values, a graph)
    damage: list[tuple[int, int]] = field(default_factory=list)  # (offset, length)
    zero_filled: list[bool] = field(default_factory=list)  # per damaged region: mostly zeros
    records_before_damage: Optional[int] = None
    torn: int = 0  # bytes of an incomplete last record
    tags: list[str] = field(default_factory=list)
    # The scalar points in reading order: tag (index into tags), step, and how many
    # restart markers came before each; and the markers' steps.
    point_tags: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, np.int64))
    point_steps: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, np.int64))
    point_epochs: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, np.int64))
    purges: list[int] = field(default_factory=list)
    order: list[StepOrder] = field(default_factory=list)  # group = index into tags

    @property
    def empty(self) -> bool:
        return self.size == 0

    @property
    def header_only(self) -> bool:
        """Readable, but nothing in it that TensorBoard shows (a file header, restart
        markers): a writer that was opened and never given a value."""
        return self.size > 0 and self.shown == 0 and not self.damage and not self.torn

    @property
    def after_damage(self) -> int:
        """Records after the first damaged region (TensorBoard's reader stops there)."""
        before = self.records_before_damage
        return 0 if before is None else self.records - before

    def kept(self) -> np.ndarray[Any, Any]:
        """Which points the file's own restart markers leave (TensorBoard's purge)."""
        keep = np.ones(len(self.point_steps), dtype=bool)
        for number, step in enumerate(self.purges, start=1):
            keep &= ~((self.point_epochs < number) & (self.point_steps >= step))
        return keep


@dataclass
class RunContents:
    """The event files of one folder, in TensorBoard's reading order."""

    folder: Path
    files: list[FileContents]
    steps: np.ndarray[Any, Any]  # the distinct steps of the points TensorBoard shows

    @property
    def last_step(self) -> Optional[int]:
        return int(self.steps[-1]) if len(self.steps) else None


def file_contents(path: Path) -> FileContents:
    """Read ``path`` to its end (OSError if it cannot be opened)."""
    from tensorboard.compat.proto.event_pb2 import Event

    from mindwatch.events.fastscalars import decode_uniform_groups

    contents = FileContents(path, path.stat().st_size)
    reader = RecordReader(path, warn=False)  # the damage is what the caller reports
    payloads = list(reader.read())
    stats = reader.stats
    contents.records = stats.records
    contents.damage = list(stats.corrupt_regions)
    contents.records_before_damage = stats.records_before_damage
    contents.zero_filled = [_zeros(path, offset, length) for offset, length in contents.damage]
    left = contents.size - reader.offset
    # What is left after the last record: a record still incomplete, or the last bytes
    # of a damaged region (fewer than a header, kept for a read that may complete it).
    ends_damaged = bool(contents.damage) and sum(contents.damage[-1]) == reader.offset
    contents.torn = left if left and not (ends_damaged and left < HEADER) else 0

    fast = decode_uniform_groups(payloads)
    tag_index = {tag: i for i, tag in enumerate(fast.tags)}
    records = [fast.record]
    positions = [fast.position]
    tag_ids = [fast.tag]
    steps = [fast.step]
    extra: list[tuple[int, int, int, int]] = []  # record, position, tag, step
    purge_at: list[tuple[int, int]] = []  # record, step
    plugins: dict[str, str] = {}
    shown = int(fast.handled.sum())
    for i in (~fast.handled).nonzero()[0].tolist():
        try:
            event = Event.FromString(payloads[i])
        except Exception:  # not an event: the reader counts such records as damage
            continue
        what = event.WhichOneof("what")
        if what == "session_log" and event.session_log.status == 1:
            purge_at.append((i, int(event.step)))
            continue
        if what not in _SHOWN or (what == "summary" and not event.summary.value):
            continue
        shown += 1
        if what != "summary":
            continue
        for j, value in enumerate(event.summary.value):
            tag = value.tag
            if value.HasField("metadata") and tag not in plugins:
                plugins[tag] = value.metadata.plugin_data.plugin_name
            kind = value.WhichOneof("value")
            number: Optional[float] = None
            if kind == "simple_value":
                number = value.simple_value
            elif kind == "tensor" and plugins.get(tag) == "scalars":
                number = _tensor_scalar(value.tensor)
            if number is not None:
                extra.append((i, j, tag_index.setdefault(tag, len(tag_index)), int(event.step)))
    contents.shown = shown
    if extra:
        columns = np.asarray(extra, dtype=np.int64).T
        for parts, column in zip((records, positions, tag_ids, steps), columns):
            parts.append(column)
    record = np.concatenate(records)
    order = np.lexsort((np.concatenate(positions), record))
    contents.point_tags = np.concatenate(tag_ids)[order]
    contents.point_steps = np.concatenate(steps)[order]
    marks = np.asarray([at for at, _ in purge_at], dtype=np.int64)
    contents.point_epochs = np.searchsorted(marks, record[order], side="right")
    contents.purges = [step for _, step in purge_at]
    contents.tags = sorted(tag_index, key=tag_index.__getitem__)
    axis = np.array([is_step_axis(tag) for tag in contents.tags] or [True], dtype=bool)
    keep = contents.kept() & axis[contents.point_tags]
    contents.order = list(steps_out_of_order(contents.point_tags[keep], contents.point_steps[keep]))
    return contents


def _zeros(path: Path, offset: int, length: int) -> bool:
    """Whether ``length`` bytes at ``offset`` are (nine tenths or more) zero: what power
    loss leaves, often after the intact header of the record being written then."""
    if length <= 0:
        return False
    zeros = 0
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        end = min(offset + length, len(data))
        for start in range(offset, end, 1 << 20):
            zeros += data[start : min(start + (1 << 20), end)].count(0)
    return zeros >= 0.9 * length


def run_contents(folder: Path) -> RunContents:
    """Every event file of ``folder`` (a file that vanished meanwhile is left out), and
    the steps they hold as TensorBoard shows them: restart markers void earlier points
    at or after their step, across files; MindFormers' samples axes are not steps."""
    files = []
    for name in event_files(folder):
        with contextlib.suppress(OSError):
            files.append(file_contents(folder / name))
    steps: list[np.ndarray[Any, Any]] = []
    for contents in files:
        kept = contents.kept()
        if contents.purges:
            lowest = min(contents.purges)  # a marker voids what earlier files hold too
            steps = [s[s < lowest] for s in steps]
        axis = np.array([is_step_axis(t) for t in contents.tags] or [True], dtype=bool)
        steps.append(contents.point_steps[kept & axis[contents.point_tags]])
    held = np.unique(np.concatenate(steps)) if steps else np.zeros(0, dtype=np.int64)
    return RunContents(folder, files, held)


def shows_something(path: Path) -> bool:
    """Whether ``path`` holds anything TensorBoard shows; stops at the first such record
    (cheap on a large file). False for an empty, header-only or unreadable file."""
    from tensorboard.compat.proto.event_pb2 import Event

    with contextlib.suppress(OSError):
        for payload in RecordReader(path, warn=False).read():
            try:
                event = Event.FromString(payload)
            except Exception:
                continue
            what = event.WhichOneof("what")
            if what in _SHOWN and (what != "summary" or event.summary.value):
                return True
    return False
