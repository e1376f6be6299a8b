"""The report's PDF, made for printing and forwarding: A4 portrait pages only.

Page 1 is a cover: title, folder, date, the multi-run comparison (best value per column
in bold) and each run's summary, set as tables. Then the charts, three to a page, as
vector graphics. Every page has a footer: the run (or folder) name, the date and
"page i of n".

Text is in the current language (:mod:`mindwatch.common.i18n`). Chinese needs a CJK
font: the WenQuanYi Micro Hei that the ``paperang-p2-fonts-cjk`` dependency ships (or a
Noto Sans CJK / Source Han Sans the system has) is registered with matplotlib as the
fallback after DejaVu Sans, and fonts are embedded as Type 42 (TrueType, subset to the
glyphs used), so the PDF shows and ``pdftotext`` extracts the Chinese.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from mindwatch._version import __version__
from mindwatch.common.i18n import N_, _
from mindwatch.tools import report_format
from mindwatch.tools.report_tables import comparison_table
from mindwatch.tools.smoothing import DEFAULT_WEIGHT, ema
from mindwatch.tools.summary import RunSummary, downsample

__all__ = ["A4_INCHES", "cjk_font", "write_pdf"]

log = logging.getLogger(__name__)

_Rows = Callable[[RunSummary], "list[tuple[str, str]]"]
A4_INCHES = (8.27, 11.69)  # 595 x 842 pt
CHARTS_PER_PAGE = 3
_COLORS = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
]  # fmt: skip
_BASE_FONT = "DejaVu Sans"
# Files of CJK fonts, looked for in this order: the packaged one, then common system ones.
_SYSTEM_CJK = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
)

# The labels of report.summary_rows and report_tables.comparison_table, for the
# catalogue: they are made in English there and translated here, where they are shown.
_LABELS = (
    N_("status"),
    N_("steps"),
    N_("duration"),
    N_("world size"),
    N_("final loss"),
    N_("best loss"),
    N_("non-finite losses"),
    N_("warning"),
    N_("tokens"),
    N_("run"),
    N_("samples/s (median)"),
    N_("duration (s)"),
)
_RATES = {
    "samples_per_s": N_("samples/s"),
    "tokens_per_s": N_("tokens/s"),
    "step_time_ms": N_("step time"),
}
_STATS = {"p50": N_("median"), "p95": N_("p95"), "mean": N_("mean"), "min": N_("min"),
          "max": N_("max")}  # fmt: skip


def cjk_font() -> Optional[str]:
    """The name of a CJK font registered with matplotlib, or None (with a warning)."""
    from matplotlib import font_manager

    candidates: list[str] = []
    try:
        from importlib.resources import files

        packaged = files("paperang_p2_fonts_cjk") / "fonts" / "wqy-microhei.ttc"
        if packaged.is_file():
            candidates.append(str(packaged))
    except ImportError:
        pass
    candidates += [p for p in _SYSTEM_CJK if Path(p).is_file()]
    for path in candidates:
        try:
            font_manager.fontManager.addfont(path)
            return str(font_manager.FontProperties(fname=path).get_name())
        except (OSError, RuntimeError, ValueError) as exc:
            log.debug("cannot use the font %s: %s", path, exc)
    log.warning(
        "mindwatch: no CJK font found; Chinese text in the PDF shows as boxes. "
        "Reinstall mindwatch (it depends on paperang-p2-fonts-cjk) or install "
        "fonts-wqy-microhei."
    )
    return None


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def _number(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value).replace("nan", "NaN")
    if value == 0 or 1e-4 <= abs(value) < 1e15:  # plain digits, thousands separated
        decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0) if value else 0
        text = f"{round(value, decimals):,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:.{digits - 1}e}"


def _date(runs: Sequence[RunSummary], created: datetime) -> str:
    """The runs' start date when they recorded one, else the report's."""
    for run in runs:
        start = run.facts.get("start_time")
        if isinstance(start, (int, float)) and math.isfinite(start) and start > 0:
            return datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%d")
        if isinstance(start, str) and len(start) >= 10:
            return start[:10]
    return created.strftime("%Y-%m-%d")


# ---------------------------------------------------------------- charts


def _has(runs: Sequence[RunSummary], tag: str) -> bool:
    return any(r.get(tag) is not None and len(r.get(tag)) for r in runs)  # type: ignore[arg-type]


def _plot(ax: Any, run: RunSummary, tag: str, i: int, label: str, *, smooth: bool) -> None:
    series = run.get(tag)
    if series is None or not len(series):
        return
    steps, values = downsample(series.steps, series.values)
    if smooth:
        ax.plot(steps, values, color=_color(i), linewidth=0.6, alpha=0.25)
        ax.plot(series.steps, ema(series.values), color=_color(i), linewidth=1.3, label=label)
    else:
        ax.plot(steps, values, color=_color(i), linewidth=1.2, label=label)


def _legend(ax: Any, runs: Sequence[RunSummary]) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    if len(labels) > 3:  # many runs: beside the plot, never over the curves
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.legend(fontsize=7, loc="best")


def _axes(ax: Any, *, ylabel: str, log: bool = False) -> None:
    ax.set_xlabel(_("step"), fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    if log:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_yscale("log")  # its default labels are mathtext, which is switched off
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _number(float(v), 3)))
        ax.yaxis.set_minor_formatter(NullFormatter())


def _name(run: RunSummary, runs: Sequence[RunSummary], single: str) -> str:
    return run.name if len(runs) > 1 else single


def _loss(ax: Any, runs: Sequence[RunSummary]) -> None:
    for i, run in enumerate(runs):
        _plot(ax, run, "train/loss", i, _name(run, runs, _("train (smoothed)")), smooth=True)
        evals = run.get("eval/loss")
        if evals is not None and len(evals):
            ax.plot(evals.steps, evals.values, "o--", color=_color(i), ms=3, lw=0.8)
        loss = run.get("train/loss")
        steps = [float(a["step"]) for a in run.alerts if isinstance(a.get("step"), int)]
        if steps and loss is not None:
            y = np.interp(steps, loss.steps, np.nan_to_num(loss.values, nan=0.0))
            ax.plot(steps, y, "v", color="#d62728", ms=6, zorder=5)
    if any(r.get("eval/loss") is not None for r in runs):
        ax.plot([], [], "o--", color="#555555", ms=3, lw=0.8, label=_("eval"))
    if any(r.alerts for r in runs):
        ax.plot([], [], "v", color="#d62728", ms=6, label=_("alert"))
    positive = all(
        r.get("train/loss") is None or bool((r.get("train/loss").finite() > 0).all())  # type: ignore[union-attr]
        for r in runs
    )
    _axes(ax, ylabel=_("loss"), log=positive)


def _grad(ax: Any, runs: Sequence[RunSummary]) -> None:
    for i, run in enumerate(runs):
        _plot(ax, run, "train/grad_norm", i, _name(run, runs, _("smoothed")), smooth=True)
    _axes(ax, ylabel=_("global gradient norm"))


def _simple(tag: str, ylabel: str, *, log: bool = False) -> Callable[[Any, Sequence[Any]], None]:
    def draw(ax: Any, runs: Sequence[RunSummary]) -> None:
        for i, run in enumerate(runs):
            _plot(ax, run, tag, i, _name(run, runs, ""), smooth=False)
        _axes(ax, ylabel=ylabel, log=log)

    return draw


def _throughput(tag: str) -> Callable[[Any, Sequence[Any]], None]:
    name = tag[len("perf/") :]

    def draw(ax: Any, runs: Sequence[RunSummary]) -> None:
        for i, run in enumerate(runs):
            _plot(ax, run, tag, i, _name(run, runs, ""), smooth=False)
            low, high = run.get(f"ranks/{name}_min"), run.get(f"ranks/{name}_max")
            if low is not None and high is not None and len(low) == len(high) and len(low):
                ax.fill_between(low.steps, low.values, high.values, color=_color(i), alpha=0.15)
        if any(r.get(f"ranks/{name}_min") is not None for r in runs):
            ax.fill_between([], [], [], color="#777777", alpha=0.3, label=_("range across ranks"))
        _axes(ax, ylabel=_(_RATES.get(name, name)))

    return draw


def _layers(run: RunSummary) -> Callable[[Any, Sequence[Any]], None]:
    norms = run.facts.get("param_norms") or {}

    def draw(ax: Any, runs: Sequence[RunSummary]) -> None:
        names = list(norms)[:40]  # a page holds about 40 readable rows
        y = np.arange(len(names))
        ax.barh(y - 0.2, [float(norms[n]["start"]) for n in names], 0.4, color="#9ecae1",
                label=_("first"))  # fmt: skip
        ax.barh(y + 0.2, [float(norms[n]["end"]) for n in names], 0.4, color="#3182bd",
                label=_("last"))  # fmt: skip
        ax.set_yticks(y)
        ax.set_yticklabels([n if len(n) <= 40 else "…" + n[-39:] for n in names], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel(_("parameter L2 norm"), fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", alpha=0.3)

    return draw


def _charts(runs: Sequence[RunSummary]) -> list[tuple[str, Callable[[Any, Sequence[Any]], None]]]:
    """(title, draw(ax, runs)) for each chart the runs have data for, in report order."""
    out: list[tuple[str, Callable[[Any, Sequence[Any]], None]]] = []
    weight = _("smoothed with TensorBoard's EMA, weight {weight}").format(weight=DEFAULT_WEIGHT)
    if _has(runs, "train/loss"):
        out.append((_("Loss") + f" ({weight})", _loss))
    if _has(runs, "train/lr"):
        out.append((_("Learning rate"), _simple("train/lr", _("learning rate"))))
    if _has(runs, "train/grad_norm"):
        out.append((_("Gradient norm") + f" ({weight})", _grad))
    for tag in ("perf/samples_per_s", "perf/tokens_per_s"):
        if _has(runs, tag):
            out.append((_("Throughput"), _throughput(tag)))
            break
    if _has(runs, "perf/step_time_ms"):
        out.append((_("Step time"), _simple("perf/step_time_ms", _("step time (ms)"), log=True)))
    for run in runs:
        if run.facts.get("param_norms"):
            title = _("Per-layer parameter L2 norms")
            out.append((f"{title} ({run.name})" if len(runs) > 1 else title, _layers(run)))
    return out


# ---------------------------------------------------------------- pages


class _Page:
    """An A4 figure with a cursor that tables and charts are placed below."""

    LEFT, RIGHT, TOP, BOTTOM = 0.08, 0.94, 0.95, 0.06

    def __init__(self) -> None:
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=A4_INCHES)
        self.y = self.TOP

    def room(self) -> float:
        return self.y - self.BOTTOM

    def heading(self, text: str, size: float = 12) -> None:
        self.fig.text(self.LEFT, self.y, text, fontsize=size, va="top", weight="bold")
        self.y -= size / 72 / A4_INCHES[1] + 0.012

    def line(self, text: str, size: float = 8.5, color: str = "#444444") -> None:
        self.fig.text(self.LEFT, self.y, text, fontsize=size, va="top", color=color)
        self.y -= size / 72 / A4_INCHES[1] * 1.5

    def table(
        self,
        header: Optional[list[str]],
        rows: list[list[str]],
        widths: list[float],
        bold: Optional[set[tuple[int, int]]] = None,
    ) -> None:
        """Rows of text cells as a ruled table; ``bold``: (row, column) cells to mark."""
        row_h = 0.0185
        count = len(rows) + (1 if header else 0)
        height = row_h * count
        from matplotlib.transforms import Bbox

        ax = self.fig.add_axes((self.LEFT, self.y - height, self.RIGHT - self.LEFT, height))
        ax.set_axis_off()
        cells = ([header] if header else []) + rows
        table = ax.table(
            cellText=cells, colWidths=widths, loc="upper left", bbox=Bbox.from_bounds(0, 0, 1, 1)
        )
        table.auto_set_font_size(False)
        table.set_fontsize(8)
        for (r, c), cell in table.get_celld().items():
            cell.set_edgecolor("#cccccc")
            cell.set_linewidth(0.5)
            cell.get_text().set_horizontalalignment("left" if c == 0 else "right")
            cell.PAD = 0.03
            if header and r == 0:
                cell.set_facecolor("#eef2f7")
                cell.get_text().set_fontsize(7)
                cell.get_text().set_fontweight("bold")
            body = r - (1 if header else 0)
            if bold and (body, c) in bold:
                cell.get_text().set_fontweight("bold")
                cell.set_facecolor("#e6f4ea")
        self.y -= height + 0.025


def _cover(
    runs: Sequence[RunSummary], logdir: Path, created: datetime, summary_rows: _Rows
) -> list[_Page]:
    pages = [_Page()]
    page = pages[0]
    page.heading(_("Training report"), 18)
    page.line(_("Folder: {folder}").format(folder=logdir))
    page.line(
        _("Created {date} by mindwatch {version}").format(
            date=created.strftime("%Y-%m-%d %H:%M UTC"), version=__version__
        )
    )
    page.y -= 0.015
    if len(runs) > 1:
        table = comparison_table(runs)
        page.heading(_("Comparison of runs"))
        page.line(_("The best value of each column is in bold."), 7.5)
        bold = {(r, c) for c, r in table.best.items()}
        widths = [0.32] + [0.68 / (len(table.header) - 1)] * (len(table.header) - 1)
        page.table([_(h) for h in table.header], table.rows, widths, bold)
    for run in runs:
        rows = [[_(label), value] for label, value in summary_rows(run)]
        rows.append([_("alerts"), str(len(run.alerts))])
        speed = run.facts.get("throughput") or {}
        for name, stats in speed.items():
            if isinstance(stats, dict) and stats:  # the others say what was left out
                shown = ", ".join(
                    f"{_(_STATS.get(str(k), str(k)))} {report_format.metric_value(name, v)}"
                    for k, v in stats.items()
                )
                rows.append([_(_RATES.get(name, name)), shown])

        hparams = sorted((run.facts.get("hparams") or {}).items())
        needed = 0.0185 * len(rows) + 0.06
        if page.room() < needed:
            page = _Page()
            pages.append(page)
        page.heading(_("Run {name}").format(name=run.name), 11)
        page.table(None, rows, [0.35, 0.65])
        if hparams:
            rows = [[key, _number(value)] for key, value in hparams]
            if page.room() < 0.0185 * len(rows) + 0.06:
                page = _Page()
                pages.append(page)
            page.heading(_("Hyperparameters"), 10)
            page.table(None, rows, [0.35, 0.65])
    return pages


def _chart_pages(runs: Sequence[RunSummary]) -> list[_Page]:
    pages: list[_Page] = []
    charts = _charts(runs)
    many = len(runs) > 3
    for start in range(0, len(charts), CHARTS_PER_PAGE):
        page = _Page()
        slot = (page.TOP - page.BOTTOM) / CHARTS_PER_PAGE
        for k, (title, draw) in enumerate(charts[start : start + CHARTS_PER_PAGE]):
            top = page.TOP - k * slot
            page.fig.text(page.LEFT, top, title, fontsize=10, va="top", weight="bold")
            right = 0.74 if many else page.RIGHT
            left = 0.3 if title.startswith(_("Per-layer parameter L2 norms")) else page.LEFT + 0.02
            ax = page.fig.add_axes((left, top - slot + 0.045, right - left, slot - 0.085))
            draw(ax, runs)
            _legend(ax, runs)
        pages.append(page)
    return pages


def _footer(page: _Page, left: str, number: int, total: int) -> None:
    page.fig.text(page.LEFT, 0.025, left, fontsize=7, color="#666666", va="bottom")
    page.fig.text(
        page.RIGHT,
        0.025,
        _("page {page} of {pages}").format(page=number, pages=total),
        fontsize=7,
        color="#666666",
        va="bottom",
        ha="right",
    )


def write_pdf(runs: Sequence[RunSummary], logdir: Path, path: Path, summary_rows: _Rows) -> None:
    """The report of ``runs`` as an A4 PDF at ``path``, in the current language.

    ``summary_rows``: a run's summary as (label, value) rows, the same as the other
    formats show (:func:`mindwatch.tools.report.summary_rows`, passed in: report imports
    this module)."""
    import matplotlib

    created = datetime.now(timezone.utc)
    cjk = cjk_font()
    rc: Any = {
        "text.parse_math": False,  # '$' in a run or tag name is plain text
        "font.family": [_BASE_FONT] + ([cjk] if cjk else []),  # per-glyph fallback
        "pdf.fonttype": 42,  # TrueType, subset: text stays text (searchable, extractable)
        "axes.titlesize": 9,
    }
    name = runs[0].name if len(runs) == 1 else (logdir.resolve().name or str(logdir))
    footer = _("mindwatch report · {name} · {date}").format(name=name, date=_date(runs, created))
    # A CJK font has no bold face: matplotlib uses the regular one, warning on each text.
    quiet = logging.getLogger("matplotlib.font_manager")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with matplotlib.rc_context(rc):
            _render(runs, logdir, path, summary_rows, created=created, name=name, footer=footer)
    finally:
        quiet.setLevel(level)


def _render(
    runs: Sequence[RunSummary],
    logdir: Path,
    path: Path,
    summary_rows: _Rows,
    *,
    created: datetime,
    name: str,
    footer: str,
) -> None:
    from matplotlib.backends.backend_pdf import PdfPages

    pages = _cover(runs, logdir, created, summary_rows) + _chart_pages(runs)
    metadata = {"Title": _("Training report") + f": {name}", "Creator": "mindwatch"}
    with PdfPages(path, metadata=metadata) as pdf:
        for number, page in enumerate(pages, 1):
            _footer(page, footer, number, len(pages))
            pdf.savefig(page.fig)
