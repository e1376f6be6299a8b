"""The report's "Anomalies" section: each analysed alert's story and its heatmap, in the
interactive and the static HTML and in the PDF, on a run written from a real flight
recorder and analysis (tests/tools/explain/planted.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mindwatch.cli import main
from tests.tools.explain.planted import LONG, NAN_FIRST, ONSET, write_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("anomalies") / "run")


def report(run: Path, out: Path, *args: str) -> Path:
    result = CliRunner().invoke(main, ["report", str(run), "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return out


def section(html: str, title: str = "Anomalies") -> str:
    start = html.index(f"<h2>{title}</h2>")
    return html[start : html.index("<footer", start)]


def test_the_interactive_html_tells_each_analysed_alert_with_a_heatmap(
    run: Path, tmp_path: Path
) -> None:
    out = report(run, tmp_path / "out", "--format", "html", "--lang", "en")
    part = section((out / "report.html").read_text(encoding="utf-8"))
    assert part.count('<section class="anomaly">') == 2  # the info alert has no forensics
    assert "Alert 2: [critical] grad_explosion at step 300, rank 1, batch 4" in part
    assert f"layer {LONG} on rank 1 moved 3 steps before the loss" in part
    assert f"{NAN_FIRST} is the first parameter whose gradient was not finite" in part
    assert "data_skip_steps: 420" in part  # the skip lines, in a <pre>
    specs = [json.loads(m) for m in re.findall(r"var figure = (\{.*?\});\n", part, flags=re.DOTALL)]
    assert len(specs) == 2
    import plotly.graph_objects as go

    for spec in specs:
        go.Figure(spec)  # plotly's own validation of every property
    heat = specs[0]["data"][0]
    assert heat["type"] == "heatmap"
    assert heat["y"][0] == LONG  # the first mover is the top row
    row = heat["z"][0]
    onset = heat["x"].index(ONSET)
    assert all(abs(v) < 6 for v in row[:onset] if v is not None)  # quiet before the onset
    assert all(v is not None and v >= 6 for v in row[onset:])  # departed from it on
    assert len(part) < 40_000  # two stories and two heatmaps: kilobytes, not megabytes


def test_the_static_html_draws_the_heatmap_as_table_cells(run: Path, tmp_path: Path) -> None:
    out = report(run, tmp_path / "out", "--format", "html", "--static", "--lang", "en")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    part = section(html)
    tables = re.findall(r'<table class="heat">(.*?)</table>', part, flags=re.DOTALL)
    assert len(tables) == 2
    rows = re.findall(r"<tr><th>(.*?)</th>(.*?)</tr>", tables[0], flags=re.DOTALL)
    assert rows[0][0] == LONG
    top = re.findall(r'class="(h\d+|hx)"', rows[0][1])
    # 32 judged steps, the last five from the onset (296..300) at the top of the scale
    assert len(top) == 32
    assert top[-5:] == ["h10"] * 5
    assert all(level in ("h3", "h4", "h5", "h6", "h7") for level in top[:-5]), top
    assert "step 269" in part
    assert "step 300" in part
    assert len(part) < 40_000


def test_the_pdf_gets_pages_of_anomalies(run: Path, tmp_path: Path) -> None:
    from mindwatch.tools.report import summarize
    from mindwatch.tools.report.charts import style
    from mindwatch.tools.report.pdf import _anomaly_pages
    from mindwatch.tools.tables import read_scalars

    out = report(run, tmp_path / "out", "--format", "pdf", "--lang", "en")
    data = (out / "report.pdf").read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page\b", data))
    runs = summarize(read_scalars(run), run)
    with style(truetype=False):
        drawn = _anomaly_pages(runs)
    assert 1 <= len(drawn) < pages  # after the cover and the charts
    texts = [t.get_text() for page in drawn for t in page.fig.texts]
    said = " ".join(" ".join(texts).split())
    assert f"layer {LONG} on rank 1 moved 3 steps before the loss" in said
    assert f"{NAN_FIRST} is the first parameter" in said
    heatmaps = [ax for page in drawn for ax in page.fig.axes if ax.images]
    assert len(heatmaps) == 2
    assert heatmaps[0].get_yticklabels()[0].get_text() == LONG


def test_the_anomaly_tables_keep_their_text_in_their_cells(run: Path, tmp_path: Path) -> None:
    """The stories' tables have many narrow columns and a long layer name: read back
    with pdfplumber, nothing leaves its cell or the page (tests/tools/report/pdf_cells.py)."""
    pytest.importorskip("pdfplumber")
    from tests.tools.report.pdf_cells import problems

    for lang in ("en", "zh"):
        out = report(run, tmp_path / lang, "--format", "pdf", "--lang", lang)
        cells, found = problems(out / "report.pdf")
        assert cells > 40
        assert found == [], "\n".join(found[:20])


def test_the_anomalies_in_chinese(run: Path, tmp_path: Path) -> None:
    out = report(run, tmp_path / "out", "--format", "html", "--lang", "zh")
    part = section((out / "report.html").read_text(encoding="utf-8"), "异常")
    assert f"rank 1 上的层 {LONG} 比损失早 3 步开始偏离" in part
    assert "各层梯度范数相对其自身近期历史的稳健 z 分数" in part


def test_a_report_without_forensics_has_no_anomalies_section(tmp_path: Path) -> None:
    import mindwatch

    with mindwatch.Monitor(tmp_path / "calm", {"print_every": 0}) as mon:
        for step in range(1, 30):
            mon.log_scalars(step, {"train/loss": 1.0 / step})
    out = report(
        tmp_path / "calm", tmp_path / "out", "--format", "html", "--static", "--lang", "en"
    )
    assert "Alerts" in (out / "report.html").read_text(encoding="utf-8")
    assert "Anomalies" not in (out / "report.html").read_text(encoding="utf-8")


def test_the_markdown_names_the_first_movers(run: Path, tmp_path: Path) -> None:
    out = report(run, tmp_path / "out", "--format", "md", "--lang", "en")
    text = (out / "report.md").read_text(encoding="utf-8")
    assert (
        f"- run, alert 2 at step 300 (grad_explosion): first mover: layer {LONG} on rank 1 "
        "moved 3 steps before the loss (z " in text
    )
    assert f"- run, alert 3 at step 420 (nonfinite): first non-finite gradient: {NAN_FIRST}" in text
