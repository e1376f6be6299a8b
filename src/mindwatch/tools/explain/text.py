"""A story in a terminal's columns (80 at most): sentences wrapped, tables aligned,
code kept copyable.

Widths are display cells (a Chinese character takes two), so the Chinese story fits
as the English one does. Sentences break at spaces, and between Chinese characters
(never before a closing punctuation mark); a word longer than a line, a parameter
name like ``model.layers.11.attention.wq.weight`` in a narrow column, breaks after
a ``.``, ``/`` or ``_`` so each piece is a readable part of the name. A table's last
column (the names) wraps that way under itself. A line of code is copied, not read:
it is kept whole when it fits, else broken after an opening bracket or a comma inside
brackets (a continuation that Python and YAML flow collections both accept), and only
a line with no such place (one long string) is left longer than the width.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from mindwatch.common.i18n import _
from mindwatch.tools.explain.story import Block, Story

__all__ = ["WIDTH", "cells", "listing", "render", "wrap"]

WIDTH = 80

_CJK = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
_TOKENS = re.compile(rf"(\s+)|([{_CJK}])|([^\s{_CJK}]+)")
_NO_BREAK_BEFORE = set("，。：；、！？）】」』》,.;:!?)]}%")
_NO_BREAK_AFTER = set("（【「『《([{")
_NAME_BREAKS = re.compile(r"[^./_:-]+[./_:-]*|[./_:-]+")


def cells(text: str) -> int:
    """The display width of ``text`` (East Asian wide and full-width characters: 2)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _words(text: str) -> list[tuple[str, str]]:
    """``text`` as (separator, word): a space where a break prints nothing, "" between
    Chinese characters; punctuation stays with the word it belongs to."""
    out: list[tuple[str, str]] = []
    sep = ""
    for space, cjk, word in _TOKENS.findall(text):
        if space:
            sep = " "
            continue
        piece = cjk or word
        glued = bool(out) and not sep
        if glued and (piece[0] in _NO_BREAK_BEFORE or out[-1][1][-1] in _NO_BREAK_AFTER):
            out[-1] = (out[-1][0], out[-1][1] + piece)
        else:
            out.append((sep, piece))
        sep = ""
    return out


