"""An alert's forensics as a story: what happened, what moved first, what else moved,
the first non-finite gradient, the batch and how to skip it.

A :class:`Story` is a list of titled :class:`Block` s (a sentence, a table, lines of
code), in the current language, that every reader draws the same way: the terminal
(:mod:`.text`, 80 columns), the HTML and PDF reports' "Anomalies" section. The
numbers come from the alert's forensics (:mod:`.incidents`): the whole analysis when
its file was read, else the summary on the alert's line (the top movers only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from mindwatch.alerts.model import Alert
from mindwatch.alerts.movers import (
    first_mover_head,
    layers_missing,
    no_layers_note,
    only_nonfinite,
    score,
)
from mindwatch.common.i18n import _, ngettext
from mindwatch.forensics.skiplist import SKIP_FILE
from mindwatch.tools.explain.incidents import Incident

__all__ = ["MAX_MOVERS", "MAX_SAMPLES", "Block", "Story", "number", "story", "what"]

MAX_MOVERS = 10  # rows of the ranking shown; the file keeps them all
MAX_SAMPLES = 64  # sample ids shown; the skip file keeps them all


@dataclass(frozen=True)
class Block:
    """One part of a story. ``text``: sentences (``lines``, each a paragraph of its
    own); ``table``: ``header`` and ``rows`` (the last column holds names, the others
    are short) and a ``text`` under them; ``code``: ``lines`` to copy as they are,
    ``language`` saying what they are."""

    kind: Literal["text", "table", "code"]
    title: str = ""
    text: str = ""
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    lines: tuple[str, ...] = ()
    language: str = ""

    @property
    def paragraphs(self) -> tuple[str, ...]:
        """A text block's sentences, each a paragraph."""
        return self.lines or ((self.text,) if self.text else ())


@dataclass
class Story:
    """What a reader is told about one alert: ``what`` (its line), the ``blocks``, and
    the heat of the layers around it (``heat`` of the analysis: steps, layers, z) when
    its forensics file was read."""

    number: int
    what: str
    blocks: list[Block] = field(default_factory=list)
    heat: Optional[dict[str, Any]] = None
    analysed: bool = False
    threshold: float = 6.0  # the z a series departed at (the analysis's ``z``)


def what(alert: dict[str, Any]) -> str:
    """The alert's line, as the console and the logs show it."""

    def index(key: str) -> Optional[int]:
        value = alert.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def label(key: str) -> Optional[str]:
        value = alert.get(key)
        return str(value) if value is not None else None

    shown = Alert(
        rule=str(alert.get("rule")),
        severity=alert.get("severity", "info"),
        metric=str(alert.get("metric")),
        value=None,
        step=int(alert.get("step", 0)),
        message=str(alert.get("message", "")),
        rank=index("rank"),
        node=label("node"),
        device=label("device"),
        device_id=index("device_id"),
        batch=index("batch"),
    )
    return shown.line()


number = score  # the alerts' own short numbers


def _ratio(mover: dict[str, Any]) -> str:
    """How many times its usual size the series is at the alert (``50x``), or ``-``."""
    value, base = mover.get("value"), mover.get("baseline")
    if not isinstance(value, (int, float)) or not isinstance(base, (int, float)):
        return "-"
    if base <= 0 or value <= 0 or not math.isfinite(value / base):
        return "-"
    return f"{number(value / base)}x"


def _first_mover(first: dict[str, Any], loss_onset: Optional[int]) -> str:
    head = first_mover_head(first, loss_onset)
    z, ratio = first.get("z"), _ratio(first)
    if number(z) == "inf":
        detail = _("from step {onset}, where it was not finite").format(onset=first.get("onset"))
    elif ratio == "-":
        detail = _("from step {onset}: z {z} there").format(onset=first.get("onset"), z=number(z))
    else:
        detail = _("from step {onset}: z {z} there, {ratio} its usual size at the alert").format(
            onset=first.get("onset"), z=number(z), ratio=ratio
        )
    if loss_onset is not None:
        detail += _("; the loss departed at step {step}").format(step=loss_onset)
    return _("{head} ({detail}).").format(head=head, detail=detail)


