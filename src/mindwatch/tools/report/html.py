"""The report as one HTML file that fetches nothing: the Jinja2 page
(``templates/report.html.j2``, autoescaped, its text from the same catalogues as the
rest) with interactive charts (plotly.js inlined, :mod:`.interactive`) or, ``static``,
the print charts as inline SVG and no script (:mod:`.charts`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mindwatch._version import __version__
from mindwatch.common.i18n import _, get_language, ngettext
from mindwatch.tools.explain import Story
from mindwatch.tools.report.anomalies import (
    HEAT_COLORS,
    heat_caption,
    heat_plot,
    heat_table,
    run_anomalies,
)
from mindwatch.tools.report.ranks import ranks_header, ranks_notes, ranks_rows
from mindwatch.tools.report.rows import alert_row, summary_rows, throughput_rows
from mindwatch.tools.report.summary import RunSummary
from mindwatch.tools.report.tables import comparison_table, shared_hparams, spread_rows

__all__ = ["html_page"]


def html_page(
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

    from mindwatch.tools.report.interactive import interactive_plots
    from mindwatch.tools.report.plot import FONTS, PALETTE, plotly_js

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mindwatch.tools.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.i18n"],
    )
    # the template's text comes from the same catalogues as the rest (babel.cfg)
    env.install_gettext_callables(gettext=_, ngettext=ngettext, newstyle=False)  # type: ignore[attr-defined]
    if static:
        from mindwatch.tools.report.charts import svg_charts

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
    found = {id(run): (stories, total) for run, stories, total in run_anomalies(runs)}
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
                "throughput": throughput_rows(run),
                "spread": spread_rows(run),
                "ranks": ranks_rows(run.facts.get("ranks") or []),
                "ranks_notes": ranks_notes(run.facts.get("ranks") or []),
                "alerts": [alert_row(a) for a in run.alerts],
                **_anomalies(run, i, *found.get(id(run), ([], 0)), static=static),
            }
            for i, run in enumerate(runs)
        ],
        comparison=comparison_table(runs) if len(runs) > 1 else None,
        ranks_header=ranks_header(),
        charts=rendered,
        plots=plots,
        plotly=script,
        palette=PALETTE,
        heat_colors=HEAT_COLORS,
        fonts=Markup(FONTS),
        static=static,
        lang=get_language(),
    )


def _anomalies(
    run: RunSummary, index: int, stories: list[Story], total: int, *, static: bool
) -> dict[str, Any]:
    """A run's analysed alerts for the template: each story's blocks and its heatmap
    (table cells when ``static``, else a plotly figure's JSON)."""
    from markupsafe import Markup

    shown = []
    for told in stories:
        entry: dict[str, Any] = {
            "head": _("Alert {number}: {what}").format(number=told.number, what=told.what),
            "blocks": told.blocks,
            "table": None,
            "plot": None,
            "caption": heat_caption(told),
        }
        if told.heat is not None and static:
            entry["table"] = heat_table(told)
        elif told.heat is not None:
            plot = heat_plot(told, f"heat-{index}-{told.number}")
            if plot is not None:
                entry["plot"] = {"key": plot.key, "json": Markup(plot.json())}
        shown.append(entry)
    more = ""
    if total > len(stories):
        more = _(
            "{count} more analysed alerts: `mindwatch explain {folder} --alert N` tells them."
        ).format(count=total - len(stories), folder=run.folder)
    return {"anomalies": shown, "anomalies_more": more}
