"""The report's charts drawn with matplotlib: the PDF's pages and the script-free HTML
(``--static``) show the same ones.

Each chart is a title and ``draw(ax, runs)``: the loss, gradient norm smoothed as
TensorBoard smooths them (the raw values faint behind), the learning rate, throughput
with the band across ranks, step time on a log scale, per-layer parameter norms. Lines
are drawn from at most 2,000 points each (min and max per bucket), so a million-point
run costs no more than a short one. Text is in the current language
(:mod:`mindwatch.common.i18n`); Chinese needs a CJK font (:func:`cjk_fonts`, which
:func:`style` puts after DejaVu Sans as a per-glyph fallback).
"""

from __future__ import annotations

import functools
import io
import logging
import math
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mindwatch.common.i18n import N_, _
from mindwatch.metrics.smoothing import DEFAULT_WEIGHT, ema
from mindwatch.tools.report.summary import RunSummary, downsample, throughput_band

__all__ = [
    "RATES",
    "STATS",
    "Draw",
    "charts",
    "cjk_fonts",
    "legend",
    "number",
    "style",
    "svg_charts",
]

log = logging.getLogger(__name__)

Draw = Callable[[Any, Sequence[RunSummary]], None]
_COLORS = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
]  # fmt: skip
_BASE_FONT = "DejaVu Sans"
# matplotlib's warning for a character no font in font.family has (>= 3.6)
_MISSING_GLYPH = re.compile(r"Glyph (\d+) \(.*\) missing from")
# The vendored CJK font (a subset of Noto Sans CJK SC: vendor/README.md says which
# characters and why), then system fonts that cover more, used where they exist.
VENDORED_CJK = Path(__file__).with_name("vendor") / "NotoSansCJKsc-Subset.ttf"
_SYSTEM_CJK = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
)

RATES = {
    "samples_per_s": N_("samples/s"),
    "tokens_per_s": N_("tokens/s"),
    "step_time_ms": N_("step time"),
}
STATS = {"p50": N_("median"), "p95": N_("p95"), "mean": N_("mean"), "min": N_("min"),
          "max": N_("max")}  # fmt: skip


@functools.cache  # registered with matplotlib once per process
def cjk_fonts() -> tuple[str, ...]:
    """The names of the CJK fonts registered with matplotlib, in fallback order: the
    vendored Noto Sans CJK SC subset (``vendor/README.md``), then the CJK fonts of the
    system that exist (they fill in characters the subset lacks). Empty, with a
    warning, when none can be read."""
    from matplotlib import font_manager

    candidates = [str(VENDORED_CJK)] + [p for p in _SYSTEM_CJK if Path(p).is_file()]
    names: list[str] = []
    for path in candidates:
        try:
            font_manager.fontManager.addfont(path)
            name = str(font_manager.FontProperties(fname=path).get_name())
        except (OSError, RuntimeError, ValueError) as exc:
            log.debug("cannot use the font %s: %s", path, exc)
        else:
            if name not in names:
                names.append(name)
    if not names:
        log.warning(
            "mindwatch: no CJK font found (%s cannot be read); Chinese text in the PDF "
            "shows as boxes. Reinstall mindwatch, or install fonts-noto-cjk.",
            VENDORED_CJK,
        )
    return tuple(names)


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def number(value: Any, digits: int = 4) -> str:
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


def _has(runs: Sequence[RunSummary], tag: str) -> bool:
    return any(r.get(tag) is not None and len(r.get(tag)) for r in runs)  # type: ignore[arg-type]


def _plot(ax: Any, run: RunSummary, tag: str, i: int, label: str, *, smooth: bool) -> None:
    series = run.get(tag)
    if series is None or not len(series):
        return
    steps, values = downsample(series.steps, series.values)
    if smooth:
        ax.plot(steps, values, color=_color(i), linewidth=0.6, alpha=0.25)
        smooth_steps, smoothed = downsample(series.steps, ema(series.values))
        ax.plot(smooth_steps, smoothed, color=_color(i), linewidth=1.3, label=label)
    else:
        ax.plot(steps, values, color=_color(i), linewidth=1.2, label=label)


_LEGEND_SIZE = 7.0


def legend(ax: Any, runs: Sequence[RunSummary]) -> None:
    """The runs' legend: beside the plot for many runs (never over the curves), else
    inside it; a long run name wraps (measured, :mod:`.fit`) to the room beside the
    plot, or inside it to half the plot's width, never past the figure's edge."""
    from mindwatch.tools.report.fit import fit_lines

    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    beside = len(labels) > 3
    box = ax.get_position()
    width_pt = ax.figure.get_figwidth() * 72
    # the line sample, the gap after it and the legend's own padding: 2 + 0.8 + 2 x 0.4
    # font sizes (matplotlib's defaults), a point of slack
    sample = _LEGEND_SIZE * 3.6 + 1
    if beside:
        room = width_pt * (1 - box.x1 - 0.01) - sample - 4
    else:
        room = width_pt * box.width * 0.5 - sample
    labels = ["\n".join(fit_lines(label, max(room, 30.0), _LEGEND_SIZE)) for label in labels]
    if beside:
        ax.legend(
            handles,
            labels,
            fontsize=_LEGEND_SIZE,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            frameon=False,
        )
    else:
        ax.legend(handles, labels, fontsize=_LEGEND_SIZE, loc="best")


