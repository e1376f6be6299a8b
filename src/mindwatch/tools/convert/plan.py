"""``mindwatch convert SOURCES DST``: what the sources are, and converting them.

MindSpore summary files (``*_MS``) go to :mod:`.summaries` (one run per summary
folder); training logs (MFLossMonitor, LossMonitor, TimeMonitor lines) go to
:mod:`.logs` (one run per worker, plus one reduced across them). A destination
that already holds an earlier conversion is refused unless ``overwrite``: converting
again would add a second copy of every point. A conversion that finds nothing leaves no
empty runs behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from mindwatch.common.i18n import _, ngettext
from mindwatch.events.reader import event_files
from mindwatch.tools.convert.logs import convert_logs, find_logs, log_destinations
from mindwatch.tools.convert.summaries import (
    convert_summaries,
    find_summary_folders,
    summary_destinations,
)

__all__ = ["ConversionError", "ConversionPlan", "convert", "plan_conversion"]


class ConversionError(ValueError):
    """The sources cannot be converted as given; the message says why and what to do."""


@dataclass
class ConversionPlan:
    """What ``convert`` will read: one summary source, or training logs."""

    summary: Optional[Path] = None
    logs: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # for the user, before converting


def plan_conversion(sources: Sequence[Path]) -> ConversionPlan:
    """Sort ``sources`` into a summary source or training logs; refuse mixtures."""
    summaries: list[Path] = []
    plan = ConversionPlan()
    for source in sources:
        if not source.exists():
            raise ConversionError(f"'{source}' does not exist")
        if find_summary_folders(source):
            summaries.append(source)
            if source.is_dir() and find_logs(source):
                plan.notes.append(
                    f"note: '{source}' also holds training logs; they are not converted "
                    "(give a log file itself, into another DST, to convert it)"
                )
        else:
            plan.logs += find_logs(source)
    if summaries and plan.logs:
        raise ConversionError(
            f"{summaries[0]} holds MindSpore summary files and {plan.logs[0]} is a training "
            "log: convert them into different destination folders, one command each"
        )
    if len(summaries) > 1:
        raise ConversionError(
            "give one MindSpore summary source at a time (a file, a summary folder or a "
            "folder of them): each becomes runs at the same relative place below DST"
        )
    if not summaries and not plan.logs:
        raise ConversionError(
            "no MindSpore summary files (*_MS) and no log files found "
            "(expected a summary folder, a .log file or worker_<i>.log files)"
        )
    plan.summary = summaries[0] if summaries else None
    return plan


def convert(
    plan: ConversionPlan,
    dst: Path,
    *,
    steps_per_epoch: Optional[int] = None,
    raw_tags: bool = False,
    follow: bool = False,
    interval: float = 2.0,
    overwrite: bool = False,
) -> str:
    """Convert what ``plan`` found into runs below ``dst``; a one-line summary of it."""
    if plan.summary is not None:
        planned = summary_destinations(plan.summary, dst)
    else:
        planned = log_destinations(plan.logs, dst)
    _clear_destinations(planned, overwrite)
    try:
        if plan.summary is not None:
            return _convert_summaries(
                plan.summary, dst, raw_tags=raw_tags, follow=follow, interval=interval
            )
        return _convert_logs(
            plan.logs, dst, steps_per_epoch=steps_per_epoch, follow=follow, interval=interval
        )
    except ConversionError:
        _clear_destinations(planned, overwrite=True)  # leave no empty runs behind
        raise


def _clear_destinations(folders: list[Path], overwrite: bool) -> None:
    """Refuse to add a second copy of every point to an earlier conversion, or remove it."""
    for folder in folders:
        old = event_files(folder)
        if old and not overwrite:
            raise ConversionError(
                f"'{folder}' already holds event files (an earlier conversion?): converting "
                "again would add a second copy of every point; choose an empty DST or pass "
                "--overwrite to replace them"
            )
        for name in old:
            (folder / name).unlink()


def _convert_summaries(
    source: Path, dst: Path, *, raw_tags: bool, follow: bool, interval: float
) -> str:
    result = convert_summaries(source, dst, raw_tags=raw_tags, follow=follow, interval=interval)
    if not result.points:
        raise ConversionError(f"the summary files below '{source}' hold nothing to convert")
    found = ", ".join(
        f"{n:,} {kind if n != 1 else kind.removesuffix('s')}"
        for kind, n in sorted(result.kinds.items())
    )
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(result.skipped.items())) or "none"
    runs = ", ".join(result.runs)
    converted = ngettext(
        "converted {count} summary folder into run {runs} below {dst}",
        "converted {count} summary folders into runs {runs} below {dst}",
        len(result.runs),
    ).format(count=len(result.runs), runs=runs, dst=dst)
    return _(
        "{converted}: {found}; {count} tags: {tags}; {records:,} records read; skipped: {skipped}"
    ).format(
        converted=converted,
        found=found,
        count=len(result.tags),
        tags=", ".join(sorted(result.tags)),
        records=result.records,
        skipped=skipped,
    )


def _convert_logs(
    logs: list[Path],
    dst: Path,
    *,
    steps_per_epoch: Optional[int],
    follow: bool,
    interval: float,
) -> str:
    summary = convert_logs(
        logs, dst, steps_per_epoch=steps_per_epoch, follow=follow, interval=interval
    )
    read = ngettext("{count} log", "{count} logs", len(logs)).format(count=len(logs))
    if not summary.points:
        raise ConversionError(
            _(
                "no MFLossMonitor / LossMonitor / TimeMonitor lines in {logs} ({count} lines read)"
            ).format(logs=read, count=summary.lines)
        )
    runs = ngettext("{count} run", "{count} runs", len(summary.runs)).format(
        count=len(summary.runs)
    )
    return _(
        "converted {logs} into {runs} below {dst}: {points:,} points, tags {tags}; "
        "{count:,} lines read, {skipped} monitor-like lines not understood"
    ).format(
        logs=read,
        runs=runs,
        dst=dst,
        points=summary.points,
        tags=", ".join(sorted(summary.tags)),
        count=summary.lines,
        skipped=summary.skipped,
    )
