"""The report's PDF, made for printing and forwarding: A4 portrait pages only.

Page 1 is a cover: title, folder, date, the multi-run comparison (best value per column
in bold) and each run's summary, set as tables. Then the charts, three to a page, as
vector graphics; then the anomalies (each analysed alert's story and heatmap,
:mod:`.anomalies`). Every page has a footer: the run (or folder) name, the date and
"page i of n".

The charts are :mod:`mindwatch.tools.report.charts`' (the script-free HTML shows the
same). Text is in the current language (:mod:`mindwatch.common.i18n`). Chinese needs a
CJK font: the vendored subset of Noto Sans CJK SC (``vendor/README.md``; then the CJK
fonts the system has, for characters it lacks) is the fallback after DejaVu Sans, and,
when the PDF holds CJK text, fonts are embedded as Type 42 (TrueType, subset to the
glyphs used), so the PDF shows and ``pdftotext`` extracts the Chinese. Otherwise
Type 3, as searchable and extractable, without the ~0.4 s of font subsetting that was
half the PDF's time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from mindwatch._version import __version__
from mindwatch.common.i18n import _, get_language
from mindwatch.tools.explain import wrap
from mindwatch.tools.report import formatting
from mindwatch.tools.report.anomalies import draw_heat, heat_caption, run_anomalies
from mindwatch.tools.report.charts import RATES, STATS, charts, legend, number, style
from mindwatch.tools.report.fit import NBSP, ellipsize, text_width
from mindwatch.tools.report.page import A4_INCHES, WIDTH_PT, Page
from mindwatch.tools.report.ranks import ranks_header, ranks_notes, ranks_rows
from mindwatch.tools.report.rows import summary_rows
from mindwatch.tools.report.summary import RunSummary
from mindwatch.tools.report.tables import comparison_table, shared_hparams

__all__ = ["A4_INCHES", "write_pdf"]

CHARTS_PER_PAGE = 3


def _date(runs: Sequence[RunSummary], created: datetime) -> str:
    """The runs' start date when they recorded one, else the report's."""
    for run in runs:
        start = run.facts.get("start_time")
        if isinstance(start, (int, float)) and math.isfinite(start) and start > 0:
            return datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%d")
        if isinstance(start, str) and len(start) >= 10:
            return start[:10]
    return created.strftime("%Y-%m-%d")


def _two_lines(label: str) -> str:
    """A long column label broken at its middle space (a narrow column's header)."""
    if len(label) < 10 or " " not in label:
        return label
    spaces = [i for i, c in enumerate(label) if c == " "]
    cut = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return label[:cut] + "\n" + label[cut + 1 :]


def _cover(runs: Sequence[RunSummary], logdir: Path, created: datetime) -> list[Page]:
    pages = [Page()]
    page = pages[0]

    def new_page() -> Page:
        pages.append(Page())
        return pages[-1]

    def place(
        heading: str,
        size: float,
        header: Optional[list[str]],
        rows: list[list[str]],
        widths: list[float],
        **options: Any,
    ) -> Page:
        """A heading and its table: on a new page when the table would fit one but not
        the rest of this one (a table longer than a page starts here and goes on)."""
        nonlocal page
        height = page.table_height(header, rows, widths) + 0.04
        if page.room() < min(height, 0.25):
            page = new_page()
        page.heading(heading, size)
        page = page.table(header, rows, widths, more=new_page, **options)
        return page

    page.heading(_("Training report"), 18)
    page.line(_("Folder: {folder}").format(folder=logdir))
    page.line(
        _("Created {date} by mindwatch {version}").format(
            date=created.strftime("%Y-%m-%d %H:%M UTC"), version=__version__
        )
    )
    page.y -= 0.015
    shared = shared_hparams(runs)
    if len(runs) > 1:
        table = comparison_table(runs)
        page.heading(_("Comparison of runs"))
        page.line(_("The best value of each column is in bold."), 7.5)
        bold = {(r, c) for c in table.best for r in range(len(table.rows)) if table.is_best(r, c)}
        widths = [0.32] + [0.68 / (len(table.header) - 1)] * (len(table.header) - 1)
        page = page.table(table.header, table.rows, widths, bold, more=new_page)
    if shared:
        rows = [[k, number(v)] for k, v in sorted(shared.items())]
        place(_("Hyperparameters shared by all runs"), 10, None, rows, [0.35, 0.65])
    for run in runs:
        rows = [[label, value] for label, value in summary_rows(run)]
        rows.append([_("alerts"), str(len(run.alerts))])
        speed = run.facts.get("throughput") or {}
        for name, stats in speed.items():
            if isinstance(stats, dict) and stats:  # the others say what was left out
                shown = ", ".join(  # each statistic with its value on one line
                    f"{_(STATS.get(str(k), str(k)))} {formatting.metric_value(name, v)}".replace(
                        " ", NBSP
                    )
                    for k, v in stats.items()
                )
                rows.append([_(RATES.get(name, name)), shown])

        hparams = sorted(
            (k, v) for k, v in (run.facts.get("hparams") or {}).items() if k not in shared
        )
        place(_("Run {name}").format(name=run.name), 11, None, rows, [0.35, 0.65])
        if hparams:
            rows = [[key, number(value)] for key, value in hparams]
            title = _("Hyperparameters of this run") if shared else _("Hyperparameters")
            place(title, 10, None, rows, [0.35, 0.65])
        ranks = run.facts.get("ranks") or []
        if ranks:
            header = [_two_lines(label) for label in ranks_header()]
            widths = [0.06, 0.16, 0.07, 0.1, 0.1, 0.13, 0.13, 0.13, 0.12]
            place(_("Ranks"), 10, header, ranks_rows(ranks), widths)
            for note in ranks_notes(ranks):  # wrapped to the page's width
                page.line(note, 6.5)
    return pages


def _chart_pages(runs: Sequence[RunSummary]) -> list[Page]:
    pages: list[Page] = []
    chart_list = charts(runs)
    many = len(runs) > 3
    for start in range(0, len(chart_list), CHARTS_PER_PAGE):
        page = Page()
        slot = (page.TOP - page.BOTTOM) / CHARTS_PER_PAGE
        for k, (title, draw) in enumerate(chart_list[start : start + CHARTS_PER_PAGE]):
            top = page.TOP - k * slot
            page.fig.text(page.LEFT, top, title, fontsize=10, va="top", weight="bold")
            right = 0.74 if many else page.RIGHT
            left = 0.3 if title.startswith(_("Per-layer parameter L2 norms")) else page.LEFT + 0.02
            ax = page.fig.add_axes((left, top - slot + 0.045, right - left, slot - 0.085))
            draw(ax, runs)
            legend(ax, runs)
        pages.append(page)
    return pages


_MONO = "DejaVu Sans Mono"


def _wrapped(page: Page, text: str, size: float = 8.0, width: int = 120) -> None:
    """A paragraph in lines that fit the page (CJK letters counted twice as wide)."""
    for part in wrap(text, width, "", "  "):
        page.line(part, size, "#222222")


def _anomaly_pages(runs: Sequence[RunSummary]) -> list[Page]:
    """Each analysed alert's story and its heatmap (:mod:`.anomalies`), pages of their
    own after the charts: a story takes a third to half a page."""
    pages: list[Page] = []
    page: Optional[Page] = None

    def room(needed: float) -> Page:
        nonlocal page
        if page is None or page.room() < needed:
            page = Page()
            pages.append(page)
            page.heading(_("Anomalies"), 14)
        return page

    for run, stories, total in run_anomalies(runs):
        room(0.2).heading(run.name, 11)
        for told in stories:
            rows = len((told.heat or {}).get("layers") or [])
            current = room(0.12)
            current.y -= 0.006
            for part in wrap(
                _("Alert {number}: {what}").format(number=told.number, what=told.what), 100
            ):
                current.line(part, 9, "#000000")
            for block in told.blocks:
                current = room(0.05 + (0.0185 * (len(block.rows) + 1) if block.rows else 0.0))
                if block.title:
                    current.line(block.title, 8.5, "#57606a")
                if block.kind == "text":
                    for paragraph in block.paragraphs:
                        _wrapped(current, paragraph)
                elif block.kind == "table":
                    widths = [0.05, 0.07, 0.07, 0.1] + [0.06] * (len(block.header) - 5)
                    widths.append(1.0 - sum(widths))
                    last = frozenset({len(block.header) - 1})
                    current = current.table(
                        list(block.header),
                        [list(r) for r in block.rows],
                        widths,
                        left=last,
                        more=lambda: room(2.0),  # a page of its own: the rest of the rows
                    )
                    current.y += 0.015
                    if block.text:
                        _wrapped(current, block.text, 7.5)
                else:
                    if block.language:
                        current.line(block.language, 7.5)
                    for code in block.lines:
                        for part in wrap(code, 130, "", "    "):
                            current.fig.text(
                                current.LEFT + 0.02, current.y, part, fontsize=7, va="top",
                                family=_MONO,
                            )  # fmt: skip
                            current.y -= 7 / 72 / A4_INCHES[1] * 1.45
            if told.heat is not None and rows:
                height = 0.02 + 0.011 * rows
                current = room(height + 0.07)
                ax = current.fig.add_axes((0.38, current.y - height, 0.5, height))
                draw_heat(ax, told, fontsize=5.5)
                current.y -= height + 0.035
                for part in wrap(heat_caption(told), 150):
                    current.line(part, 6.5)
            current.y -= 0.01
        if total > len(stories):
            room(0.04).line(
                _(
                    "{count} more analysed alerts: `mindwatch explain {folder} --alert N` "
                    "tells them."
                ).format(count=total - len(stories), folder=run.folder),
                7.5,
            )
    return pages


def _footer(page: Page, left: str, number: int, total: int) -> None:
    """The footer's one line: the report's name (shortened in its middle when it would
    run into the page number) and "page i of n"."""
    count = _("page {page} of {pages}").format(page=number, pages=total)
    room = (page.RIGHT - page.LEFT) * WIDTH_PT - text_width(count, 7) - 12
    page.fig.text(
        page.LEFT, 0.025, ellipsize(left, room, 7), fontsize=7, color="#666666", va="bottom"
    )
    page.fig.text(
        page.RIGHT,
        0.025,
        count,
        fontsize=7,
        color="#666666",
        va="bottom",
        ha="right",
    )


def write_pdf(runs: Sequence[RunSummary], logdir: Path, path: Path) -> None:
    """The report of ``runs`` as an A4 PDF at ``path``, in the current language; each
    run's summary has the rows the other formats show (:func:`.rows.summary_rows`)."""
    created = datetime.now(timezone.utc)
    name = runs[0].name if len(runs) == 1 else (logdir.resolve().name or str(logdir))
    footer = _("mindwatch report · {name} · {date}").format(name=name, date=_date(runs, created))
    with style(truetype=_has_cjk(runs, logdir)):
        _render(runs, logdir, path, created=created, name=name, footer=footer)


def _has_cjk(runs: Sequence[RunSummary], logdir: Path) -> bool:
    """Whether the PDF will hold CJK text: the report is in Chinese, or a name, tag,
    hyperparameter or alert message is."""
    if get_language() == "zh":
        return True
    texts = [str(logdir)]
    for run in runs:
        texts += [run.name, *run.series, *map(str, (run.facts.get("hparams") or {}).items())]
        texts += [str(a.get("message", "")) for a in run.alerts]
    return any(ord(c) >= 0x2E80 for text in texts for c in text)  # CJK radicals on


def _render(
    runs: Sequence[RunSummary],
    logdir: Path,
    path: Path,
    *,
    created: datetime,
    name: str,
    footer: str,
) -> None:
    from matplotlib.backends.backend_pdf import PdfPages

    pages = _cover(runs, logdir, created) + _chart_pages(runs) + _anomaly_pages(runs)
    metadata = {"Title": _("Training report") + f": {name}", "Creator": "mindwatch"}
    with PdfPages(path, metadata=metadata) as pdf:
        for number, page in enumerate(pages, 1):
            _footer(page, footer, number, len(pages))
            pdf.savefig(page.fig)
