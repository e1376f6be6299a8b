"""``mindwatch report``: what a report says about each run, and the report in each format.

The flow: :func:`summarize` turns the scalars of the runs below a folder (a
:func:`~mindwatch.tools.tables.read_scalars` frame) and their side files into one
:class:`RunSummary` per run (:mod:`.summary`, with the warm-up steps of :mod:`.warmup`
left out of speed statistics); :func:`write_report` (:mod:`.write`) writes them as
HTML (:mod:`.html`: interactive charts from :mod:`.interactive` and :mod:`.timeline`,
whose rows :mod:`.subplots` stacks under the menus of :mod:`.menus`, all on the
building blocks of :mod:`.plot`; or static SVG charts), PDF (:mod:`.pdf`, charts from
:mod:`.charts`), JSON and Markdown (:mod:`.markdown`). Every format shows the same rows
(:mod:`.rows`) and tables (:mod:`.tables`), numbers printed by :mod:`.formatting`.
"""

from mindwatch.tools.report.summary import RunSummary, summarize
from mindwatch.tools.report.write import FORMATS, write_report

__all__ = ["FORMATS", "RunSummary", "summarize", "write_report"]
