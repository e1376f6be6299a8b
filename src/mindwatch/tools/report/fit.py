"""Text set in a given width on the PDF's pages, measured in the font it is drawn in.

A table cell, a heading or a footer holds whatever a run brings: a run name of 80
letters with no space in it, a dataset path, a sentence in Chinese. Counting letters
does not tell how wide they print (a "W" is three "i"s, a CJK letter two Latin ones), so
the width of each candidate line is measured with matplotlib's own font machinery (the
font list and per-glyph fallback that the page's text is drawn with, at its size and
weight) and lines break:

* at spaces, never inside a word that fits a line of its own;
* between any two CJK letters (Chinese has no spaces), but never before a closing
  mark ("，", "）") or after an opening one;
* a word longer than the whole width at the last ``/ _ - . , : ; =`` that fits, else
  between letters (a path or run name without a separator still wraps);
* never at a no-break space (:data:`NBSP`, printed as a space).

Widths are in points. Measure inside :func:`mindwatch.tools.report.charts.style` (the
font list is read from its settings).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

__all__ = ["NBSP", "ellipsize", "fit_lines", "text_width"]

NBSP = "\u00a0"  # glues words a line must not break between ("min 92.1 samples/s")

# CJK radicals to Hangul, the CJK compatibility forms, full-width forms: one letter a unit
_CJK = "\u2e80-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
# Punctuation that never starts a line (a closing one) or ends one (an opening one)
# stays with its neighbour: "秒，" and "（第" break as one.
_CLOSE = "，。、；：！？）》」』】〉”’,.;:!?)\\]}%"
_OPEN = "（《「『【〈“‘(\\[{"
_TOKENS = re.compile(f"[{_OPEN}]*[{_CJK}][{_CLOSE}]*|[{_OPEN}]*[^\\s{_CJK}]+[{_CLOSE}]*|\\s+")
_BREAK_AFTER = set("/_-.,:;=\\")
# Glyph advances sum a little differently from the drawn line (kerning, rounding): the
# lines are set this much narrower than the room they have.
_SAFETY = 0.98


@lru_cache(maxsize=64)
def _font(size: float, bold: bool, family: tuple[str, ...]) -> Any:
    from matplotlib.font_manager import FontProperties

    return FontProperties(family=list(family), size=size, weight="bold" if bold else "normal")


def _family() -> tuple[str, ...]:
    import matplotlib

    family = matplotlib.rcParams["font.family"]
    return tuple(family) if isinstance(family, (list, tuple)) else (str(family),)


@lru_cache(maxsize=20000)
def _width(text: str, size: float, bold: bool, family: tuple[str, ...]) -> float:
    from matplotlib.textpath import text_to_path

    if not text:
        return 0.0
    width, _height, _descent = text_to_path.get_text_width_height_descent(
        text, _font(size, bold, family), ismath=False
    )
    return float(width)


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """How wide ``text`` prints, in points, at ``size`` points in the current font list."""
    return _width(text, size, bold, _family())


def _split_long(word: str, room: float, measure: Any) -> list[str]:
    """A word wider than ``room`` in pieces that fit: each cut after the last separator
    that keeps the piece in the room, else after the last letter that does."""
    pieces: list[str] = []
    rest = word
    while rest and measure(rest) > room:
        fits = 1
        while fits < len(rest) and measure(rest[: fits + 1]) <= room:
            fits += 1
        cut = max((i + 1 for i in range(fits) if rest[i] in _BREAK_AFTER), default=fits)
        if cut < fits // 2:  # a separator near the start: use the room, cut a letter
            cut = fits
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces


def fit_lines(text: str, width: float, size: float, *, bold: bool = False) -> list[str]:
    """``text`` in lines no wider than ``width`` points at ``size`` points; its own line
    breaks are kept. An empty text is one empty line."""
    family = _family()
    room = width * _SAFETY

    def measure(piece: str) -> float:
        return _width(piece, size, bold, family)

    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for token in _tokens(paragraph):
            if token.isspace():
                if line:
                    line += " "
                continue
            if measure(line + token) <= room:
                line += token
                continue
            if line.strip():
                lines.append(line.rstrip())
            line = ""
            if measure(token) <= room:
                line = token
                continue
            *whole, line = _split_long(token, room, measure)
            lines.extend(whole)
        lines.append(line.rstrip())
    return [line.replace(NBSP, " ") for line in lines]


def _tokens(paragraph: str) -> list[str]:
    """The units a line may break between: words and spaces, each CJK letter, and a
    group glued by no-break spaces whole."""
    tokens: list[str] = []
    for part in re.split(f"([^\\S{NBSP}]+)", paragraph):
        if NBSP in part:
            tokens.append(part)
        elif part:
            tokens.extend(_TOKENS.findall(part))
    return tokens


def ellipsize(text: str, width: float, size: float) -> str:
    """``text`` shortened in its middle with "…" until it prints within ``width``
    points (a footer has one line: the start and the end of a name tell it apart)."""
    room = width * _SAFETY
    if text_width(text, size) <= room:
        return text
    keep = len(text)
    while keep > 2:
        keep -= 1
        head, tail = text[: (keep + 1) // 2], text[len(text) - keep // 2 :]
        shown = head + "…" + tail
        if text_width(shown, size) <= room:
            return shown
    return "…"
