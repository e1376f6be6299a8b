"""Make the report's vendored CJK font: a subset of Noto Sans CJK SC Regular (SIL OFL 1.1).

    apt-get download fonts-noto-cjk && dpkg-deb -x fonts-noto-cjk_*.deb noto
    python docs/gen_cjk_font.py noto/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc

writes ``src/mindwatch/tools/report/vendor/NotoSansCJKsc-Subset.ttf`` (the vendor
folder's README.md says why this font, its version and what the subset holds). The
source may also be the collection or ``NotoSansCJKsc-Regular.otf`` of the noto-cjk
project's own release (the same font files).

What is kept (:func:`charset`): every character of GB 2312 (6,763 hanzi, with its
punctuation, full-width forms, kana, Greek and Cyrillic), the 2,350 Hangul syllables of
KS X 1001, the CJK punctuation, kana, full-width and general punctuation blocks (the
characters of them that Noto Sans CJK has), and every character of the Chinese message
catalogue (the report's own text).
``tests/tools/report/test_cjk_font.py`` checks the committed font holds all of it, so a
translation with a character outside GB 2312 fails there until this is run again.

Two changes besides the subset, both allowed by the OFL for a Modified Version:

* the outlines are converted from CFF (cubic) to TrueType (quadratic, fontTools'
  cu2qu, within 1 unit of the 1000-unit em): matplotlib embeds a CFF font in a PDF
  under a TrueType font type, which poppler reports as "Mismatch between font type and
  embedded font file"; TrueType outlines embed as the ``CID TrueType`` subset PDF
  readers expect;
* the family is renamed "Noto Sans CJK SC Subset" (no Reserved Font Name is used; Noto
  Sans CJK reserves "Source"), so that a full Noto Sans CJK SC installed on the system
  stays a separate font and can fill in what the subset lacks.

No layout features are kept: matplotlib draws each character's default glyph.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "src/mindwatch/tools/report/vendor/NotoSansCJKsc-Subset.ttf"
CATALOGUE = ROOT / "src/mindwatch/locale/zh/LC_MESSAGES/mindwatch.po"
FAMILY = "Noto Sans CJK SC Subset"
POSTSCRIPT = "NotoSansCJKscSubset-Regular"
# Unicode blocks kept whole: CJK punctuation, kana, Hangul compatibility jamo, kana
# extension, full- and half-width forms, general punctuation, printable ASCII.
BLOCKS = ((0x0020, 0x007E), (0x2000, 0x206F), (0x3000, 0x30FF), (0x3130, 0x318F),
          (0x31F0, 0x31FF), (0xFF00, 0xFFEF))  # fmt: skip


def _decoded(codec: str, rows: range, cells: range) -> set[str]:
    """The characters of a two-byte national standard, from Python's own codec."""
    out = set()
    for row in rows:
        for cell in cells:
            with contextlib.suppress(UnicodeDecodeError):  # not a code of the standard
                out.update(bytes([row, cell]).decode(codec))
    return out


def gb2312() -> set[str]:
    """GB 2312: 6,763 hanzi, 682 other characters (punctuation, kana, Greek, ...)."""
    return _decoded("gb2312", range(0xA1, 0xF8), range(0xA1, 0xFF))


def ksx1001_hangul() -> set[str]:
    """The 2,350 precomposed Hangul syllables of KS X 1001 (everyday Korean)."""
    found = _decoded("euc_kr", range(0xB0, 0xC9), range(0xA1, 0xFF))
    return {c for c in found if 0xAC00 <= ord(c) <= 0xD7A3}


def catalogue() -> set[str]:
    """Every character above ASCII in the Chinese message catalogue."""
    return {c for c in CATALOGUE.read_text(encoding="utf-8") if ord(c) > 0x7E}


def charset() -> set[str]:
    """What the vendored subset holds (see the module's docs)."""
    blocks = {chr(c) for low, high in BLOCKS for c in range(low, high + 1)}
    return gb2312() | ksx1001_hangul() | blocks | catalogue()


def _sc_face(source: Path) -> Any:
    from fontTools.ttLib import TTCollection, TTFont

    if source.suffix.lower() in (".ttc", ".otc"):
        for number, face in enumerate(TTCollection(source).fonts):
            if face["name"].getDebugName(1) == "Noto Sans CJK SC":
                return TTFont(source, fontNumber=number, recalcTimestamp=False)
        raise SystemExit(f"{source}: no Noto Sans CJK SC face in this collection")
    return TTFont(source, recalcTimestamp=False)


def _to_truetype(font: Any) -> None:
    """CFF outlines -> TrueType ``glyf`` (cu2qu), with the tables TrueType needs."""
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import newTable

    order = font.getGlyphOrder()
    glyphs = font.getGlyphSet()
    glyf = newTable("glyf")
    glyf.glyphOrder, glyf.glyphs = order, {}
    for name in order:
        pen = TTGlyphPen(glyphs)
        # CFF contours run counter-clockwise, TrueType's clockwise
        glyphs[name].draw(Cu2QuPen(pen, max_err=1.0, reverse_direction=True))
        glyf[name] = pen.glyph()
    font["loca"], font["glyf"] = newTable("loca"), glyf
    for table in ("CFF ", "VORG"):
        if table in font:
            del font[table]
    font["head"].glyphDataFormat = 0
    maxp = newTable("maxp")  # version 1.0: recalculated on save, no instructions
    maxp.tableVersion = 0x00010000
    for field in ("maxZones", "maxTwilightPoints", "maxStorage", "maxFunctionDefs",
                  "maxInstructionDefs", "maxStackElements", "maxSizeOfInstructions",
                  "maxComponentElements", "maxPoints", "maxContours", "maxCompositePoints",
                  "maxCompositeContours", "maxComponentDepth"):  # fmt: skip
        setattr(maxp, field, 0)
    maxp.maxZones = 1
    font["maxp"] = maxp
    post = font["post"]
    post.formatType, post.extraNames, post.mapping = 3.0, [], {}  # no glyph names
    font.sfntVersion = "\x00\x01\x00\x00"


def _rename(font: Any) -> None:
    names = font["name"]
    version = names.getDebugName(5) or ""
    for record in list(names.names):
        if record.nameID in (1, 3, 4, 6, 16, 17):
            names.removeNames(nameID=record.nameID)
    names.setName(FAMILY, 1, 3, 1, 0x409)
    names.setName(f"{version.split(';')[0]};mindwatch subset;{POSTSCRIPT}", 3, 3, 1, 0x409)
    names.setName(FAMILY, 4, 3, 1, 0x409)
    names.setName(POSTSCRIPT, 6, 3, 1, 0x409)
    names.setName(f"{version}; subset for mindwatch's report", 5, 3, 1, 0x409)


def build(source: Path, target: Path = TARGET) -> Any:
    from fontTools import subset

    font = _sc_face(source)
    options = subset.Options()
    options.layout_features = []  # matplotlib does no shaping
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14]  # 13, 14: the licence
    options.hinting = False
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in charset()))
    subsetter.subset(font)
    _to_truetype(font)
    _rename(font)
    font.save(target)
    return font


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="NotoSansCJK-Regular.ttc or the SC .otf")
    args = parser.parse_args()
    font = build(args.source)
    held = len(font.getBestCmap())
    print(f"{TARGET}: {TARGET.stat().st_size:,} bytes, {held:,} characters", file=sys.stderr)


if __name__ == "__main__":
    main()