def _ranking(movers: list[dict[str, Any]], ranks: bool, total: int, file: Any) -> Block:
    header = [_("#"), _("onset"), "z", _("now/usual")]
    if ranks:
        header.append(_("rank"))
    header.append(_("series"))
    rows = []
    for i, mover in enumerate(movers[:MAX_MOVERS], start=1):
        row = [str(i), str(mover.get("onset")), number(mover.get("z")), _ratio(mover)]
        if ranks:
            rank = mover.get("rank")
            row.append("-" if rank is None else str(rank))
        name = str(mover.get("name"))
        if mover.get("kind") == "scalar":
            name = _("{name} (scalar)").format(name=name)
        row.append(name)
        rows.append(tuple(row))
    more = total - len(rows)
    text = ""
    if more > 0:
        text = ngettext(
            "and {count} more series in {file}", "and {count} more series in {file}", more
        ).format(count=more, file=file or "alerts.jsonl")
    return Block(
        "table",
        _("What moved, first movers first"),
        text=text,
        header=tuple(header),
        rows=tuple(rows),
    )


def _nonfinite(found: dict[str, Any]) -> Block:
    text = _(
        "{parameter} is the first parameter whose gradient was not finite, in backward "
        "order, at step {step} ({count} of {total} parameters not finite)."
    ).format(
        parameter=found.get("parameter"),
        step=found.get("step"),
        count=found.get("parameters"),
        total=found.get("of"),
    )
    lines = [text]
    order = [str(p) for p in found.get("backward_order") or []][1:]
    if order:
        lines.append(_("Then, in backward order: {names}.").format(names=", ".join(order)))
    return Block("text", _("Non-finite gradient"), lines=tuple(lines))


def _ids(ids: list[Any]) -> str:
    shown = ", ".join(str(i) for i in ids[:MAX_SAMPLES])
    if len(ids) > MAX_SAMPLES:
        shown += ", " + _("... ({count} in all)").format(count=len(ids))
    return shown


def _batch(batch: dict[str, Any], alert: dict[str, Any]) -> Block:
    def index(value: Any) -> Optional[int]:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    step = index(batch.get("step"))
    where = Alert(
        rule="",
        severity="info",
        metric="",
        value=None,
        step=step if step is not None else int(alert.get("step", 0)),
        message="",
        rank=index(batch.get("rank")),
        batch=index(batch.get("batch")),
    ).where()
    text = where + _("; ")
    ids = batch.get("sample_ids") or alert.get("sample_ids")
    if isinstance(ids, list) and ids:
        text += ngettext(
            "{count} sample id: {ids}.", "{count} sample ids: {ids}.", len(ids)
        ).format(count=len(ids), ids=_ids(ids))
    else:
        text += _("its sample ids were not recorded (alerts.sample_ids, docs/alerts.md).")
    lines = [text]
    bad = batch.get("nonfinite_samples")
    if isinstance(bad, list) and bad:
        lines.append(_("Samples whose inputs were not finite: {ids}.").format(ids=_ids(bad)))
    return Block("text", _("Batch"), lines=tuple(lines))


def _moved(skip: dict[str, Any], run: Path) -> dict[str, Any]:
    """The skip lines for the run folder where it is now: a folder copied or moved since
    the alert keeps its ``skip.json``, and the path the alert wrote names the old place.
    Unchanged when the alert's file is still there or the run has none."""
    written = skip.get("file")
    here = run / SKIP_FILE
    if not isinstance(written, str) or not here.is_file():
        return skip
    if (Path(written) if Path(written).is_absolute() else run / written).exists():
        return skip
    now = str(here)

    def lines(key: str) -> Any:
        got = skip.get(key)
        if not isinstance(got, list):
            return got
        return [line.replace(written, now) if isinstance(line, str) else line for line in got]

    return {**skip, "file": now, "python": lines("python"), "yaml": lines("yaml")}


