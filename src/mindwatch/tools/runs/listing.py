"""``mindwatch runs``' output: the listing as a table (colour on a terminal, aligned
plain text in a pipe) or JSON, and the lines below the table."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from mindwatch.common.i18n import _, ngettext
from mindwatch.tools.runs.folders import Run
from mindwatch.tools.runs.retention import Pruning, format_size

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["format_age", "pruning_json", "runs_json", "runs_table", "summary_lines"]

_STATUS_STYLE = {"running": "green", "crashed": "red", "stale": "yellow", "unknown": "dim"}


def format_age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86400:.0f} days ago"


def _local(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def runs_table(runs: list[Run], *, now: float, with_action: bool) -> Table:
    """The listing as a rich table: colour on a terminal, aligned plain text in a pipe."""
    from rich.table import Table
    from rich.text import Text  # rich only when a table is drawn, not on every CLI call

    table = Table(box=None, pad_edge=False, header_style="bold")
    for header, justify in [("run", "left"), ("status", "left"), ("steps", "right")]:
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    table.add_column("last update")
    table.add_column("size", justify="right")
    if with_action:
        table.add_column("action")
    for run in runs:
        row = [
            Text(run.name),
            Text(run.status, style=_STATUS_STYLE.get(run.status, "")),
            Text("-" if run.steps is None else str(run.steps)),
            Text(f"{_local(run.last_update)} ({format_age(now - run.last_update)})"),
            Text(format_size(run.size)),
        ]
        if with_action:
            row.append(Text(run.note, style="red" if run.delete else ""))
        table.add_row(*row)
    return table


def runs_json(runs: list[Run], *, now: float) -> list[dict[str, Any]]:
    """The listing as plain data, for ``--json``."""
    return [
        {
            "name": run.name,
            "path": str(run.path),
            "status": run.status,
            "active": run.active,
            "steps": run.steps,
            "start_time": None if run.start_time is None else _iso(run.start_time),
            "last_update": _iso(run.last_update),
            "age_secs": round(max(now - run.last_update, 0.0), 1),
            "size_bytes": run.size,
            "delete": run.delete,
            "note": run.note,
        }
        for run in runs
    ]


def pruning_json(pruning: Pruning) -> list[dict[str, Any]]:
    """``--json``: the listing, and after deleting, whether each run was deleted and why
    not."""
    data = runs_json(pruning.found, now=pruning.now)
    if pruning.deleted:
        for item in data:
            item["deleted"] = item["delete"] and item["name"] not in pruning.failed
            item["error"] = pruning.failed.get(item["name"])
    return data


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="seconds")


def summary_lines(pruning: Pruning) -> list[str]:
    """What ``mindwatch runs`` says below its table: totals, and what was (or would be)
    deleted under the policy."""
    found, marked, failed = pruning.found, pruning.marked, pruning.failed
    max_size = pruning.max_size
    lines = []
    active = sum(run.active for run in found)
    total = sum(run.size for run in found)
    counted = ngettext("{count} run, {size}", "{count} runs, {size}", len(found)).format(
        count=len(found), size=format_size(total)
    )
    if active:
        counted = _("{runs}; {count} active (never deleted)").format(runs=counted, count=active)
    lines.append(counted)
    freed = sum(run.size for run in marked if run.name not in failed)
    if marked and not pruning.deleted:
        would = ngettext(
            "Would delete {count} run, freeing {size}. Add --yes to delete it.",
            "Would delete {count} runs, freeing {size}. Add --yes to delete them.",
            len(marked),
        )
        lines.append(would.format(count=len(marked), size=format_size(freed)))
    elif marked:
        lines += [
            _("deleted {run} ({size})").format(run=run.name, size=format_size(run.size))
            for run in marked
            if run.name not in failed
        ]
        done = len(marked) - len(failed)
        deleted = ngettext(
            "Deleted {count} run, freed {size}.", "Deleted {count} runs, freed {size}.", done
        )
        lines.append(deleted.format(count=done, size=format_size(freed)))
    elif pruning.policy:
        lines.append(_("Nothing to delete."))
    kept = total - sum(run.size for run in marked)
    if max_size is not None and kept > max_size:
        lines.append(
            _(
                "The kept runs total {size}, still over --max-size {limit}: the rest is "
                "active and never deleted."
            ).format(size=format_size(kept), limit=format_size(max_size))
        )
    return lines
