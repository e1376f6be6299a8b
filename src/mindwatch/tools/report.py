"""``mindwatch report``: a training report from event files alone.

HTML (one self-contained file that fetches nothing: interactive charts with plotly.js
inlined, see :mod:`mindwatch.tools.report_html`, or with ``static`` inline SVG charts
and no script), PDF (the same charts, matplotlib), JSON (the machine-readable summary) and Markdown
(for a CI comment). Several runs below one folder are overlaid in every chart.

Charts are drawn with matplotlib's ``Figure`` (no pyplot state). Text in the SVGs is
drawn as paths, so a tag named ``<script>`` is shapes, not markup; everything else
goes through Jinja2 with autoescaping.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mindwatch._version import __version__
from mindwatch.common.i18n import _
from mindwatch.tools import report_format
from mindwatch.tools.report_tables import comparison_table
from mindwatch.tools.summary import RunSummary, downsample

__all__ = ["FORMATS", "Chart", "charts", "write_report"]

FORMATS = ("html", "pdf", "json", "md")
_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


@dataclass
class Chart:
    """One chart: a title, a caption, and how to draw it on a matplotlib Figure."""

    key: str
    title: str
    caption: str
    draw: Callable[[Any], None]


def _color(i: int) -> str:
    return _COLORS[i % len(_COLORS)]


def _line(ax: Any, run: RunSummary, tag: str, i: int, label: str, **kw: Any) -> bool:
    series = run.get(tag)
    if series is None or not len(series):
        return False
    steps, values = downsample(series.steps, series.values)
    ax.plot(steps, values, color=_color(i), linewidth=1.2, label=label, **kw)
    return True


def _label(run: RunSummary, runs: Sequence[RunSummary], single: str = "train") -> str:
    """A curve's legend: the run's name when several runs overlay, else ``single``."""
    return run.name if len(runs) > 1 else single


def _series_chart(
    runs: Sequence[RunSummary],
    tag: str,
    key: str,
    title: str,
    caption: str,
    *,
    ylabel: str,
    single: str,
    log: bool = False,
) -> Chart:
    """A chart of one tag's curve per run."""

    def draw(fig: Any) -> None:
        ax = fig.add_subplot(1, 1, 1)
        for i, run in enumerate(runs):
            _line(ax, run, tag, i, _label(run, runs, single))
        ax.set_ylabel(ylabel)
        _finish(ax, log=log)

    return Chart(key, title, caption, draw)


def _finish(ax: Any, *, xlabel: str = "step", log: bool = False) -> None:
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    if log:
        ax.set_yscale("log")
    handles, _labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8, loc="best")


