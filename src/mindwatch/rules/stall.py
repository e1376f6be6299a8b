"""``stall``: no new step for a while. Checked against the clock by ``mindwatch watch``
(which writes its alert), declared here like every rule so the config, the alerts'
causes and the documentation know it."""

from __future__ import annotations

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.common.settings import DAY
from mindwatch.rules.base import Rule, RuleSettings

__all__ = ["StallRule", "StallSettings"]


class StallSettings(RuleSettings):
    """``stall``: no new step for ``seconds`` (checked by ``mindwatch watch``)."""

    seconds: float = Field(
        default=600.0,
        gt=0,
        le=7 * DAY,
        description="Seconds without a new step (at most 604800, a week: a run silent for "
        "longer has stopped, and mindwatch watch says so sooner with a smaller value).",
    )


class StallRule(Rule[StallSettings]):
    """No new step for ``seconds``: time-based, so the engine never runs it."""

    name = "stall"
    settings_model = StallSettings
    causes = (
        N_("the job hangs: a collective waiting for a dead rank, or a deadlock in the data loader"),
        N_("the job died without closing its files (check its log and exit status)"),
    )
    observes_steps = False
