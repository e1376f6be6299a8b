"""``mindwatch explain``: the story of an alert's forensics, for a terminal and the report.

The flow: :func:`read_incidents` (:mod:`.incidents`) reads a run's ``alerts.jsonl`` and
the forensics file each analysed alert names; :func:`choose` picks the one to explain;
:func:`story` (:mod:`.story`) tells it as titled blocks in the current language;
:func:`render` (:mod:`.text`) sets them in 80 columns. The report's "Anomalies"
section draws the same blocks (:mod:`mindwatch.tools.report.anomalies`).
"""

from mindwatch.tools.explain.incidents import (
    ExplainError,
    Incident,
    choose,
    dumps,
    incidents,
    read_incidents,
)
from mindwatch.tools.explain.story import Block, Story, story, what
from mindwatch.tools.explain.text import WIDTH, cells, listing, render, wrap

__all__ = [
    "WIDTH",
    "Block",
    "ExplainError",
    "Incident",
    "Story",
    "cells",
    "choose",
    "dumps",
    "incidents",
    "listing",
    "read_incidents",
    "render",
    "story",
    "what",
    "wrap",
]
