"""The CJK font the report sets Chinese in: the vendored Noto Sans CJK SC subset
(src/mindwatch/tools/report/vendor/README.md), what it holds, how a PDF embeds it, the
system fonts that fill in after it, and the one warning for a character no font has."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fontTools.ttLib import TTFont

import mindwatch
from mindwatch.cli import main
from mindwatch.tools.report import charts
from mindwatch.tools.report.charts import VENDORED_CJK

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "docs"))
import gen_cjk_font  # noqa: E402

RARE = "喆堃"  # in names (U+5586, U+5803), outside GB 2312: not in the subset


@pytest.fixture(scope="module")
def cmap() -> dict[int, str]:
    return dict(TTFont(VENDORED_CJK).getBestCmap())


@pytest.fixture
def only_vendored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The vendored font and no system CJK font, whatever this machine has."""
    monkeypatch.setattr(charts, "_SYSTEM_CJK", ())
    charts.cjk_fonts.cache_clear()
    yield
    charts.cjk_fonts.cache_clear()


def test_the_character_sets_are_the_standards_they_name() -> None:
    gb = gen_cjk_font.gb2312()
    assert len(gb) == 7445  # GB 2312's 6,763 hanzi and 682 other characters
    assert sum(0x4E00 <= ord(c) <= 0x9FFF for c in gb) == 6763
    assert {"训", "练", "报", "告", "镑", "。", "，", "ア", "α"} <= gb
    assert not set(RARE) & gb
    hangul = gen_cjk_font.ksx1001_hangul()
    assert len(hangul) == 2350
    assert {"한", "국", "어"} <= hangul
    assert len(gen_cjk_font.catalogue()) > 500  # the catalogue's Chinese


def test_the_font_holds_the_whole_subset(cmap: dict[int, str]) -> None:
    """GB 2312, KS X 1001's Hangul and the catalogue whole; the blocks where Noto Sans
    CJK has them (it has no glyph for some spaces and rare punctuation)."""
    wanted = gen_cjk_font.gb2312() | gen_cjk_font.ksx1001_hangul() | gen_cjk_font.catalogue()
    missing = sorted(c for c in wanted if ord(c) not in cmap)
    assert not missing, (
        f"{VENDORED_CJK.name} lacks {len(missing)} characters ({''.join(missing[:40])}): "
        "run python docs/gen_cjk_font.py (vendor/README.md)"
    )
    blocks = [c for low, high in gen_cjk_font.BLOCKS for c in range(low, high + 1)]
    assert sum(c in cmap for c in blocks) == 717  # of 815: what Noto Sans CJK SC 2.004 has
    assert not [c for c in RARE if ord(c) in cmap]  # a subset, not the whole font
    assert 10_000 < len(cmap) < 11_000


def test_every_character_of_the_chinese_catalogue_is_in_the_font(cmap: dict[int, str]) -> None:
    """A translation that brings a new character fails here until the font is made again."""
    po = ROOT / "src/mindwatch/locale/zh/LC_MESSAGES/mindwatch.po"
    text = po.read_text(encoding="utf-8")
    missing = sorted({c for c in text if ord(c) >= 0x2E80 and ord(c) not in cmap})
    assert not missing, (
        f"mindwatch.po uses {''.join(missing)}, which {VENDORED_CJK.name} lacks: "
        "run python docs/gen_cjk_font.py (vendor/README.md)"
    )


def test_it_is_noto_sans_cjk_with_truetype_outlines_and_its_ofl_licence() -> None:
    font = TTFont(VENDORED_CJK)
    names = font["name"]
    assert names.getDebugName(1) == "Noto Sans CJK SC Subset"
    assert names.getDebugName(6) == "NotoSansCJKscSubset-Regular"
    assert "Source" not in names.getDebugName(1)  # the Reserved Font Name
    assert "SIL Open Font License" in names.getDebugName(13)
    assert "glyf" in font  # a PDF embeds it as CID TrueType
    assert "CFF " not in font
    licence = (VENDORED_CJK.parent / "LICENSE-NotoSansCJK.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence
    assert "Reserved Font Name 'Source'" in licence
    assert VENDORED_CJK.stat().st_size < 3_000_000


def _runs(root: Path, note: str) -> Path:
    with mindwatch.Monitor(
        root / "exp", {"print_every": 0, "hparams": {"数据集": "维基百科", "备注": note}}
    ) as mon:
        for step in range(1, 60):
            mon.log_step(step, loss=2.0 / step, lr=0.1)
    return root


def _pdf(runs: Path, out: Path) -> Path:
    result = CliRunner().invoke(
        main, ["report", str(runs), "--out", str(out), "--format", "pdf", "--lang", "zh"]
    )
    assert result.exit_code == 0, result.output
    return out / "report.pdf"


def _fonts(pdf: Path) -> str:
    return subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout


def _missing_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "in none of its fonts" in r.getMessage()]


