"""An alert's forensics summary in words: which layer moved first, on which rank, how
many steps before the loss. One wording for the notifiers' message (:mod:`.notify`)
and ``mindwatch explain`` (:mod:`mindwatch.tools.explain`).

The summary is the ``forensics`` object of an ``alerts.jsonl`` line: ``first_mover``
is a mover (``name``, ``onset``, ``z``, ``rank``...) with ``lead_steps``, the steps from
its onset to the loss's (``loss_onset``), or to the alert's step when the loss never
departed.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from mindwatch.common.i18n import _, ngettext

__all__ = ["first_mover_head", "first_mover_line", "only_nonfinite", "score"]


def score(value: Any) -> str:
    """A z-score or a ratio, short: 12.3, 140, 0.042; ``inf`` for a non-finite one."""
    if value == "inf" or (isinstance(value, float) and math.isinf(value)):
        return "inf"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return "-"
    size = abs(value)
    if size >= 100:
        return f"{value:.0f}"
    if size >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}"


def _when(lead: int, loss: bool) -> str:
    """When the first mover departed, against the loss's onset (or the alert's step)."""
    if loss:
        if lead > 0:
            return ngettext(
                "{count} step before the loss", "{count} steps before the loss", lead
            ).format(count=lead)
        if lead < 0:
            return ngettext(
                "{count} step after the loss", "{count} steps after the loss", -lead
            ).format(count=-lead)
        return _("at the same step as the loss")
    if lead > 0:
        return ngettext(
            "{count} step before the alert", "{count} steps before the alert", lead
        ).format(count=lead)
    return _("at the alert's step")


def first_mover_head(first: dict[str, Any], loss_onset: Optional[int]) -> str:
    """``layer X on rank R moved N steps before the loss``."""
    lead = first.get("lead_steps")
    lead = int(lead) if isinstance(lead, (int, float)) and not isinstance(lead, bool) else 0
    when = _when(lead, loss_onset is not None)
    if first.get("rank") is not None:
        return _("layer {name} on rank {rank} moved {when}").format(
            name=first.get("name"), rank=first["rank"], when=when
        )
    return _("layer {name} moved {when}").format(name=first.get("name"), when=when)


def only_nonfinite(first: dict[str, Any], nonfinite: Any) -> bool:
    """Whether the first mover only stands first for being non-finite (at or after the
    first non-finite step): a tie of non-finite layers, ranked by name, says nothing of
    what moved first; the backward order (``nonfinite["parameter"]``) does."""
    if not isinstance(nonfinite, dict) or score(first.get("z")) != "inf":
        return False
    onset, step = first.get("onset"), nonfinite.get("step")
    return isinstance(onset, int) and isinstance(step, int) and onset >= step


def first_mover_line(forensics: Any) -> Optional[str]:
    """The notifiers' line about an alert's forensics summary, or None without a first
    mover or a non-finite gradient to name."""
    if not isinstance(forensics, dict):
        return None
    parts = []
    first = forensics.get("first_mover")
    nonfinite = forensics.get("nonfinite")
    named = isinstance(first, dict) and first.get("name") is not None
    if isinstance(first, dict) and named and not only_nonfinite(first, nonfinite):
        loss = forensics.get("loss_onset")
        head = first_mover_head(first, loss if isinstance(loss, int) else None)
        parts.append(_("first mover: {head} (z {z})").format(head=head, z=score(first.get("z"))))
    if isinstance(nonfinite, dict) and nonfinite.get("parameter") is not None:
        parts.append(
            _("first non-finite gradient: {parameter} (step {step})").format(
                parameter=nonfinite["parameter"], step=nonfinite.get("step")
            )
        )
    return _("; ").join(parts) if parts else None
