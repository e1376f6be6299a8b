"""``mindwatch convert``: training logs -> TensorBoard runs (one per worker, one reduced).

Each worker's log becomes ``DST/rank_<i>`` (``i`` from ``worker_<i>.log``); with several
workers, ``DST`` itself is the job's run, every step reduced across them as mindwatch
reduces live runs (loss averaged, step time the slowest rank's, throughput summed, lr
and grad norm as they are, plus ``ranks/<name>_*`` spreads). A single log becomes
``DST``. ``follow`` keeps converting logs that are still being written.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from mindwatch.aggregate.reductions import ReductionTable, reduce_values, spread_tags
from mindwatch.common.waits import wait_seconds
from mindwatch.events.writer import EventFileWriter
from mindwatch.run.ranks import rank_folder
from mindwatch.tools.convert.log_lines import LogParser, Point

__all__ = ["ConvertSummary", "convert_logs", "find_logs", "log_destinations"]

_WORKER = re.compile(r"worker_(\d+)\.log$")


@dataclass
class ConvertSummary:
    runs: list[str] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    points: int = 0
    lines: int = 0
    skipped: int = 0


def find_logs(source: Path) -> list[Path]:
    """The logs to convert: ``source`` itself, or the ``worker_*.log`` / ``*.log`` in it."""
    if source.is_file():
        return [source]
    workers = sorted(source.glob("worker_*.log"), key=_rank_key)
    return workers or sorted(source.glob("*.log"))


def _rank_key(path: Path) -> tuple[int, str]:
    match = _WORKER.search(path.name)
    return (int(match.group(1)) if match else 1 << 30, path.name)


class _Tail:
    """Read the complete new lines of a file that may still be growing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


def _ranks(sources: list[Path]) -> list[int]:
    """The rank of each log: ``i`` of ``worker_<i>.log``, else its position."""
    ranks = []
    for index, path in enumerate(sources):
        match = _WORKER.search(path.name)
        ranks.append(int(match.group(1)) if match else index)
    return ranks


def log_destinations(sources: list[Path], dst: Path) -> list[Path]:
    """The run folders :func:`convert_logs` writes for ``sources``."""
    if len(sources) == 1:
        return [dst]
    return [dst, *(dst / rank_folder(rank) for rank in _ranks(sources))]


def convert_logs(
    sources: list[Path],
    dst: Path,
    *,
    steps_per_epoch: Optional[int] = None,
    follow: bool = False,
    interval: float = 1.0,
    stop: Optional[Callable[[], bool]] = None,
) -> ConvertSummary:
    """Convert ``sources`` (log files) into runs below ``dst``; see the module doc."""
    summary = ConvertSummary()
    several = len(sources) > 1
    ranks = _ranks(sources)
    writers = [
        EventFileWriter(dst / rank_folder(rank) if several else dst, flush_secs=0.5)
        for rank in ranks
    ]
    summary.runs = [rank_folder(rank) for rank in ranks] if several else ["."]
    global_writer = EventFileWriter(dst, flush_secs=0.5) if several else None
    if several:
        summary.runs.insert(0, ".")
    parsers = [LogParser(steps_per_epoch=steps_per_epoch) for _ in sources]
    tails = [_Tail(path) for path in sources]
    per_rank: list[dict[int, dict[str, float]]] = [{} for _ in sources]
    reduced_up_to = 0
    table = ReductionTable()
    try:
        while True:
            for i, tail in enumerate(tails):
                steps: dict[int, dict[str, float]] = {}
                for line in tail.lines():
                    for point in parsers[i].feed(line):
                        # One value per step and tag: the first (MFLossMonitor's exact
                        # per-step values win over LossMonitor / TimeMonitor's repeats).
                        row = steps.setdefault(point.step, {})
                        if point.tag not in row:
                            row[point.tag] = point.value
                            per_rank[i].setdefault(point.step, {})[point.tag] = point.value
                            summary.tags.add(point.tag)
                            summary.points += 1
                for step in sorted(steps):
                    writers[i].add_scalars(step, list(steps[step].items()))
            if global_writer is not None:
                # Reduce the steps every worker has reached (all of them at the end).
                final = not follow or (stop is not None and stop())
                done = [max(r) for r in per_rank if r]
                if final:
                    limit = max(done, default=0)
                else:
                    limit = min(done) if len(done) == len(per_rank) else 0
                reduced_up_to = _reduce(per_rank, global_writer, table, reduced_up_to, limit)
            if not follow or (stop is not None and stop()):
                break
            for writer in writers:
                writer.flush()
            time.sleep(wait_seconds(interval))
    except KeyboardInterrupt:
        pass
    finally:
        for writer in [*writers, *([global_writer] if global_writer else [])]:
            writer.close()
    summary.lines = sum(p.lines for p in parsers)
    summary.skipped = sum(p.skipped for p in parsers)
    return summary


def _reduce(
    per_rank: list[dict[int, dict[str, float]]],
    writer: EventFileWriter,
    table: ReductionTable,
    after: int,
    limit: int,
) -> int:
    """Write the reduced steps in ``(after, limit]``; returns the new ``after``."""
    steps = sorted({s for rank in per_rank for s in rank if after < s <= limit})
    if not steps:
        return after
    tags = sorted({t for rank in per_rank for s in steps for t in rank.get(s, {})})
    world = len(per_rank)
    for tag in tags:
        values = np.full((world, len(steps)), np.nan)
        present = np.zeros((world, len(steps)), dtype=bool)
        for r, rank in enumerate(per_rank):
            for j, step in enumerate(steps):
                value = rank.get(step, {}).get(tag)
                if value is not None:
                    values[r, j], present[r, j] = value, True
        reduction = table[tag]
        result, spread, counted = reduce_values(values, present, reduction)
        names = spread_tags(tag)
        for j, step in enumerate(steps):
            if not counted[j]:
                continue
            row = [] if reduction.kind == "per_rank" else [(tag, float(result[j]))]
            if spread is not None:
                row += list(zip(names, spread[:, j].tolist()))
            writer.add_scalars(step, row)
    for rank in per_rank:  # reduced: not needed any more
        for step in steps:
            rank.pop(step, None)
    return steps[-1]


def points_of(path: Path, steps_per_epoch: Optional[int] = None) -> list[Point]:
    """Every point of one log file (for tests and quick looks)."""
    parser = LogParser(steps_per_epoch=steps_per_epoch)
    out: list[Point] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        out += parser.feed(line)
    return out
