"""``mindwatch report``: a training report from event files alone.

HTML (one self-contained file that fetches nothing: interactive charts with plotly.js
inlined, :mod:`mindwatch.tools.report_html`; or, with ``static``, the print charts as
inline SVG and no script), PDF (A4, :mod:`mindwatch.tools.report_pdf`, charts from
:mod:`mindwatch.tools.report_charts`), JSON (the machine-readable summary) and Markdown
(for a CI comment). Several runs below one folder are overlaid in every chart. Text is
in the current language (``--lang``), from the same catalogues as the alerts.

Text in the SVGs is drawn as paths, so a tag named ``<script>`` is shapes, not markup;
everything else goes through Jinja2 with autoescaping.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mindwatch._version import __version__
from mindwatch.common.i18n import _, get_language, ngettext
from mindwatch.tools import report_format
from mindwatch.tools.report_tables import comparison_table, shared_hparams, spread_rows
from mindwatch.tools.summary import RunSummary, excluded_reason

__all__ = ["FORMATS", "summary_rows", "write_report"]

FORMATS = ("html", "pdf", "json", "md")


def _fmt(value: Any) -> str:
    return report_format.value(value)


def _duration(seconds: Any) -> str:
    return report_format.duration(seconds)


def summary_rows(run: RunSummary) -> list[tuple[str, str]]:
    """The run summary as (label, value) rows, for HTML, PDF and Markdown alike, in the
    report's language."""
    f = run.facts
    loss = f.get("loss") or {}
    digits = report_format.LOSS_DIGITS
    rows = [
        (_("status"), _fmt(f.get("status"))),
        (_("steps"), _fmt(f.get("steps"))),
        (_("duration"), _duration(f.get("duration_s"))),
        (_("world size"), _fmt(f.get("world_size"))),
    ]
    if loss:
        rows += [
            (
                _("final loss (smoothed)"),
                _("{value} (raw {raw})").format(
                    value=report_format.number(loss.get("final"), digits),
                    raw=report_format.number(loss.get("final_raw"), digits),
                ),
            ),
            (
                _("best loss (smoothed)"),
                _("{value} at step {step} (raw minimum {raw} at step {raw_step})").format(
                    value=report_format.number(loss.get("best"), digits),
                    step=_fmt(loss.get("best_step")),
                    raw=report_format.number(loss.get("best_raw"), digits),
                    raw_step=_fmt(loss.get("best_raw_step")),
                ),
            ),
            (
                _("loss smoothing"),
                _("TensorBoard's moving average, weight {weight}").format(
                    weight=loss.get("smoothing")
                ),
            ),
            (_("non-finite losses"), _fmt(loss.get("nonfinite"))),
        ]
    throughput = f.get("throughput") or {}
    if "excluded_steps" in throughput:
        rows.append(
            (
                _("left out of speed statistics"),
                _("{count} step(s): {reason}").format(
                    count=_fmt(throughput["excluded_steps"]), reason=_excluded(throughput)
                ),
            )
        )
    if f.get("mixed_runs"):
        rows.insert(
            0,
            (_("warning"), _("{mixed}: these numbers mix them").format(mixed=f["mixed_runs"])),
        )
    if "tokens" in f:
        rows.append((_("tokens"), _fmt(round(f["tokens"]))))
    for tag, value in (f.get("eval") or {}).items():
        rows.append(
            (
                tag,
                _("{value} at step {step}").format(
                    value=report_format.number(value["last"], digits), step=_fmt(value["last_step"])
                ),
            )
        )
    return rows


def _excluded(throughput: dict[str, Any]) -> str:
    """Why warm-up steps were left out, in the report's language (older reports' facts
    have only the English sentence)."""
    if "excluded_compile_step" in throughput or not throughput.get("excluded_steps"):
        return excluded_reason(throughput, _)
    return str(throughput.get("excluded_reason", ""))


def _throughput_rows(run: RunSummary) -> list[tuple[str, dict[str, str]]]:
    """Per ``perf/*`` tag its statistics (without warm-up), each with its unit."""
    rows = []
    for name, stats in (run.facts.get("throughput") or {}).items():
        if isinstance(stats, dict) and stats:
            shown = {k: report_format.metric_value(name, v) for k, v in stats.items()}
            rows.append((report_format.metric_label(name), shown))
    return rows