def _pieces(word: str, room: int) -> list[str]:
    """``word`` cut into parts of at most ``room`` cells, after a ``.``, ``/``, ``_``
    or ``:`` where it can be, else anywhere."""
    parts = []
    for found in _NAME_BREAKS.findall(word):
        part = found
        while cells(part) > room:  # one part longer than a line: cut it
            cut = room
            while cells(part[:cut]) > room:
                cut -= 1
            parts.append(part[: max(cut, 1)])
            part = part[max(cut, 1) :]
        parts.append(part)
    return parts


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` cells, the first starting with ``first``,
    the others with ``rest`` (see the module docs)."""
    lines: list[str] = []
    line, empty = first, True
    for sep, word in _words(text):
        gap = sep if not empty else ""
        if cells(line) + cells(gap) + cells(word) <= width:
            line, empty = line + gap + word, False
            continue
        fresh = width - cells(rest)
        if cells(word) <= fresh and not empty:  # whole on the next line
            lines.append(line)
            line, empty = rest + word, False
            continue
        glue = sep
        for piece in _pieces(word, max(fresh, 1)):  # longer than a line: at its dots
            gap = glue if not empty else ""
            if cells(line) + cells(gap) + cells(piece) > width and not empty:
                lines.append(line)
                line, empty, gap = rest, True, ""
            line, empty, glue = line + gap + piece, False, ""
    if not empty or not lines:
        lines.append(line)
    return [item.rstrip() for item in lines]


def _pad(text: str, width: int, right: bool) -> str:
    space = " " * max(width - cells(text), 0)
    return space + text if right else text + space


def _table(block: Block, width: int) -> list[str]:
    columns = len(block.header)
    sizes = [
        max([cells(block.header[c])] + [cells(row[c]) for row in block.rows])
        for c in range(columns - 1)
    ]
    indent = "  "
    lead = indent + "".join(
        _pad(block.header[c], sizes[c], True) + "  " for c in range(columns - 1)
    )
    room = width - cells(lead)
    if room < 20:  # too narrow for the names beside the numbers: each below its row
        lines = [lead.rstrip(), indent + "    " + block.header[-1]]
        for row in block.rows:
            start = indent + "".join(
                _pad(row[c], sizes[c], True) + "  " for c in range(columns - 1)
            )
            lines.append(start.rstrip())
            lines += wrap(row[-1], width, indent + "    ", indent + "    ")
    else:
        lines = [lead + block.header[-1]]
        for row in block.rows:
            start = indent + "".join(
                _pad(row[c], sizes[c], True) + "  " for c in range(columns - 1)
            )
            lines += wrap(row[-1], width, start, " " * cells(start))
    if block.text:
        lines += wrap(block.text, width, indent, indent)
    return lines


def _code_breaks(line: str) -> list[tuple[int, bool]]:
    """Where ``line`` can break, outside quotes: (index, after a comma) after each ", "
    inside brackets and after an opening bracket."""
    found, depth, quote = [], 0, ""
    for i, char in enumerate(line):
        if quote:
            if char == quote and line[i - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
            if line[i + 1 : i + 2] not in ")]}":
                found.append((i + 1, False))
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth > 0 and line[i + 1 : i + 2] == " ":
            found.append((i + 1, True))
    return found


def _broken(code: str, width: int, indent: str) -> list[str]:
    """``code`` after ``indent``, broken where :func:`_code_breaks` allows to fit
    ``width`` (after a comma where one fits, else after a bracket); its last line may
    stay longer when there is no place left to break at."""
    lead = re.match(r"\s*", code)
    more = indent + (lead.group(0) if lead else "") + "    "
    breaks = _code_breaks(code)  # over the whole line: brackets opened earlier count
    lines, at, start = [], 0, indent

    def skip(at: int) -> int:  # a continuation starts at its first non-blank
        return at if at == 0 else len(code) - len(code[at:].lstrip())

    while cells(start + code[skip(at) :]) > width:
        begin = skip(at)
        fits = [
            (b, comma) for b, comma in breaks if b > begin and cells(start + code[begin:b]) <= width
        ]
        if not fits:
            break
        commas = [b for b, comma in fits if comma]  # between arguments reads best
        cut = commas[-1] if commas else fits[-1][0]
        lines.append(start + code[begin:cut].rstrip())
        at, start = cut, more
    return [*lines, start + code[skip(at) :]]


def _code(block: Block, width: int) -> list[str]:
    lines = [f"  {block.language}:"] if block.language else []
    for code in block.lines:
        shown = _broken(code, width, "    ")
        if any(cells(line) > width for line in shown):  # no comma to break at: unindented
            shown = _broken(code, width, "")
        lines += shown
    return lines


def _block(block: Block, width: int) -> list[str]:
    lines = [block.title] if block.title else []
    if block.kind == "text":
        for paragraph in block.paragraphs:
            lines += wrap(paragraph, width, "  ", "  ")
    elif block.kind == "table":
        lines += _table(block, width)
    else:
        lines += _code(block, width)
    return lines


def render(told: Story, width: int = WIDTH, *, of: int = 0) -> list[str]:
    """The story as lines of at most ``width`` cells (``of``: the run's alert count,
    for the first line's "alert N of M")."""
    head = (
        _("Alert {number} of {count}: ").format(number=told.number, count=of)
        if of
        else _("Alert {number}: ").format(number=told.number)
    )
    lines = wrap(head + told.what, width, "", "  ")
    for block in told.blocks:
        if block.title or block.kind != "code":
            lines.append("")
        lines += _block(block, width)
    return lines


def _cut(text: str, width: int) -> str:
    """``text`` in one line of at most ``width`` cells, cut with "..." when longer."""
    if cells(text) <= width:
        return text
    while cells(text) > width - 3:
        text = text[:-1]
    return text.rstrip() + "..."


def listing(incidents: Sequence[tuple[int, str, bool, bool]], width: int) -> list[str]:
    """The run's alerts in brief, one line each: (number, line, analysed, chosen)."""
    lines = []
    for number, line, analysed, chosen in incidents:
        mark = ">" if chosen else " "
        tail = "  " + _("[forensics]") if analysed else ""
        head = f"{mark}{number:>3}  "
        lines.append(head + _cut(line, width - cells(head) - cells(tail)) + tail)
    return lines
