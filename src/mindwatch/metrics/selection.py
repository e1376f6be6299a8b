"""Which parameters per-layer metrics cover: MindFormers' ``target`` / ``invert`` rule."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["select_names"]


def select_names(names: Sequence[str], target: Sequence[str], invert: bool = False) -> list[int]:
    """Indices of ``names`` that some ``target`` regex matches (``re.search``), or, with
    ``invert``, that none matches."""
    patterns = [re.compile(p) for p in target]
    return [i for i, name in enumerate(names) if any(p.search(name) for p in patterns) != invert]