def charts(runs: Sequence[RunSummary]) -> list[Chart]:
    """The charts the runs have data for, in report order."""
    out: list[Chart] = []

    def has(tag: str) -> bool:
        return any(r.get(tag) is not None for r in runs)

    if has("train/loss"):

        def draw_loss(fig: Any) -> None:
            ax = fig.add_subplot(1, 1, 1)
            for i, run in enumerate(runs):
                _line(ax, run, "train/loss", i, _label(run, runs))
                evals = run.get("eval/loss")
                if evals is not None:
                    name = "eval" if len(runs) == 1 else f"{run.name} eval"
                    ax.plot(evals.steps, evals.values, "o--", color=_color(i), ms=4, label=name)
                loss = run.get("train/loss")
                steps = [float(a["step"]) for a in run.alerts if isinstance(a.get("step"), int)]
                if steps and loss is not None:
                    y = np.interp(steps, loss.steps, np.nan_to_num(loss.values, nan=0.0))
                    ax.plot(steps, y, "v", color="#d62728", ms=8, label="alerts")
            ax.set_ylabel("loss")
            positive = all(
                r.get("train/loss") is None or (r.get("train/loss").finite() > 0).all()  # type: ignore[union-attr]
                for r in runs
            )
            _finish(ax, log=positive)

        out.append(
            Chart(
                "loss",
                "Loss",
                "train/loss (lines) and eval/loss (markers); alerts marked.",
                draw_loss,
            )
        )
    if has("train/lr"):
        out.append(
            _series_chart(
                runs,
                "train/lr",
                "lr",
                "Learning rate",
                "train/lr, the rate the optimizer used.",
                ylabel="learning rate",
                single="lr",
            )
        )
    if has("train/grad_norm"):

        def draw_grad(fig: Any) -> None:
            curve, hist = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
            for i, run in enumerate(runs):
                _line(curve, run, "train/grad_norm", i, _label(run, runs, ""))
                series = run.get("train/grad_norm")
                if series is not None and len(series.finite()):
                    hist.hist(series.finite(), bins=40, color=_color(i), alpha=0.6)
            curve.set_ylabel("global gradient norm")
            _finish(curve)
            hist.set_xlabel("gradient norm")
            hist.set_ylabel("steps")
            hist.grid(True, alpha=0.3)

        out.append(
            Chart(
                "grad_norm",
                "Gradient norm",
                "train/grad_norm over steps, and its distribution over all steps.",
                draw_grad,
            )
        )
    if has("perf/samples_per_s") or has("perf/tokens_per_s"):
        tag = "perf/samples_per_s" if has("perf/samples_per_s") else "perf/tokens_per_s"

        def draw_throughput(fig: Any) -> None:
            ax = fig.add_subplot(1, 1, 1)
            for i, run in enumerate(runs):
                _line(ax, run, tag, i, _label(run, runs, tag[5:]))
                name = tag[5:]
                low, high = run.get(f"ranks/{name}_min"), run.get(f"ranks/{name}_max")
                if low is not None and high is not None and len(low) == len(high):
                    ax.fill_between(
                        low.steps,
                        low.values,
                        high.values,
                        color=_color(i),
                        alpha=0.15,
                        label="per-rank min-max",
                    )
            ax.set_ylabel(tag[5:].replace("_per_s", "/s"))
            _finish(ax)

        out.append(
            Chart(
                "throughput",
                "Throughput",
                f"{tag}; the band is the spread across ranks.",
                draw_throughput,
            )
        )
    if has("perf/step_time_ms"):
        out.append(
            _series_chart(
                runs,
                "perf/step_time_ms",
                "step_time",
                "Step time",
                "perf/step_time_ms.",
                ylabel="step time (ms)",
                single="step",
                log=True,
            )
        )
    for run in runs:
        norms = run.facts.get("param_norms")
        if not norms:
            continue

        def draw_layers(fig: Any, norms: dict[str, Any] = norms) -> None:
            ax = fig.add_subplot(1, 1, 1)
            names = list(norms)
            y = np.arange(len(names))
            start = [float(norms[n]["start"]) for n in names]
            end = [float(norms[n]["end"]) for n in names]
            ax.barh(y - 0.2, start, height=0.4, color="#9ecae1", label="start")
            ax.barh(y + 0.2, end, height=0.4, color="#3182bd", label="end")
            ax.set_yticks(y)
            ax.set_yticklabels(names, fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel("parameter L2 norm")
            ax.grid(True, axis="x", alpha=0.3)
            ax.legend(fontsize=8)

        suffix = f" ({run.name})" if len(runs) > 1 else ""
        out.append(
            Chart(
                f"layers_{len(out)}",
                f"Per-layer parameter L2 norms{suffix}",
                "layers/param_norm/<param>: first and last recorded value.",
                draw_layers,
            )
        )
    return out


class _Figures:
    """Each chart's figure, drawn once and saved as SVG and into the PDF alike.

    Fixed margins, not a layout engine: constrained and tight layouts draw every
    figure twice, which was half of a report's time."""

    def __init__(self, chart_list: list[Chart]) -> None:
        self.charts = chart_list
        self._made: dict[str, Any] = {}

    def __getitem__(self, chart: Chart) -> Any:
        fig = self._made.get(chart.key)
        if fig is None:
            import matplotlib
            from matplotlib.figure import Figure

            fig = Figure(figsize=(8.0, 3.4), dpi=100)
            with matplotlib.rc_context({"text.parse_math": False}):  # '$' is plain text
                chart.draw(fig)
            left = 0.3 if chart.key.startswith("layers") else 0.09
            fig.subplots_adjust(left=left, right=0.98, bottom=0.16, top=0.88, wspace=0.3)
            fig.suptitle(chart.title, fontsize=11, x=0.01, ha="left", parse_math=False)
            self._made[chart.key] = fig
        return fig


def _svg(fig: Any) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "mindwatch"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]  # drop the XML prolog and doctype: inline SVG
    # and the RDF metadata block (creator credits with URLs the report does not need)
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)