def _document(runs: Sequence[RunSummary], logdir: Path) -> dict[str, Any]:
    return {
        "mindwatch": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "logdir": str(logdir),
        "runs": [run.as_dict() for run in runs],
    }


def write_report(
    runs: Sequence[RunSummary],
    logdir: Path,
    out: Path,
    formats: Sequence[str],
    *,
    static: bool = False,
) -> dict[str, Path]:
    """Write the report in ``formats`` into ``out``; returns format -> file. ``static``:
    an HTML without scripts (SVG charts) instead of the interactive one."""
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    document = _document(runs, logdir)
    if "json" in formats:
        path = out / "report.json"
        path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
        written["json"] = path
    if "md" in formats:
        path = out / "report.md"
        path.write_text(_markdown(runs, logdir), encoding="utf-8")
        written["md"] = path
    if "html" in formats:
        path = out / "report.html"
        path.write_text(_html(runs, logdir, document, static=static), encoding="utf-8")
        written["html"] = path
    if "pdf" in formats:
        path = out / "report.pdf"
        _pdf(runs, logdir, path)
        written["pdf"] = path
    return written


def _markdown(runs: Sequence[RunSummary], logdir: Path) -> str:
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
                f"{tag} {report_format.number(v['last'], report_format.LOSS_DIGITS)}"
                for tag, v in evals
            )
            evaluated.append(f"- {cell(run.name)}: {cell(shown)}")
    if evaluated:
        lines += ["", *evaluated]
    lines += ["", f"_mindwatch {__version__}_", ""]
    return "\n".join(lines)


def _html(
    runs: Sequence[RunSummary],
    logdir: Path,
    document: dict[str, Any],
    *,
    static: bool = False,
) -> str:
    """The HTML report: interactive (plotly.js inlined), or with ``static`` script-free
    (the matplotlib charts as inline SVG) for viewers that block scripts."""
    import jinja2
    from markupsafe import Markup

    from mindwatch.tools.report_html import interactive_plots
    from mindwatch.tools.report_plotly import FONTS, PALETTE, plotly_js
    from mindwatch.tools.report_tables import comparison_table

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mindwatch.tools", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.i18n"],
    )
    # the template's text comes from the same catalogues as the rest (babel.cfg)
    env.install_gettext_callables(gettext=_, ngettext=ngettext, newstyle=False)  # type: ignore[attr-defined]
    if static:
        from mindwatch.tools.report_charts import svg_charts

        rendered = [{"title": title, "svg": Markup(svg)} for title, svg in svg_charts(runs)]
        plots: list[dict[str, Any]] = []
        script = Markup("")
    else:
        rendered = []
        plots = [
            {"key": p.key, "caption": p.caption, "json": Markup(p.json())}
            for p in interactive_plots(runs)
        ]
        script = Markup(plotly_js())
    shared = shared_hparams(runs)
    template = env.get_template("report.html.j2")
    return template.render(
        shared_hparams=sorted(shared.items()),
        logdir=str(logdir),
        created=document["created"],
        version=__version__,
        runs=[
            {
                "name": run.name,
                "rows": summary_rows(run),
                "hparams": sorted(
                    (k, v) for k, v in (run.facts.get("hparams") or {}).items() if k not in shared
                ),
                "throughput": _throughput_rows(run),
                "spread": spread_rows(run),
                "alerts": [_alert_row(a) for a in run.alerts],
            }
            for run in runs
        ],
        comparison=comparison_table(runs) if len(runs) > 1 else None,
        charts=rendered,
        plots=plots,
        plotly=script,
        palette=PALETTE,
        fonts=Markup(FONTS),
        static=static,
        lang=get_language(),
    )


def _alert_row(alert: dict[str, Any]) -> dict[str, str]:
    """An ``alerts.jsonl`` line as the alerts table shows it (numbers formatted)."""
    row = {k: _fmt(alert.get(k)) for k in ("step", "rank", "severity", "rule", "metric")}
    row["value"] = report_format.number(alert.get("value"), report_format.LOSS_DIGITS)
    row["message"] = str(alert.get("message", ""))
    row["severity"] = row["severity"] if row["severity"] != "-" else "info"
    return row


def _pdf(runs: Sequence[RunSummary], logdir: Path, path: Path) -> None:
    from mindwatch.tools.report_pdf import write_pdf

    write_pdf(runs, logdir, path, summary_rows)