def _skip(skip: dict[str, Any]) -> list[Block]:
    blocks = [
        Block(
            "text",
            _("Skip it on resume"),
            text=_("{file} lists this batch; these lines make a resumed run skip it:").format(
                file=skip.get("file", "skip.json")
            ),
        )
    ]
    for key, language in (("python", "Python"), ("yaml", _("MindFormers YAML"))):
        lines = skip.get(key)
        if isinstance(lines, list) and lines:
            blocks.append(Block("code", lines=tuple(map(str, lines)), language=language))
    return blocks


def _rank_line(entry: dict[str, Any], recorded: bool = True) -> str:
    """One rank's own analysis in a sentence: its first layer to depart (its
    ``first_mover``, or the first layer of its movers: a gathered rank's slot has no
    first mover of its own) and when its loss departed. ``recorded``: whether
    per-parameter norms were recorded (every rank trains the same cell)."""
    first = entry.get("first_mover")
    if not isinstance(first, dict):
        listed = entry.get("movers")
        layers = (
            [m for m in listed if isinstance(m, dict) and m.get("kind") == "layer"]
            if (isinstance(listed, list))
            else []
        )
        first = layers[0] if layers else None
    loss = entry.get("loss_onset")
    loss = loss if isinstance(loss, int) and not isinstance(loss, bool) else None
    rank = entry.get("rank")
    if isinstance(first, dict) and loss is not None:
        return _(
            "Rank {rank}: {name} first, from step {onset} (z {z}); its loss departed at "
            "step {loss}."
        ).format(rank=rank, name=first.get("name"), onset=first.get("onset"),
                 z=number(first.get("z")), loss=loss)  # fmt: skip
    if isinstance(first, dict):
        return _("Rank {rank}: {name} first, from step {onset} (z {z}).").format(
            rank=rank, name=first.get("name"), onset=first.get("onset"), z=number(first.get("z"))
        )
    if not recorded and loss is not None:
        return _("Rank {rank}: no layer recorded; its loss departed at step {loss}.").format(
            rank=rank, loss=loss
        )
    if not recorded:
        return _("Rank {rank}: no layer recorded.").format(rank=rank)
    if loss is not None:
        return _("Rank {rank}: no layer departed; its loss departed at step {loss}.").format(
            rank=rank, loss=loss
        )
    return _("Rank {rank}: no layer departed.").format(rank=rank)


def _ranks(
    summary: dict[str, Any], analysis: Optional[dict[str, Any]], recorded: bool = True
) -> Optional[Block]:
    ranks = summary.get("ranks")
    per_rank = (analysis or {}).get("per_rank")
    if not ranks and not per_rank:
        return None
    lines = []
    if isinstance(ranks, list) and ranks:
        lines.append(_("Ranks analysed: {ranks}.").format(ranks=", ".join(map(str, ranks))))
    for entry in per_rank if isinstance(per_rank, list) else []:
        if isinstance(entry, dict):
            lines.append(_rank_line(entry, recorded))
    return Block("text", _("Ranks"), lines=tuple(lines)) if lines else None


def _heat_ok(heat: Any) -> bool:
    """Whether ``heat`` is what the analysis writes: layer names, integer steps, and a
    row of numbers (or nulls) per layer, one per step."""
    if not isinstance(heat, dict):
        return False
    layers, steps, rows = heat.get("layers"), heat.get("steps"), heat.get("z")
    if not (isinstance(layers, list) and isinstance(steps, list) and isinstance(rows, list)):
        return False
    if not layers or not steps or len(rows) != len(layers):
        return False
    if not all(isinstance(n, str) for n in layers):
        return False
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        return False
    return all(
        isinstance(row, list)
        and len(row) == len(steps)
        and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in row)
        for row in rows
    )


