"""The report in Markdown, for a CI comment: the comparison table (best value per
column in bold), warnings about mixed runs, each run's last eval values, and what moved
first before each alert with forensics (numbered as ``mindwatch explain`` numbers them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mindwatch._version import __version__
from mindwatch.alerts.movers import first_mover_line
from mindwatch.common.i18n import _
from mindwatch.tools.report import formatting
from mindwatch.tools.report.summary import RunSummary
from mindwatch.tools.report.tables import comparison_table

__all__ = ["markdown"]

_fmt = formatting.value


def markdown(runs: Sequence[RunSummary], logdir: Path) -> str:
    """The report of ``runs`` (below ``logdir``) as Markdown, in the current language."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    title = _("Training report: {folder}").format(folder=f"`{cell(str(logdir))}`")
    lines = [f"## {title}", ""]
    table = comparison_table(runs)
    header = [_("run"), _("status"), _("steps"), *table.header[1:], _("alerts")]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r, (run, cells) in enumerate(zip(runs, table.rows)):
        marked = [
            f"**{text}**" if table.is_best(r, c) else text for c, text in enumerate(cells) if c > 0
        ]
        f = run.facts
        row = [run.name, _fmt(f.get("status")), _fmt(f.get("steps")), *marked]
        row.append(str(len(run.alerts)))
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    for note in table.notes:
        lines += ["", note]
    if table.best:
        lines.append(_("Best value per column in **bold**."))
    for run in runs:
        if run.facts.get("mixed_runs"):
            warning = _("Warning")
            lines += ["", f"> **{warning}** {cell(run.name)}: {cell(run.facts['mixed_runs'])}"]
    evaluated = []
    for run in runs:
        evals = (run.facts.get("eval") or {}).items()
        if evals:
            shown = ", ".join(
                f"{tag} {formatting.number(v['last'], formatting.LOSS_DIGITS)}" for tag, v in evals
            )
            evaluated.append(f"- {cell(run.name)}: {cell(shown)}")
    if evaluated:
        lines += ["", *evaluated]
    moved = []
    for run in runs:
        for number, alert in enumerate(run.alerts, start=1):
            said = first_mover_line(alert.get("forensics"))
            if said is not None:
                text = _("{run}, alert {number} at step {step} ({rule}): {forensics}").format(
                    run=run.name,
                    number=number,
                    step=alert.get("step"),
                    rule=alert.get("rule"),
                    forensics=said,
                )
                moved.append(f"- {cell(text)}")
    if moved:  # what moved first: the question an alert's reader asks next
        lines += ["", *moved[:10]]
    lines += ["", f"_mindwatch {__version__}_", ""]
    return "\n".join(lines)
