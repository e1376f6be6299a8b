"""The interactive HTML report's building blocks: plotly.js, inlined, nothing fetched.

Why plotly: hover values, zoom/pan, legend toggles and linked axes are built in, and
its JavaScript API (``Plotly.relayout``, the ``plotly_*`` events) is documented. The
report inlines plotly.js's *cartesian* partial bundle (1.5 MB; the full bundle, maps
and 3-D included, is 4.8 MB), vendored in ``vendor/`` with its licence and version
(``vendor/README.md``): the trace types the report draws (scatter, bar, box, heatmap)
and nothing it does not. Sizes and load times: docs/report.md ("Size budget").

The figure is built here as plain JSON (``data``, ``layout``), not through
``plotly.graph_objects``: nothing to validate at run time, and ``tests`` check the
spec against the graph objects instead. Every text that comes from a run (names,
tags, alert messages) is HTML-escaped, as plotly renders a small HTML subset in
labels, and the JSON escapes ``<`` so no string can close the ``<script>``.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

__all__ = [
    "FONTS",
    "PALETTE",
    "PLOTLY_JS_VERSION",
    "SIDE_LEGEND",
    "Plot",
    "color",
    "numbers",
    "plotly_js",
    "text",
]

# The page's fonts: the system's UI font, then the CJK fonts of Windows, macOS and Linux
# desktops for Chinese text (the HTML embeds no font; the PDF does).
FONTS = (
    'system-ui, -apple-system, "Segoe UI", "Microsoft YaHei", "PingFang SC", '
    '"Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", sans-serif'
)

# Tableau 10: ten colours told apart also by most colour-blind readers.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
SIDE_LEGEND = {"x": 1.02, "y": 1.0, "xanchor": "left", "yanchor": "top"}


@dataclass
class Plot:
    """One plotly figure: an element id, its caption, and the JSON the page draws."""

    key: str
    caption: str
    spec: dict[str, Any]

    def json(self) -> str:
        """The spec as JSON that is safe inside ``<script>``."""
        return json.dumps(self.spec, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


PLOTLY_JS_VERSION = "4.1.1"  # vendor/plotly-cartesian.min.js (vendor/README.md)
PLOTLY_JS = "plotly-cartesian.min.js"


def plotly_js() -> str:
    """plotly.js's cartesian bundle, minified, from the package's ``vendor/`` folder."""
    from importlib.resources import files

    text = (files("mindwatch.tools.report") / "vendor" / PLOTLY_JS).read_text(encoding="utf-8")
    return text.replace("</script", "<\\/script")


def text(value: Any) -> str:
    return html.escape(str(value), quote=False)


def numbers(values: np.ndarray[Any, Any]) -> list[Optional[float]]:
    """Floats for JSON; NaN and infinity become null (a gap in the line)."""
    return [v if math.isfinite(v) else None for v in values.astype(np.float64).tolist()]


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]