def _axes(ax: Any, *, ylabel: str, log: bool = False) -> None:
    ax.set_xlabel(_("step"), fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    if log:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_yscale("log")  # its default labels are mathtext, which is switched off
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: number(float(v), 3)))
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
        steps = [float(a["step"]) for a in run.alerts]  # an int: mindwatch.alerts.reading
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
        shown = ""
        for i, run in enumerate(runs):
            _plot(ax, run, tag, i, _name(run, runs, ""), smooth=False)
            band = throughput_band(run, name)
            if band is not None:
                steps, low, high, ranks = band
                ax.fill_between(steps, low, high, color=_color(i), alpha=0.15)
                shown = _("slowest to fastest rank, × {ranks} ranks").format(ranks=ranks)
        if shown:
            ax.fill_between([], [], [], color="#777777", alpha=0.3, label=shown)
        _axes(ax, ylabel=_(RATES.get(name, name)))

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


def charts(runs: Sequence[RunSummary]) -> list[tuple[str, Callable[[Any, Sequence[Any]], None]]]:
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


@contextmanager
def style(*, truetype: bool = True) -> Iterator[None]:
    """matplotlib's settings for the report's charts: '$' is plain text, DejaVu Sans
    with a CJK fallback. In a PDF, fonts are embedded as TrueType (Type 42) subsets with
    ``truetype``, else as Type 3: both keep the text searchable and extractable, but
    subsetting TrueType fonts costs ~0.13 s per font (fontTools), and only CJK text needs
    it (Type 3 fonts hold 255 glyphs; matplotlib draws the rest as shapes)."""
    import matplotlib

    rc: Any = {
        "text.parse_math": False,  # '$' in a run or tag name is plain text
        "font.family": [_BASE_FONT, *cjk_fonts()],  # per-glyph fallback
        "pdf.fonttype": 42 if truetype else 3,
        "svg.fonttype": "path",  # text as shapes: a tag named <script> is not markup
        "svg.hashsalt": "mindwatch",  # the same SVG for the same runs
        "axes.titlesize": 9,
    }
    # A CJK font has no bold face: matplotlib uses the regular one, warning on each text.
    quiet = logging.getLogger("matplotlib.font_manager")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with matplotlib.rc_context(rc), _missing_glyphs():
            yield
    finally:
        quiet.setLevel(level)


@contextmanager
def _missing_glyphs() -> Iterator[None]:
    """One warning naming the characters that none of the fonts has, instead of
    matplotlib's one per character and per time a text is measured or drawn (a run's
    name is drawn on every page). matplotlib draws such a character as its "last
    resort" box; the text stays extractable from the PDF."""
    missing: set[int] = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=_MISSING_GLYPH.pattern)
        try:
            yield
        finally:
            others = []
            for warning in caught:
                found = _MISSING_GLYPH.match(str(warning.message))
                if found:
                    missing.add(int(found.group(1)))
                else:
                    others.append(warning)
    for warning in others:  # not ours: shown as they would have been
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    if missing:
        shown = ", ".join(f"{chr(c)} (U+{c:04X})" for c in sorted(missing)[:20])
        more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
        log.warning(
            "mindwatch: %d characters of the report are in none of its fonts and show as "
            "boxes in the PDF and the charts: %s%s. Install a font that has them (Noto "
            "Sans CJK: fonts-noto-cjk) and write the report again.",
            len(missing),
            shown,
            more,
        )


def svg_charts(runs: Sequence[RunSummary]) -> list[tuple[str, str]]:
    """(title, inline SVG) of each chart, for the script-free HTML."""
    from matplotlib.figure import Figure

    out = []
    with style():
        for title, draw in charts(runs):
            fig = Figure(figsize=(8.0, 3.2), dpi=100)
            left = 0.3 if title.startswith(_("Per-layer parameter L2 norms")) else 0.09
            right = 0.78 if len(runs) > 3 else 0.98  # many runs: the legend beside
            ax = fig.add_axes((left, 0.15, right - left, 0.72))
            draw(ax, runs)
            legend(ax, runs)
            fig.suptitle(title, fontsize=10, x=0.01, ha="left")
            buffer = io.StringIO()
            fig.savefig(buffer, format="svg", metadata={"Date": None})
            text = buffer.getvalue()
            text = text[text.index("<svg") :]  # no XML prolog or doctype: inline SVG
            # nor the RDF metadata block (creator credits with URLs nobody needs here)
            out.append((title, re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)))
    return out
