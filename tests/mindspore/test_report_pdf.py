"""The PDF report of real demo runs, read back with poppler: every page A4 portrait and
drawn on, a cover table and footers, and in Chinese the Chinese text itself (an embedded
CJK font: pdftotext finds the glyphs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real demo runs (60 steps, seeds 0 and 1) below one folder."""
    root = tmp_path_factory.mktemp("demo")
    for seed in ("0", "1"):
        result = subprocess.run(
            [MINDWATCH, "demo", "--logdir", str(root), "--steps", "60", "--seed", seed],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
    assert len(list(root.iterdir())) == 2
    return root


def report(logdir: Path, out: Path, *args: str) -> Path:
    result = subprocess.run(
        [MINDWATCH, "report", str(logdir), "--out", str(out), "--format", "pdf", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "findfont" not in result.stderr  # no font warnings on the way
    return out / "report.pdf"


def page_sizes(pdf: Path) -> list[tuple[float, float]]:
    info = subprocess.run(
        ["pdfinfo", "-f", "1", "-l", "999", str(pdf)], capture_output=True, text=True, check=True
    ).stdout
    sizes = re.findall(r"^Page\s+\d+ size:\s+([\d.]+) x ([\d.]+) pts", info, re.MULTILINE)
    return [(float(w), float(h)) for w, h in sizes]


def ink(png: Path) -> float:
    """The share of a page's pixels that are not white."""
    from matplotlib.image import imread

    pixels = imread(str(png))[..., :3]
    return float((pixels.mean(axis=2) < 0.95).mean())


def text(pdf: Path, page: int) -> str:
    return subprocess.run(
        ["pdftotext", "-layout", "-f", str(page), "-l", str(page), str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def check_pages(pdftoppm: str, pdf: Path, tmp_path: Path) -> int:
    sizes = page_sizes(pdf)
    assert len(sizes) >= 2  # a cover and at least one page of charts
    for width, height in sizes:  # A4 portrait: 595 x 842 pt
        assert abs(width - 595.3) < 1.5, sizes
        assert abs(height - 841.9) < 1.5, sizes
    subprocess.run(
        [pdftoppm, "-r", "30", "-png", str(pdf), str(tmp_path / "page")], check=True, timeout=120
    )
    images = sorted(tmp_path.glob("page-*.png"))
    assert len(images) == len(sizes)
    for image in images:  # a chart page is mostly curves and axes; a cover mostly table
        assert ink(image) > 0.02, image.name
    return len(sizes)


def test_one_run_in_english(pdftoppm: str, demo_runs: Path, tmp_path: Path) -> None:
    run = sorted(demo_runs.iterdir())[0]
    pdf = report(run, tmp_path / "out", "--lang", "en")
    pages = check_pages(pdftoppm, pdf, tmp_path)
    cover = text(pdf, 1)
    assert "Training report" in cover
    assert re.search(r"final loss \(smoothed\)\s+\d", cover)  # a table row: label, then its value
    assert re.search(r"train_cell\s+TrainOneStepWithGradNormCell", cover)  # hyperparameters
    for page in range(1, pages + 1):
        footer = text(pdf, page).strip().splitlines()[-1]
        assert run.name in footer
        assert re.search(r"\d{4}-\d{2}-\d{2}", footer)
        assert f"page {page} of {pages}" in footer
    charts = text(pdf, 2)
    assert "Loss (smoothed with TensorBoard's EMA, weight 0.6)" in charts
    assert "Learning rate" in charts
    # no CJK text: Type 3 fonts (no TrueType subsetting), the text extracted all the same
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True).stdout
    assert "Type 3" in fonts, fonts
    assert "TrueType" not in fonts, fonts


def test_two_runs_in_chinese(pdftoppm: str, demo_runs: Path, tmp_path: Path) -> None:
    pdf = report(demo_runs, tmp_path / "out", "--lang", "zh")
    pages = check_pages(pdftoppm, pdf, tmp_path)
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True).stdout
    assert re.search(r"NotoSansCJKscSubset\S*\s+CID TrueType\s+Identity-H\s+yes\s+yes\s+yes", fonts)
    cover = text(pdf, 1)
    for heading in ("训练报告", "运行对比", "最终损失", "超参数"):
        assert heading in cover
    for run in demo_runs.iterdir():  # the comparison table has a row per run
        assert run.name in cover
    assert "损失 (按 TensorBoard 的 EMA 平滑，权重 0.6)" in "".join(
        text(pdf, p) for p in range(2, pages + 1)
    )
    last = text(pdf, pages).strip().splitlines()[-1]
    assert f"第 {pages} 页，共 {pages} 页" in last
    assert demo_runs.name in last  # several runs: the folder names the report


def test_every_table_cell_holds_its_text(demo_runs: Path, tmp_path: Path) -> None:
    """The demo's report (one run, then both) read back with pdfplumber: no text runs
    out of its cell or over its neighbour (tests/tools/report/pdf_cells.py)."""
    pytest.importorskip("pdfplumber")
    from tests.tools.report.pdf_cells import problems

    run = sorted(demo_runs.iterdir())[0]
    for logdir, lang in ((run, "en"), (demo_runs, "en"), (demo_runs, "zh")):
        cells, found = problems(report(logdir, tmp_path / f"{logdir.name}-{lang}", "--lang", lang))
        assert cells >= 40  # the summary and the hyperparameters: the check saw tables
        assert found == [], "\n".join(found[:20])
