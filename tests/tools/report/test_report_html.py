"""The interactive HTML report in a real headless Chromium with the network blocked:
no console errors, nothing requested, hover shows values, zoom moves every chart."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mindwatch.cli import main
from tests.chromedriver import Browser, browser
from tests.tools.report.test_report import EVIL, make_runs


@pytest.fixture(scope="module")
def interactive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_runs(tmp_path_factory.mktemp("interactive") / "runs")
    out = root.parent / "out"
    result = CliRunner().invoke(main, ["report", str(root), "--out", str(out), "--format", "html"])
    assert result.exit_code == 0, result.output
    return out / "report.html"


def _specs(html: str) -> list[dict[str, Any]]:
    found = re.findall(r"var figure = (\{.*?\});\n", html)
    return [json.loads(text) for text in found]


def test_one_file_with_inline_scripts_and_escaped_names(interactive: Path) -> None:
    html = interactive.read_text()
    assert re.findall(r"<script[^>]*\bsrc=", html) == []
    assert re.findall(r"<(link|img|iframe)\b(?![^>]*href=\"data:,\")", html) == []
    assert EVIL not in html  # alert message and tag names: escaped, also inside the JSON
    assert "loss jumped &lt;script&gt;alert(1)&lt;/script&gt;" in html  # the alert table
    specs = _specs(html)
    assert len(specs) == 3  # the timeline, gradient norm spread, per-layer norms
    import plotly.graph_objects as go

    for spec in specs:  # every property is one plotly knows (it raises otherwise)
        go.Figure(spec)
    timeline = specs[0]
    names = {t.get("name") for t in timeline["data"]}
    assert {"baseline", "candidate"} <= names
    alerts = [t for t in timeline["data"] if t.get("name") == "alerts"]
    assert [a["x"] for a in alerts] == [[250]]
    assert "loss jumped &lt;script&gt;" in alerts[0]["text"][0]
    labels = [b["label"] for m in timeline["layout"]["updatemenus"] for b in m["buttons"]]
    assert labels == ["x: step", "x: samples", "x: time", "raw values", "eval and alerts"]


def _drawn_points(spec: dict[str, Any]) -> int:
    return sum(len(trace.get("x") or []) for trace in spec["data"])


def test_the_html_stays_within_its_size_budget(interactive: Path) -> None:
    """docs/report.md's budget: the vendored plotly.js, a page of at most 16 KB, and at
    most 100 bytes per drawn point (drawn points are capped per curve: a million-point
    run draws ~17,000)."""
    from mindwatch.tools.report.plot import plotly_js

    html = interactive.read_text(encoding="utf-8")
    bundle = plotly_js()
    assert html.count(bundle) == 1  # the vendored bundle, inlined once
    assert len(bundle.encode()) < 1_600_000  # the cartesian bundle, not the full 4.8 MB
    drawn = sum(_drawn_points(spec) for spec in _specs(html))
    assert drawn > 1000  # 2 runs x 400 steps: the curves are in the file
    page = len(html.encode()) - len(bundle.encode())
    assert page <= 16_000 + 100 * drawn, (page, drawn)


def test_the_comparison_table_marks_the_best_value(interactive: Path) -> None:
    html = interactive.read_text()
    table = html[html.index('<table class="compare">') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 3
    assert table.count(" best") == table.count("&#9733;") >= 3


def _point(page: Browser, plot: str, trace: int, index: int) -> list[float]:
    """Viewport pixels of a trace's point (scrolled into view first)."""
    position: list[float] = page.run(
        """
        const gd = document.getElementById(arguments[0]);
        gd.scrollIntoView();
        const t = gd.data[arguments[1]], layout = gd._fullLayout;
        const xa = layout[t.xaxis.replace('x', 'xaxis')];
        const ya = layout[t.yaxis.replace('y', 'yaxis')];
        const x = t.x[arguments[2]], y = t.y[arguments[2]];
        const box = gd.getBoundingClientRect();
        return [box.left + xa._offset + xa.l2p(x),
                box.top + ya._offset + ya.l2p(ya.type === 'log' ? Math.log10(y) : y)];
        """,
        plot,
        trace,
        index,
    )
    return position


