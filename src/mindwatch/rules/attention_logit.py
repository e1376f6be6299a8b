"""``attention_logit`` and ``attention_logit_growth``: the largest attention score of a
model above a threshold, or growing fast: leading indicators of attention-entropy
collapse and of the loss spikes that follow (issue 23).

The largest attention logit grows linearly or faster before such an instability; Kimi
K2 clips the query/key weights once it passes 100 (QK-clip), and MindFormers ships the
same default with its ``max_attention_logit`` monitoring. Both rules read every tag
that contains ``max_attention_logit`` (MindFormers writes
``max_attention_logit/<param>`` per layer, with ``.../mean`` and ``.../max``; a custom
loop may log ``train/max_attention_logit``), so a model that logs none costs one
substring test per value and step.

* ``attention_logit``: a value at or above ``warning`` (100) for ``steps`` points in a
  row, critical at ``critical`` (1000); one finding per level per episode.
* ``attention_logit_growth``: the median of the last ``recent`` points at least
  ``growth`` times the median of ``recent`` points ``window`` points earlier, while the
  value is at or above ``floor`` (a small logit doubling is harmless: a softmax whose
  largest score is below ~20 is far from one-hot), for ``steps`` points in a row.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field, model_validator

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt
from mindwatch.rules.tags import MatchingTags

__all__ = [
    "AttentionLogitGrowthRule",
    "AttentionLogitGrowthSettings",
    "AttentionLogitRule",
    "AttentionLogitSettings",
]

MARKER = "max_attention_logit"


def _matching(marker: str) -> MatchingTags:
    return MatchingTags(lambda tag: marker in tag)


def _logits(values: Mapping[str, float], matching: MatchingTags) -> list[tuple[str, float]]:
    """The finite values of the step under the tags ``matching`` finds in it."""
    return [(t, v) for t in matching(values) if (v := values[t]) - v == 0.0]


class AttentionLogitSettings(RuleSettings):
    """``attention_logit``: the largest attention logit at or above QK-clip's 100.

    Reads every tag containing ``max_attention_logit``."""

    marker: str = Field(default=MARKER, description="Tags holding this are judged.")
    warning: float = Field(
        default=100.0,
        gt=0,
        le=1e6,
        description="Warning at or above this (Kimi K2's and MindFormers' QK-clip "
        "threshold; at most 1e6: softmax saturates long before).",
    )
    critical: float = Field(
        default=1000.0, gt=0, le=1e6, description="Critical at or above this (at most 1e6)."
    )
    steps: int = Field(
        default=1,
        ge=1,
        le=MAX_WINDOW,
        description="Points in a row at the level (at most 10000).",
    )

    @model_validator(mode="after")
    def _ordered(self) -> AttentionLogitSettings:
        if self.critical <= self.warning:
            key = "alerts.attention_logit"  # both keys named in full: either may be the typo
            raise ValueError(
                f"{key}.critical ({self.critical:g}) must be above {key}.warning "
                f"({self.warning:g}): raise critical or lower warning"
            )
        return self


class AttentionLogitRule(Rule[AttentionLogitSettings]):
    """A ``max_attention_logit`` value at or above ``warning`` / ``critical`` for
    ``steps`` points in a row; one finding per level per episode (an episode ends at a
    point where every such value is below ``warning``), naming the largest tag."""

    name = "attention_logit"
    settings_model = AttentionLogitSettings
    causes = (
        N_("query/key weights growing without bound: enable QK-clip or QK-norm"),
        N_("learning rate too high for the attention projections"),
        N_("softmax in float16 or bfloat16 without scaling (check the attention's dtype)"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "above": N_("{tag} is {value}, at or above {limit} for {steps} steps"),
    }
    state = ("runs", "raised")

    def __init__(self, settings: AttentionLogitSettings) -> None:
        super().__init__(settings)
        self.runs = {"warning": 0, "critical": 0}  # points in a row at each level
        self.raised = -1  # the highest level raised this episode (0 warning, 1 critical)
        self.tags = _matching(settings.marker)

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        seen = _logits(values, self.tags)
        if not seen:
            return []
        s = self.settings
        tag, value = max(seen, key=lambda item: item[1])
        limits = (s.warning, s.critical)
        for i, severity in enumerate(("warning", "critical")):
            self.runs[severity] = self.runs[severity] + 1 if value >= limits[i] else 0
        if value < s.warning:
            self.raised = -1
            return []
        for i, severity in ((1, "critical"), (0, "warning")):
            if i > self.raised and self.runs[severity] >= s.steps:
                self.raised = i
                message = self.message(
                    "above", tag=tag, value=fmt(value), limit=fmt(limits[i]), steps=s.steps
                )
                extra = {"steps": self.runs[severity]}
                return [Finding(self.name, severity, tag, value, message, limits[i], extra=extra)]
        return []


class AttentionLogitGrowthSettings(RuleSettings):
    """``attention_logit_growth``: the largest attention logit growing fast, above a floor.

    ``growth`` times within ``window`` points, once at least ``floor``."""

    marker: str = Field(default=MARKER, description="Tags holding this are judged.")
    growth: float = Field(
        default=2.0, gt=1, description="Smallest growth over the window that alerts."
    )
    window: int = Field(
        default=50,
        ge=2,
        le=MAX_WINDOW,
        description="Points between the two medians compared (at most 10000).",
    )
    recent: int = Field(
        default=5,
        ge=1,
        le=MAX_WINDOW,
        description="Points in each median (at most 10000).",
    )
    floor: float = Field(
        default=20.0,
        ge=0,
        description="The latest median must be at least this: a small logit that doubles "
        "is harmless.",
    )
    steps: int = Field(
        default=5,
        ge=1,
        le=MAX_WINDOW,
        description="Points in a row growing that fast (at most 10000).",
    )


class AttentionLogitGrowthRule(Rule[AttentionLogitGrowthSettings]):
    """Per ``max_attention_logit`` tag: the median of its last ``recent`` points at
    least ``growth`` times the median of ``recent`` points ``window`` points before,
    and at least ``floor``, at ``steps`` points in a row. One finding per episode (it
    ends at a point where no tag grows that fast), naming the fastest-growing tag."""

    name = "attention_logit_growth"
    settings_model = AttentionLogitGrowthSettings
    causes = AttentionLogitRule.causes
    messages: ClassVar[Mapping[str, str]] = {
        "growing": N_(
            "{tag} grew {ratio:.1f}x in {window} steps, from {before} to {value} "
            "(for {steps} steps)"
        ),
    }
    state = ("series", "runs", "raised")

    def __init__(self, settings: AttentionLogitGrowthSettings) -> None:
        super().__init__(settings)
        self.series: dict[str, deque[float]] = {}
        self.runs: dict[str, int] = {}
        self.raised = False
        self.tags = _matching(settings.marker)

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        size = self.settings.window + self.settings.recent
        saved = state.get("series") or {}
        if isinstance(saved, Mapping):
            self.series = {t: deque((float(v) for v in vs), maxlen=size) for t, vs in saved.items()}
        runs = state.get("runs") or {}
        if isinstance(runs, Mapping):
            self.runs = {str(t): int(n) for t, n in runs.items()}
        self.raised = bool(state.get("raised", self.raised))

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        seen = _logits(values, self.tags)
        if not seen:
            return []
        s = self.settings
        growing: list[tuple[float, str, float, float]] = []  # ratio, tag, before, now
        for tag, value in seen:
            points = self.series.get(tag)
            if points is None:
                points = self.series[tag] = deque(maxlen=s.window + s.recent)
            points.append(value)
            ratio = before = now = 0.0
            if len(points) == points.maxlen:
                listed = list(points)
                now = sorted(listed[-s.recent :])[s.recent // 2]
                before = sorted(listed[: s.recent])[s.recent // 2]
                if now >= s.floor and before > 0:
                    ratio = now / before
            if ratio >= s.growth:
                self.runs[tag] = self.runs.get(tag, 0) + 1
                growing.append((ratio, tag, before, now))
            else:
                self.runs[tag] = 0
        if not growing:
            self.raised = False
            return []
        lasted = [g for g in growing if self.runs[g[1]] >= s.steps]
        if self.raised or not lasted:
            return []
        self.raised = True
        ratio, tag, before, now = max(lasted)
        message = self.message(
            "growing",
            tag=tag,
            ratio=ratio,
            window=s.window,
            before=fmt(before),
            value=fmt(now),
            steps=self.runs[tag],
        )
        extra = {"ratio": round(ratio, 3), "window": s.window, "steps": self.runs[tag]}
        return [Finding(self.name, "warning", tag, now, message, baseline=before, extra=extra)]
