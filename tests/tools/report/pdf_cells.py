"""Read a report PDF back with pdfplumber and find table text outside its cell.

A table cell is a rectangle stroked in the tables' rule colour (#cccccc). Every glyph
that touches a cell must lie inside one cell (a value that runs out of its cell crosses
the rule), every word inside a single cell, and no two glyphs of a cell may overlap (a
value printed over its neighbour's label). Text outside the tables (headings, charts) is
not looked at, but a page whose table text is checked must have cells: ``cells()``
counts them so a test can tell a vacuous check.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

RULE = (0.8, 0.8, 0.8)  # #cccccc, the colour the PDF's tables are ruled in
SLACK = 0.6  # points: rounding of glyph boxes


@dataclass
class Box:
    x0: float
    top: float
    x1: float
    bottom: float

    @classmethod
    def of(cls, item: dict[str, Any]) -> Box:
        return cls(float(item["x0"]), float(item["top"]), float(item["x1"]), float(item["bottom"]))

    def inside(self, cell: Box) -> bool:
        return (
            self.x0 >= cell.x0 - SLACK
            and self.x1 <= cell.x1 + SLACK
            and self.top >= cell.top - SLACK
            and self.bottom <= cell.bottom + SLACK
        )

    def overlap(self, other: Box) -> float:
        """The area both boxes cover, in square points."""
        width = min(self.x1, other.x1) - max(self.x0, other.x0)
        height = min(self.bottom, other.bottom) - max(self.top, other.top)
        return max(width, 0.0) * max(height, 0.0)

    def area(self) -> float:
        return (self.x1 - self.x0) * (self.bottom - self.top)


def _is_rule(color: Any) -> bool:
    """#cccccc as pdfplumber reads it: a grey level (matplotlib writes greys so) or RGB."""
    if isinstance(color, (int, float)):
        color = (color,) * 3
    elif isinstance(color, (tuple, list)) and len(color) == 1:
        color = tuple(color) * 3
    return (
        isinstance(color, (tuple, list))
        and len(color) == 3
        and all(abs(float(a) - b) < 0.02 for a, b in zip(color, RULE))
    )


def _cells(page: Any) -> list[Box]:
    return [Box.of(r) for r in page.rects if r.get("stroke") and _is_rule(r["stroking_color"])]


def problems(pdf: Path) -> tuple[int, list[str]]:
    """(cells found, one line per glyph or word that breaks out of its cell)."""
    import pdfplumber

    found: list[str] = []
    total = 0
    with pdfplumber.open(pdf) as document:
        for number, page in enumerate(document.pages, 1):
            cells = _cells(page)
            total += len(cells)
            for char in page.chars:  # no text past the paper's edge (a legend's name)
                if char["text"].strip() and (char["x0"] < 0 or char["x1"] > page.width):
                    found.append(f"page {number}: {char['text']!r} runs off the page")
                    break
            owner: dict[int, list[tuple[int, Box]]] = {}
            for order, char in enumerate(page.chars):
                if not char["text"].strip():
                    continue
                box = Box.of(char)
                touched = [
                    i for i, cell in enumerate(cells) if box.overlap(cell) > 0.05 * box.area()
                ]
                if not touched:
                    continue
                home = [i for i in touched if box.inside(cells[i])]
                if not home:
                    found.append(f"page {number}: {char['text']!r} at {box} crosses a cell border")
                    continue
                owner.setdefault(home[0], []).append((order, box))
            for word in page.extract_words(x_tolerance=1.5, y_tolerance=1.0):
                box = Box.of(word)
                if not any(box.overlap(cell) > 0.05 * box.area() for cell in cells):
                    continue
                if not any(box.inside(cell) for cell in cells):
                    found.append(f"page {number}: word {word['text']!r} at {box} leaves its cell")
            for i, boxes in owner.items():
                boxes.sort(key=lambda b: b[1].x0)
                for k, (order, box) in enumerate(boxes):
                    for other_order, other in boxes[k + 1 :]:
                        if other.x0 >= box.x1:
                            break
                        # a kerned pair ("Te") overlaps a little, and is drawn one after
                        # the other; text over text comes from another string
                        if abs(order - other_order) == 1:
                            continue
                        if box.overlap(other) > 0.25 * min(box.area(), other.area()):
                            found.append(f"page {number}: glyphs overprint in cell {cells[i]}")
                            break
    return total, found