def _hover(page: Browser, trace: int, index: int, showing: str = "") -> str:
    """Move the mouse onto a timeline trace's point; the hover label's text, once it
    shows (and contains ``showing``)."""
    x, y = _point(page, "plot-timeline", trace, index)
    page.pointer(("move", int(x), int(y)))
    label: str = page.wait_for(
        "const h = document.querySelector('#plot-timeline .hoverlayer .hovertext');"
        f"return h && h.textContent.includes({json.dumps(showing)}) && h.textContent;",
        timeout=20,
    )
    return label


@pytest.mark.slow
def test_offline_in_chromium_hover_and_zoom(
    chromium: str, interactive: Path, tmp_path: Path
) -> None:
    with browser(tmp_path / "profile", width=1200, height=900, offline=True) as page:
        page.get(interactive.as_uri())
        page.wait_for("return document.querySelectorAll('#plot-timeline .main-svg').length > 0")
        assert page.run("return performance.getEntriesByType('resource').length") == 0
        # hover: the mouse over the smoothed loss of the first run shows its value
        traces = page.run(
            "return document.getElementById('plot-timeline').data.map(t => t.hovertemplate || '')"
        )
        smoothed = next(i for i, t in enumerate(traces) if "smoothed" in t)
        label = _hover(page, smoothed, 150)  # far from the evals (every 100)
        assert re.search(r"loss \d+(\.\d+)? smoothed \(raw \d+(\.\d+)?\)", label), label
        # zoom: a drag across the loss chart narrows every chart's x range alike
        before = page.run(
            "return document.getElementById('plot-timeline')._fullLayout.xaxis.range.slice()"
        )
        x1, y1 = _point(page, "plot-timeline", smoothed, 40)
        x2, _ = _point(page, "plot-timeline", smoothed, 160)
        page.pointer(
            ("down", int(x1), int(y1)),
            ("move", int((x1 + x2) / 2), int(y1)),
            ("up", int(x2), int(y1)),
        )
        ranges = page.wait_for(
            "const l = document.getElementById('plot-timeline')._fullLayout;"
            "return l.xaxis.range[1] - l.xaxis.range[0] < 300 && [l.xaxis.range, l.xaxis3.range];",
            timeout=20,
        )
        assert before[0] < ranges[0][0] < ranges[0][1] < before[1]
        assert ranges[1] == ranges[0]  # the learning-rate chart follows
        # the x-axis menu: samples seen instead of steps
        page.run(
            "const b = [...document.querySelectorAll('#plot-timeline .updatemenu-button')]"
            ".find(e => e.textContent === 'x: samples');"
            "b.dispatchEvent(new MouseEvent('click', {bubbles: true}));"
        )
        shown = page.wait_for(
            "const gd = document.getElementById('plot-timeline');"
            "const last = Math.max(...gd.data[0].x);"
            "const titles = Object.keys(gd.layout).filter(k => /^xaxis\\d*$/.test(k))"
            ".map(k => gd.layout[k].title && gd.layout[k].title.text).filter(t => t);"
            "return last > 400 && [last, titles];",
            timeout=20,
        )
        assert shown[0] == pytest.approx(400 * 30, rel=0.1)  # ~1,000 samples/s x 30 ms
        assert shown[1] == ["samples seen"]
        errors = [e for e in page.console() if e.get("level") in ("SEVERE", "WARNING")]
        assert errors == []