def test_a_chinese_pdf_embeds_the_glyphs_it_uses(
    pdftoppm: str, only_vendored: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not one of matplotlib's per-glyph warnings
        pdf = _pdf(_runs(tmp_path / "runs", "한국어 テスト，全角！"), tmp_path / "out")
    fonts = _fonts(pdf)
    assert re.search(
        r"^[A-Z]{6}\+NotoSansCJKscSubset-Regular\s+CID TrueType\s+Identity-H\s+yes yes yes",
        fonts,
        re.M,
    ), fonts
    assert "LastResort" not in fonts  # every character had a glyph
    assert pdf.stat().st_size < 400_000  # the glyphs used, not the 2.45 MB font
    text = subprocess.run(
        ["pdftotext", "-f", "1", "-l", "1", str(pdf), "-"], capture_output=True, text=True
    ).stdout
    for shown in ("训练报告", "维基百科", "한국어 テスト，全角！"):
        assert shown in text
    assert _missing_warnings(caplog) == []


def test_a_character_no_font_has_is_named_once(
    pdftoppm: str, only_vendored: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The run's note is drawn several times (measured, then drawn); matplotlib would
    warn for each character each time. One line instead, naming each character."""
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdf = _pdf(_runs(tmp_path / "runs", f"张{RARE}的实验"), tmp_path / "out")
    assert not [w for w in caught if "missing from" in str(w.message)]
    (line,) = _missing_warnings(caplog)
    assert line.startswith("mindwatch: 2 characters of the report are in none of its fonts")
    assert "喆 (U+5586), 堃 (U+5803)" in line
    assert "fonts-noto-cjk" in line
    for page in ("report.md", "report.zh.md"):  # the pages show this very line
        assert f"\n{line}\n" in (ROOT / "docs" / page).read_text(encoding="utf-8"), page
    assert "LastResort" in _fonts(pdf)  # drawn as a box
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True).stdout
    assert f"张{RARE}的实验" in text  # and still extractable


def _font_with(path: Path, family: str, chars: str) -> Path:
    """A real TrueType font whose glyphs for ``chars`` are squares (fontTools)."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    names = [".notdef", *(f"uni{ord(c):04X}" for c in chars)]
    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder(names)
    builder.setupCharacterMap({ord(c): f"uni{ord(c):04X}" for c in chars})
    glyphs = {}
    for name in names:
        pen = TTGlyphPen(None)
        pen.moveTo((100, 0))
        pen.lineTo((100, 800))
        pen.lineTo((900, 800))
        pen.lineTo((900, 0))
        pen.closePath()
        glyphs[name] = pen.glyph()
    builder.setupGlyf(glyphs)
    builder.setupHorizontalMetrics(dict.fromkeys(names, (1000, 100)))
    builder.setupHorizontalHeader(ascent=880, descent=-120)
    builder.setupNameTable(
        {
            "familyName": family,
            "styleName": "Regular",
            "psName": family.replace(" ", "") + "-Regular",
        }
    )
    builder.setupOS2(sTypoAscender=880, usWinAscent=880, usWinDescent=120)
    builder.setupPost()
    builder.save(path)
    return path


def test_a_system_cjk_font_fills_in_what_the_subset_lacks(
    pdftoppm: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A system font (here one made for the test, as fonts-noto-cjk's would be found)
    comes after the vendored one: it draws only what the subset has no glyph for."""
    system = _font_with(tmp_path / "system-cjk.ttf", "System CJK Test", RARE + "训")
    monkeypatch.setattr(charts, "_SYSTEM_CJK", (str(system),))
    charts.cjk_fonts.cache_clear()
    try:
        assert charts.cjk_fonts() == ("Noto Sans CJK SC Subset", "System CJK Test")
        caplog.set_level(logging.WARNING)
        pdf = _pdf(_runs(tmp_path / "runs", f"{RARE}的实验"), tmp_path / "out")
    finally:
        charts.cjk_fonts.cache_clear()
    assert "LastResort" not in _fonts(pdf)
    assert _missing_warnings(caplog) == []
    import pdfplumber

    with pdfplumber.open(pdf) as document:
        drawn = {(c["text"], c["fontname"].split("+")[-1]) for c in document.pages[0].chars}
    by = {text: {font for t, font in drawn if t == text} for text in ("训", *RARE)}
    assert by == {  # each character from the first font that has it
        "训": {"NotoSansCJKscSubset-Regular"},
        "喆": {"SystemCJKTest-Regular"},
        "堃": {"SystemCJKTest-Regular"},
    }