def _fmt(value: Any) -> str:
    return report_format.value(value)


def _duration(seconds: Any) -> str:
    return report_format.duration(seconds)


def summary_rows(run: RunSummary) -> list[tuple[str, str]]:
    """The run summary as (label, value) rows, for HTML, PDF and Markdown alike, in the
    report's language (the reason warm-up steps were left out stays as the JSON has it)."""
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
                    count=_fmt(throughput["excluded_steps"]), reason=throughput["excluded_reason"]
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
    figures = _Figures(charts(runs))
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
        path.write_text(_html(runs, logdir, figures, document, static=static), encoding="utf-8")
        written["html"] = path
    if "pdf" in formats:
        path = out / "report.pdf"
        _pdf(runs, logdir, figures, path)
        written["pdf"] = path
    return written


def _markdown(runs: Sequence[RunSummary], logdir: Path) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"## Training report: `{cell(str(logdir))}`", ""]
    table = comparison_table(runs)
    header = ["run", "status", "steps", *table.header[1:], "alerts"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r, (run, cells) in enumerate(zip(runs, table.rows)):
        marked = [
            f"**{text}**" if table.best.get(c) == r else text
            for c, text in enumerate(cells)
            if c > 0
        ]
        f = run.facts
        row = [run.name, _fmt(f.get("status")), _fmt(f.get("steps")), *marked]
        row.append(str(len(run.alerts)))
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    for note in table.notes:
        lines += ["", note]
    if table.best:
        lines.append("Best value per column in **bold**.")
    for run in runs:
        if run.facts.get("mixed_runs"):
            lines += ["", f"> **Warning** {cell(run.name)}: {cell(run.facts['mixed_runs'])}"]
    for run in runs:
        evals = (run.facts.get("eval") or {}).items()
        if evals:
            shown = ", ".join(
                f"{tag} {report_format.number(v['last'], report_format.LOSS_DIGITS)}"
                for tag, v in evals
            )
            lines += ["", f"- {cell(run.name)}: {cell(shown)}"]
    lines += ["", f"_mindwatch {__version__}_", ""]
    return "\n".join(lines)


def _html(
    runs: Sequence[RunSummary],
    logdir: Path,
    figures: _Figures,
    document: dict[str, Any],
    *,
    static: bool = False,
) -> str:
    """The HTML report: interactive (plotly.js inlined), or with ``static`` script-free
    (the matplotlib charts as inline SVG) for viewers that block scripts."""
    import jinja2
    from markupsafe import Markup

    from mindwatch.tools.report_html import PALETTE, interactive_plots, plotly_js
    from mindwatch.tools.report_tables import comparison_table

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mindwatch.tools", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    if static:
        rendered = [
            {"title": c.title, "caption": c.caption, "svg": Markup(_svg(figures[c]))}
            for c in figures.charts
        ]
        plots: list[dict[str, Any]] = []
        script = Markup("")
    else:
        rendered = []
        plots = [
            {"key": p.key, "caption": p.caption, "json": Markup(p.json())}
            for p in interactive_plots(runs)
        ]
        script = Markup(plotly_js())
    template = env.get_template("report.html.j2")
    return template.render(
        logdir=str(logdir),
        created=document["created"],
        version=__version__,
        runs=[
            {
                "name": run.name,
                "rows": summary_rows(run),
                "hparams": sorted((run.facts.get("hparams") or {}).items()),
                "throughput": _throughput_rows(run),
                "spread": sorted((run.facts.get("rank_spread") or {}).items()),
                "alerts": run.alerts,
            }
            for run in runs
        ],
        comparison=comparison_table(runs) if len(runs) > 1 else None,
        charts=rendered,
        plots=plots,
        plotly=script,
        palette=PALETTE,
        static=static,
    )


def _pdf(runs: Sequence[RunSummary], logdir: Path, figures: _Figures, path: Path) -> None:
    from mindwatch.tools.report_pdf import write_pdf

    write_pdf(
        runs, logdir, path, summary_rows
    )  # its own A4 layout: the figures are sized for the screen