@pytest.mark.slow
def test_every_chart_draws_with_the_vendored_bundle(
    chromium: str, interactive: Path, tmp_path: Path
) -> None:
    """The page runs the vendored partial bundle (not the full plotly.js), which knows
    every trace type the report draws; each chart draws its own kind of marks (the
    gradient norm's boxes, the layers' bars) and a legend click hides a run."""
    from mindwatch.tools.report.plot import PLOTLY_JS_VERSION

    with browser(tmp_path / "profile", width=1200, height=900, offline=True) as page:
        page.get(interactive.as_uri())
        page.wait_for("return document.querySelectorAll('#plot-layers .main-svg').length > 0")
        assert page.run("return Plotly.version") == PLOTLY_JS_VERSION
        traces = page.run("return Object.keys(Plotly.PlotSchema.get().traces)")
        assert {"scatter", "bar", "box", "heatmap"} <= set(traces)
        assert "scattergeo" not in traces  # no maps, no 3-D
        assert "scatter3d" not in traces
        boxes = page.run(
            "return document.querySelectorAll('#plot-grad_spread .boxlayer path').length"
        )
        assert boxes >= 2  # a box per run
        bars = page.run("return document.querySelectorAll('#plot-layers .bars path').length")
        assert bars >= 4  # two layers x two runs
        # the legend: a click on a run's entry hides its curves
        page.run("document.getElementById('plot-timeline').scrollIntoView()")
        hidden = page.run(
            "const gd = document.getElementById('plot-timeline');"
            "const item = [...gd.querySelectorAll('.legend .traces')]"
            ".find(e => e.textContent === 'candidate');"
            "const box = item.querySelector('.legendtoggle').getBoundingClientRect();"
            "return [box.left + box.width / 2, box.top + box.height / 2];"
        )
        page.pointer(
            ("down", int(hidden[0]), int(hidden[1])), ("up", int(hidden[0]), int(hidden[1]))
        )
        states = page.wait_for(
            "const gd = document.getElementById('plot-timeline');"
            "const of = gd.data.filter(t => t.legendgroup === 'run1' && t.customdata);"
            "return of.length && of.every(t => t.visible === 'legendonly') && of.length;",
            timeout=20,
        )
        assert states >= 3  # its smoothed loss, gradient norm, throughput...
        shown = page.run(
            "return document.getElementById('plot-timeline').data"
            ".filter(t => t.legendgroup === 'run0' && t.customdata).map(t => t.visible)"
        )
        assert shown
        assert all(v in (None, True) for v in shown)
        errors = [e for e in page.console() if e.get("level") in ("SEVERE", "WARNING")]
        assert errors == []


@pytest.mark.slow
def test_hovering_an_alert_shows_its_message(
    chromium: str, interactive: Path, tmp_path: Path
) -> None:
    """The marker sits at the top of the loss chart, on an axis of its own: the loss
    line's points cannot win the hover there, whatever the zoom."""
    with browser(tmp_path / "profile", width=1200, height=900, offline=True) as page:
        page.get(interactive.as_uri())
        page.wait_for("return document.querySelectorAll('#plot-timeline .main-svg').length > 0")
        names = page.run("return document.getElementById('plot-timeline').data.map(t => t.name)")
        alerts = names.index("alerts")
        label = _hover(page, alerts, 0)
        assert "warning · spike, step 250: loss jumped <script>" in label, label
        # zoomed in on the steps around it, the marker is still at the top and hoverable
        page.run("Plotly.relayout('plot-timeline', {'xaxis.range': [200, 300]})")
        page.pointer(("move", 5, 5))
        label = _hover(page, alerts, 0, showing="spike")
        assert "step 250" in label


def test_the_report_in_chinese(tmp_path: Path) -> None:
    root = make_runs(tmp_path / "runs")
    out = tmp_path / "out"
    args = ["report", str(root), "--out", str(out), "--format", "html,md", "--lang", "zh"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '<html lang="zh">' in html
    for text in ("训练报告", "运行对比", "告警", "2 个运行", "首个记录步"):
        assert text in html, text
    timeline = _specs(html)[0]
    labels = [b["label"] for m in timeline["layout"]["updatemenus"] for b in m["buttons"]]
    assert labels[0] == "横轴：步"
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.startswith("## 训练报告：")
    assert "| 运行 | 状态 | 步数 | 最终损失（平滑） |" in md
    assert "每列的最佳值以 **粗体** 标出。" in md
    # English again for the next report in this process
    result = CliRunner().invoke(main, [*args[:-1], "en"])
    assert "Training report" in (out / "report.html").read_text(encoding="utf-8")
