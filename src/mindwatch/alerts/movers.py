"""An alert's forensics summary in words: which layer moved first, on which rank, how
many steps before the loss. One wording for the notifiers' message (:mod:`.notify`)
and ``mindwatch explain`` (:mod:`mindwatch.tools.explain`).

The summary is the ``forensics`` object of an ``alerts.jsonl`` line: ``first_mover``
is a mover (``name``, ``onset``, ``z``, ``rank``...) with ``lead_steps``, the steps from
its onset to the loss's (``loss_onset``), or to the alert's step when the loss never
departed. ``layer_norms`` (``recorded`` false, ``why``, ``cell``, ``note``) says that no
per-parameter norm was recorded: then no layer *can* have departed, and every reader
says so, with how to record them (:func:`no_layers_note`), instead of "no layer
departed".
"""

from __future__ import annotations

import math
from typing import Any, Optional

from mindwatch.common.i18n import N_, _, ngettext

__all__ = [
    "first_mover_head",
    "first_mover_line",
    "layers_missing",
    "no_layers_note",
    "only_nonfinite",
    "score",
]

# Why the flight recorder got no per-parameter norms, and how to give it them.
_NO_LAYERS_FIX = {
    "opt_out": N_(
        "the train cell was built with layer_norms=False; leave layer_norms at its "
        "default to record them"
    ),
    "cell": N_(
        "the train cell ({cell}) returns none; train with "
        "mindwatch.mindspore.build_model(net, loss_fn, optimizer) or "
        "TrainOneStepWithGradNormCell(loss_net, optimizer), which return them by default"
    ),
    "mindformers": N_(
        "MindFormers' train cell returns them only with runner_wrapper: "
        "{{local_norm: True}} in the training YAML"
    ),
    "loop": N_(
        "nothing handed them to the flight recorder; in a loop of your own, call "
        "monitor.flight_recorder.set_layers(names) once and "
        "monitor.flight_recorder.add_layers(step, squared_norms) every step"
    ),
}


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


def layers_missing(forensics: Any) -> Optional[dict[str, Any]]:
    """The ``layer_norms`` of a forensics summary or analysis when it says that no
    per-parameter norm was recorded, else None."""
    if not isinstance(forensics, dict):
        return None
    info = forensics.get("layer_norms")
    if isinstance(info, dict) and info.get("recorded") is False:
        return info
    return None


def no_layers_note(info: dict[str, Any]) -> str:
    """That no layer was recorded, and how to record them, for ``layer_norms``'s
    ``why`` (an unknown one: the loop's fix) and ``cell``."""
    fix = _NO_LAYERS_FIX.get(str(info.get("why")), _NO_LAYERS_FIX["loop"])
    cell = info.get("cell") or "?"
    return _(
        "Per-layer gradient norms were not recorded, so no layer can be named: {fix} "
        "(docs/forensics.md)."
    ).format(fix=_(fix).format(cell=cell))


def first_mover_line(forensics: Any) -> Optional[str]:
    """The notifiers' line about an alert's forensics summary, or None without a first
    mover, a non-finite gradient or missing per-layer norms to tell."""
    if not isinstance(forensics, dict):
        return None
    missing = layers_missing(forensics)
    if missing is not None:
        return no_layers_note(missing)
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
