"""A run's alerts with their forensics, read back: which alert to explain, and the
analysis written with it.

An alert line of ``alerts.jsonl`` that was analysed holds a ``forensics`` summary
(the first mover, the top movers, the loss's onset, the non-finite parameter, the
batch, the skip lines) and names the file with the whole analysis
(``forensics/step-<S>-<rule>.json``, relative to the run folder: the movers ranked,
the heat of the layers, per rank under msrun). The file is read when there is one;
a file that is missing, damaged or outside the run folder leaves the summary of the
line, with a note saying why.

Alerts are numbered from 1 in the order of ``alerts.jsonl`` (the lines that are
alerts: a damaged line is skipped, as every reader of the file does); ``--alert N``
takes that number.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Optional

from mindwatch.alerts.model import severity_rank
from mindwatch.alerts.reading import read_alerts
from mindwatch.common.i18n import _
from mindwatch.common.invocation import command_line
from mindwatch.common.side_files import NotASideFileError, parse_json, read_side_file
from mindwatch.run.layout import ALERTS_FILE, RUN_FILE, has_event_files

__all__ = [
    "FORENSICS_MAX_BYTES",
    "ExplainError",
    "Incident",
    "choose",
    "dumps",
    "incidents",
    "read_incidents",
]

# An analysis holds a window of a few hundred steps of a few hundred layers' heat at
# most: 64 MiB is far above any file mindwatch writes, and bounds what a reader loads.
FORENSICS_MAX_BYTES = 64 << 20


class ExplainError(ValueError):
    """Bad input for ``mindwatch explain``: the message names the value and the fix."""


@dataclass
class Incident:
    """One alert of the run folder ``run`` (``number`` counts from 1), its forensics
    summary (None when it was not analysed) and, once :meth:`read`, the whole analysis
    from its file (None without one), with notes on what could not be read."""

    number: int
    alert: dict[str, Any]
    summary: Optional[dict[str, Any]]
    run: Path = Path(".")
    analysis: Optional[dict[str, Any]] = None
    notes: list[str] = field(default_factory=list)
    _read: bool = field(default=False, init=False, repr=False)

    def read(self) -> Incident:
        """Read the forensics file the summary names (once; only the incidents told
        are read, not every analysed alert of a long run)."""
        if self.summary is not None and not self._read:
            self.analysis, self.notes = _analysis(self.run, self.summary)
        self._read = True
        return self

    @property
    def step(self) -> int:
        return int(self.alert["step"])

    @property
    def analysed(self) -> bool:
        return self.summary is not None


def _summary(alert: dict[str, Any]) -> Optional[dict[str, Any]]:
    value = alert.get("forensics")
    return value if isinstance(value, dict) else None


def _inside(run: Path, name: Any) -> Optional[Path]:
    """``run / name`` when ``name`` is a relative path that stays in the run folder."""
    if not isinstance(name, str) or not name or "\\" in name or "\x00" in name:
        return None
    parts = PurePosixPath(name)
    if parts.is_absolute() or ".." in parts.parts:
        return None
    path = run.joinpath(*parts.parts)
    try:  # nor through a link that leads out of it
        inside = path.resolve().is_relative_to(run.resolve())
    except (OSError, RuntimeError):  # a loop of links
        return None
    return path if inside else None


def _analysis(run: Path, summary: dict[str, Any]) -> tuple[Optional[dict[str, Any]], list[str]]:
    """The file a summary names, parsed; or None and why not."""
    name = summary.get("file")
    if name is None:
        return None, []
    path = _inside(run, name)
    if path is None:
        note = _("the forensics file {file!r} is not a path inside the run folder: ignored")
        return None, [note.format(file=str(name)[:200])]
    side = read_side_file(path, FORENSICS_MAX_BYTES)
    problem = side.problem
    if side.data is None and problem is None:
        problem = _("is missing")
    if side.data is not None:
        try:
            value, _note = parse_json(side.data)
        except NotASideFileError as exc:
            value, problem = None, str(exc)
        else:
            if isinstance(value, dict):
                return value, []
            problem = _("is not a JSON object")
    note = _("{file} {problem}: showing the summary in alerts.jsonl")
    return None, [note.format(file=name, problem=problem)]


def read_incidents(run: Path) -> list[Incident]:
    """Every alert of the run folder ``run``, numbered (:class:`ExplainError` when
    ``run`` is not a run folder)."""
    if not run.is_dir():
        raise ExplainError(
            _(
                "'{run}' is not a folder; pass a run folder, the one that holds alerts.jsonl "
                "(e.g. runs/20260301-101500_demo)"
            ).format(run=run)
        )
    alerts_path = run / ALERTS_FILE
    if not alerts_path.exists():
        below = sorted(p.parent for p in run.glob(f"*/{ALERTS_FILE}"))
        if below:
            shown = ", ".join(str(p) for p in below[:3]) + (", ..." if len(below) > 3 else "")
            raise ExplainError(
                _(
                    "'{run}' has no alerts.jsonl, but runs below it have: {runs}; pass one of them"
                ).format(run=run, runs=shown)
            )
        if not (run / RUN_FILE).exists() and not has_event_files(run):
            raise ExplainError(
                _(
                    "'{run}' is not a run folder (no alerts.jsonl, run.json or event files); "
                    "pass the folder of one run"
                ).format(run=run)
            )
        return []
    return incidents(run, read_alerts(alerts_path))


def incidents(run: Path, alerts: Sequence[dict[str, Any]]) -> list[Incident]:
    """``alerts`` (the run folder's ``alerts.jsonl``, as read) numbered; their forensics
    files are read by :meth:`Incident.read`."""
    return [
        Incident(number, alert, _summary(alert), run)
        for number, alert in enumerate(alerts, start=1)
    ]


def choose(
    found: Sequence[Incident], run: Path, *, number: Optional[int], step: Optional[int]
) -> Optional[Incident]:
    """The incident to explain: alert ``number``, or the alert at ``step`` (the analysed
    one of the highest severity there), or, given neither, the first warning or
    critical alert that was analysed (then the first analysed one, then the first of
    all). None when the run has no alerts; :class:`ExplainError` for a number or step
    that names none."""
    if number is not None:
        if not 1 <= number <= len(found):
            if not found:
                raise ExplainError(
                    _("there is no alert {number} in '{run}': it has no alerts").format(
                        number=number, run=run
                    )
                )
            raise ExplainError(
                _(
                    "there is no alert {number} in '{run}': it has {count} (1-{count}); "
                    "`{command}` lists them"
                ).format(
                    number=number, run=run, count=len(found), command=command_line("explain", run)
                )
            )
        return found[number - 1]
    if step is not None:
        there = [i for i in found if i.step == step]
        if not there:
            steps = sorted({i.step for i in found})
            nearest = sorted(steps, key=lambda s: (abs(s - step), s))[:5]
            raise ExplainError(
                _("no alert at step {step} in '{run}'; alerts are at steps {steps}").format(
                    step=step,
                    run=run,
                    steps=", ".join(map(str, sorted(nearest))) or _("(none)"),
                )
            )
        return max(there, key=lambda i: (i.analysed, severity_rank(i.alert["severity"]), -i.number))
    if not found:
        return None
    serious = [i for i in found if severity_rank(i.alert["severity"]) >= 1]
    for group in ([i for i in serious if i.analysed], [i for i in found if i.analysed]):
        if group:
            return group[0]
    return found[0]


def dumps(incident: Incident) -> str:
    """The incident as JSON (``--json``): the alert line and the whole analysis."""
    return json.dumps(
        {"number": incident.number, "alert": incident.alert, "analysis": incident.analysis},
        ensure_ascii=False,
        indent=2,
    )
