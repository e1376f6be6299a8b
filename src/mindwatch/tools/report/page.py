"""A page of the PDF report (:mod:`.pdf`): an A4 matplotlib figure with a cursor that
headings, lines of text and ruled tables are placed below, top to bottom.

Text never runs out of its room: headings and lines wrap at the page's width, a table
cell's text at its column's width, measured in the font it prints in (:mod:`.fit`); a
table row is as high as its tallest cell, and a table longer than the page goes on on
the next (the caller's), below its header again. Table cells are rectangles ruled in
``RULE`` (the tests find them by it) with their text inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from mindwatch.tools.report.fit import fit_lines

__all__ = ["A4_INCHES", "HEIGHT_PT", "RULE", "WIDTH_PT", "Page"]

A4_INCHES = (8.27, 11.69)  # 595 x 842 pt
WIDTH_PT, HEIGHT_PT = A4_INCHES[0] * 72, A4_INCHES[1] * 72
RULE = "#cccccc"  # the tables' rules
_PAD_X, _PAD_Y = 3.0, 3.2  # points between a cell's border and its text
_LINE = 1.22  # line height / font size inside a cell
_BODY_SIZE, _HEADER_SIZE = 8.0, 7.0


class Page:
    """An A4 figure with a cursor that tables and charts are placed below."""

    LEFT, RIGHT, TOP, BOTTOM = 0.08, 0.94, 0.95, 0.06

    def __init__(self) -> None:
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=A4_INCHES)
        self.y = self.TOP

    def room(self) -> float:
        return self.y - self.BOTTOM

    def _lines(
        self, text: str, size: float, *, bold: bool = False, indent: float = 0.0
    ) -> list[str]:
        width = (self.RIGHT - self.LEFT - indent) * WIDTH_PT
        return fit_lines(text, width, size, bold=bold)

    def heading(self, text: str, size: float = 12) -> None:
        """Bold text, wrapped to the page's width (a run's name can be long)."""
        for part in self._lines(text, size, bold=True):
            self.fig.text(self.LEFT, self.y, part, fontsize=size, va="top", weight="bold")
            self.y -= size * 1.25 / HEIGHT_PT
        self.y -= 0.012 - size * 0.25 / HEIGHT_PT

    def line(self, text: str, size: float = 8.5, color: str = "#444444") -> None:
        """A line of text, wrapped to the page's width when it is longer (a folder path)."""
        for part in self._lines(text, size):
            self.fig.text(self.LEFT, self.y, part, fontsize=size, va="top", color=color)
            self.y -= size / HEIGHT_PT * 1.5

    def table(
        self,
        header: Optional[list[str]],
        rows: list[list[str]],
        widths: list[float],
        bold: Optional[set[tuple[int, int]]] = None,
        *,
        left: frozenset[int] = frozenset({0}),
        more: Optional[Callable[[], Page]] = None,
    ) -> Page:
        """Rows of text cells as a ruled table; ``bold``: (row, column) cells to mark;
        ``left``: the columns aligned left (the others, numbers, right). Each cell's text
        wraps to its column's width (measured in its font, :mod:`.fit`; a header label
        may hold its own line breaks) and a row is as high as its tallest cell. Rows that
        do not fit go on the page ``more`` returns, below the header again; the page the
        table ended on is returned."""
        laid = _Table(header, rows, widths, bold or set(), left)
        page = self
        drawn = 0
        while True:
            if header:
                page._row(laid, laid.header, laid.header_height, header=True)
            fresh = True  # no body row on this page yet: one goes on, however high
            while drawn < len(rows):
                if more is not None and not fresh and laid.heights[drawn] / HEIGHT_PT > page.room():
                    break
                page._row(laid, laid.rows[drawn], laid.heights[drawn], header=False)
                drawn, fresh = drawn + 1, False
            if drawn >= len(rows) or more is None:
                break
            page = more()
        page.y -= 0.025
        return page

    def _row(self, laid: _Table, cells: list[_Cell], height: float, *, header: bool) -> None:
        """One table row, ``height`` points high, its top at the cursor."""
        from matplotlib.patches import Rectangle

        top = self.y
        x = self.LEFT
        bottom = top - height / HEIGHT_PT
        for column, cell in enumerate(cells):
            width = laid.widths[column] / WIDTH_PT
            fill = "#eef2f7" if header else ("#e6f4ea" if cell.bold else "#ffffff")
            self.fig.add_artist(
                Rectangle(
                    (x, bottom),
                    width,
                    top - bottom,
                    transform=self.fig.transFigure,
                    facecolor=fill,
                    edgecolor=RULE,
                    linewidth=0.5,
                )
            )
            align_left = column in laid.left
            tx = x + (_PAD_X if align_left else laid.widths[column] - _PAD_X) / WIDTH_PT
            ty = top - _PAD_Y / HEIGHT_PT
            for part in cell.lines:
                self.fig.text(
                    tx,
                    ty,
                    part,
                    fontsize=cell.size,
                    va="top",
                    ha="left" if align_left else "right",
                    weight="bold" if cell.bold or header else "normal",
                )
                ty -= cell.size * _LINE / HEIGHT_PT
            x += width
        self.y = bottom

    def table_height(
        self, header: Optional[list[str]], rows: list[list[str]], widths: list[float]
    ) -> float:
        """The height of a table, as a fraction of the page, on one page."""
        laid = _Table(header, rows, widths, set())
        return (sum(laid.heights) + (laid.header_height if header else 0.0)) / HEIGHT_PT + 0.025


@dataclass
class _Cell:
    lines: list[str]
    size: float
    bold: bool


class _Table:
    """A table's cells broken into lines that fit their columns, and each row's height
    (points)."""

    def __init__(
        self,
        header: Optional[list[str]],
        rows: list[list[str]],
        widths: list[float],
        bold: set[tuple[int, int]],
        left: frozenset[int] = frozenset({0}),
    ) -> None:
        total = sum(widths)
        self.widths = [w / total * (Page.RIGHT - Page.LEFT) * WIDTH_PT for w in widths]
        self.left = left  # the columns aligned left
        room = [w - 2 * _PAD_X for w in self.widths]
        self.header = [
            _Cell(fit_lines(label, room[c], _HEADER_SIZE, bold=True), _HEADER_SIZE, True)
            for c, label in enumerate(header or [])
        ]
        self.rows = [
            [
                _Cell(
                    fit_lines(str(value), room[c], _BODY_SIZE, bold=(r, c) in bold),
                    _BODY_SIZE,
                    (r, c) in bold,
                )
                for c, value in enumerate(row)
            ]
            for r, row in enumerate(rows)
        ]
        self.header_height = self._height(self.header)
        self.heights = [self._height(row) for row in self.rows]

    @staticmethod
    def _height(cells: list[_Cell]) -> float:
        if not cells:
            return 0.0
        tallest = max(len(c.lines) * c.size * _LINE for c in cells)
        return tallest + 2 * _PAD_Y