def story(incident: Incident) -> Story:
    """The story of one alert (see the module docs); its forensics file is read here."""
    incident.read()
    alert = incident.alert
    told = Story(incident.number, what(alert), analysed=incident.analysed)
    summary = incident.summary
    if summary is None:
        told.blocks.append(
            Block(
                "text",
                text=_(
                    "This alert has no forensics: its rule does not analyse the steps before "
                    "it, or the run was recorded without the flight recorder."
                ),
            )
        )
        return told
    analysis = incident.analysis or {}
    loss_onset = analysis.get("loss_onset", summary.get("loss_onset"))
    loss_onset = loss_onset if isinstance(loss_onset, int) else None
    first = analysis.get("first_mover", summary.get("first_mover"))
    listed = analysis.get("movers", summary.get("movers"))
    movers = [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
    found = analysis.get("nonfinite", summary.get("nonfinite"))
    nonfinite: Optional[dict[str, Any]] = found if isinstance(found, dict) else None
    if not isinstance(first, dict) or not isinstance(first.get("name"), str):
        first = None
    missing = layers_missing(analysis) or layers_missing(summary)
    if missing is not None and first is None:
        # No layer was recorded: "no layer departed" would not be true.
        if movers:
            lead = movers[0]
            said = _(
                "No layer was recorded; {name} moved first, from step {onset} (z {z})."
            ).format(name=lead.get("name"), onset=lead.get("onset"), z=number(lead.get("z")))
        else:
            said = _(
                "No layer was recorded, and nothing else departed from its own recent "
                "history before the alert (z of {z} or more in the last {lookback} steps)."
            ).format(z=number(analysis.get("z")), lookback=analysis.get("lookback", "-"))
        told.blocks.append(Block("text", _("First mover"), lines=(said, no_layers_note(missing))))
    elif first is not None and nonfinite is not None and only_nonfinite(first, nonfinite):
        text = _(
            "No layer departed before the gradients turned non-finite at step {step}; the "
            "first of them in backward order is {parameter}."
        ).format(step=nonfinite["step"], parameter=nonfinite.get("parameter"))
        told.blocks.append(Block("text", _("First mover"), text=text))
    elif first is not None:
        told.blocks.append(Block("text", _("First mover"), text=_first_mover(first, loss_onset)))
    elif movers:
        lead = movers[0]
        told.blocks.append(
            Block(
                "text",
                _("First mover"),
                text=_("No layer departed; {name} moved first, from step {onset} (z {z}).").format(
                    name=lead.get("name"), onset=lead.get("onset"), z=number(lead.get("z"))
                ),
            )
        )
    else:
        told.blocks.append(
            Block(
                "text",
                _("First mover"),
                text=_(
                    "Nothing departed from its own recent history before the alert "
                    "(z of {z} or more in the last {lookback} steps)."
                ).format(z=number(analysis.get("z")), lookback=analysis.get("lookback", "-")),
            )
        )
    if movers:
        ranks = any(m.get("rank") is not None for m in movers) and bool(
            summary.get("ranks") or analysis.get("per_rank")
        )
        told.blocks.append(_ranking(movers, ranks, len(movers), summary.get("file")))
    if nonfinite is not None:
        told.blocks.append(_nonfinite(nonfinite))
    batch = analysis.get("batch", summary.get("batch"))
    if isinstance(batch, dict) or alert.get("sample_ids"):
        told.blocks.append(_batch(batch if isinstance(batch, dict) else {}, alert))
    skip = summary.get("skip")
    if isinstance(skip, dict):
        told.blocks += _skip(_moved(skip, incident.run))
    ranks_block = _ranks(summary, incident.analysis, recorded=missing is None)
    if ranks_block is not None:
        told.blocks.append(ranks_block)
    if incident.notes:
        told.blocks.append(Block("text", _("Notes"), lines=tuple(incident.notes)))
    heat = analysis.get("heat")
    if _heat_ok(heat):
        told.heat = heat
    threshold = analysis.get("z")
    if isinstance(threshold, (int, float)) and math.isfinite(threshold) and threshold > 0:
        told.threshold = float(threshold)
    return told
