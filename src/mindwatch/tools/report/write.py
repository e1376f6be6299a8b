"""``mindwatch report``: a training report from event files alone, in each format.

HTML (one self-contained file that fetches nothing, :mod:`.html`), PDF (A4,
:mod:`.pdf`, charts from :mod:`.charts`), JSON (the machine-readable summary, written
here) and Markdown (for a CI comment, :mod:`.markdown`). Several runs below one folder
are overlaid in every chart. Text is in the current language (``--lang``), from the same
catalogues as the alerts.

Text in the SVGs is drawn as paths, so a tag named ``<script>`` is shapes, not markup;
everything else goes through Jinja2 with autoescaping.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mindwatch._version import __version__
from mindwatch.tools.report.html import html_page
from mindwatch.tools.report.markdown import markdown
from mindwatch.tools.report.pdf import write_pdf
from mindwatch.tools.report.summary import RunSummary

__all__ = ["FORMATS", "write_report"]

FORMATS = ("html", "pdf", "json", "md")


def _document(runs: Sequence[RunSummary], logdir: Path) -> dict[str, Any]:
    return {
        "mindwatch": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "logdir": str(logdir),
        "runs": [run.as_dict() for run in runs],
    }


def write_report(
    runs: Sequence[RunSummary],
    logdir: Path,
    out: Path,
    formats: Sequence[str],
    *,
    static: bool = False,
) -> dict[str, Path]:
    """Write the report in ``formats`` into ``out``; returns format -> file. ``static``:
    an HTML without scripts (SVG charts) instead of the interactive one."""
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    document = _document(runs, logdir)
    if "json" in formats:
        path = out / "report.json"
        path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
        written["json"] = path
    if "md" in formats:
        path = out / "report.md"
        path.write_text(markdown(runs, logdir), encoding="utf-8")
        written["md"] = path
    if "html" in formats:
        path = out / "report.html"
        path.write_text(html_page(runs, logdir, document, static=static), encoding="utf-8")
        written["html"] = path
    if "pdf" in formats:
        path = out / "report.pdf"
        write_pdf(runs, logdir, path)
        written["pdf"] = path
    return written
