"""The ``alerts`` section: each anomaly rule's thresholds, notifiers, delivery, and the
actions alerts may take (stop, keep the last stable checkpoint, dynamic learning rate).

The rules' sections come from the rules themselves: each declares its name and settings
model (:mod:`mindwatch.rules.builtin` lists them), and :class:`AlertSettings` has one
``alerts.<name>`` field per rule. The rules' settings models are re-exported here under
the names the config has always exported."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal, Optional, TypeVar, cast

from pydantic import Field, SecretStr, create_model, field_validator, model_validator

from mindwatch.config.settings import Settings
from mindwatch.config.urls import webhook_url_problem
from mindwatch.rules import BUILTIN_RULES, RULE_NAMES, Rule, RuleSettings
from mindwatch.rules.divergence import DivergenceSettings
from mindwatch.rules.eval_rebound import EvalReboundSettings
from mindwatch.rules.gradients import GradExplosionSettings, GradVanishingSettings
from mindwatch.rules.hardware import HbmFullSettings, NpuHealthSettings, NpuTemperatureSettings
from mindwatch.rules.memory_growth import MemoryGrowthSettings
from mindwatch.rules.nonfinite import NonFiniteSettings
from mindwatch.rules.plateau import PlateauSettings
from mindwatch.rules.spike import SpikeSettings
from mindwatch.rules.stall import StallSettings
from mindwatch.rules.straggler import StragglerSettings
from mindwatch.rules.throughput import ThroughputDropSettings

__all__ = [
    "RULE_NAMES",
    "AlertSettings",
    "DeliverySettings",
    "DivergenceSettings",
    "DynamicLRSettings",
    "EvalReboundSettings",
    "ForensicsSettings",
    "GradExplosionSettings",
    "GradVanishingSettings",
    "HbmFullSettings",
    "MemoryGrowthSettings",
    "NonFiniteSettings",
    "NotifierSettings",
    "NpuHealthSettings",
    "NpuTemperatureSettings",
    "PlateauSettings",
    "SpikeSettings",
    "StallSettings",
    "StragglerSettings",
    "ThroughputDropSettings",
]

S = TypeVar("S", bound=RuleSettings)


NotifierKind = Literal["webhook", "dingtalk", "feishu", "wecom", "slack", "email"]


class NotifierSettings(Settings):
    """Where alerts are sent. Secrets (``url``, ``secret``, ``password``) are best given
    as environment variable names (``url_env``, ...); given directly, they are kept out
    of run.json, the TEXT tab, logs and errors all the same."""

    kind: NotifierKind = Field(
        description="webhook (JSON POST of the alert), dingtalk, feishu (also Lark), "
        "wecom, slack (incoming webhook) or email (SMTP)."
    )
    min_severity: Literal["info", "warning", "critical"] = Field(
        default="warning", description="Send alerts of this severity and above."
    )
    url: Optional[SecretStr] = Field(default=None, description="Webhook URL (a secret).")
    url_env: Optional[str] = Field(default=None, description="Variable holding the URL.")
    secret: Optional[SecretStr] = Field(
        default=None, description="DingTalk / Feishu signing secret."
    )
    secret_env: Optional[str] = Field(default=None, description="Variable holding it.")
    host: Optional[str] = Field(default=None, description="email: SMTP server.")
    port: Optional[int] = Field(default=None, ge=1, le=65535, description="email: port.")
    security: Literal["starttls", "ssl", "none"] = Field(
        default="starttls", description="email: STARTTLS, SSL from the start, or none."
    )
    username: Optional[str] = Field(default=None, description="email: login name.")
    password: Optional[SecretStr] = Field(default=None, description="email: password.")
    password_env: Optional[str] = Field(default=None, description="Variable holding it.")
    sender: Optional[str] = Field(default=None, description="email: From address.")
    recipients: list[str] = Field(default_factory=list, description="email: To addresses.")

    @field_validator("url_env", "secret_env", "password_env")
    @classmethod
    def _variable_name(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(
                "must be the NAME of an environment variable (e.g. DINGTALK_WEBHOOK), not its value"
            )
        return value

    @field_validator("url")
    @classmethod
    def _webhook_url(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        if value is not None:
            problem = webhook_url_problem(value.get_secret_value())
            if problem is not None:
                raise ValueError(problem)  # the error shows the value masked: '***'
        return value

    @model_validator(mode="after")
    def _complete(self) -> NotifierSettings:
        if self.kind == "email":
            missing = [k for k in ("host", "sender") if not getattr(self, k)]
            if not self.recipients:
                missing.append("recipients")
            if missing:
                raise ValueError(f"an email notifier needs {', '.join(missing)}")
        elif self.url is None and not self.url_env:
            raise ValueError(
                f"a {self.kind} notifier needs url_env (the name of a variable holding the "
                "webhook URL) or url"
            )
        return self


class DeliverySettings(Settings):
    """How notifications are delivered (off the training thread)."""

    timeout: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="Seconds per attempt (at most 300: an endpoint slower than five "
        "minutes is down, and later alerts wait behind it).",
    )
    retries: int = Field(
        default=3,
        ge=0,
        le=10,
        description="Retries after a failed attempt (at most 10: the delays double, so "
        "the tenth already waits 512 x backoff).",
    )
    backoff: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="First retry delay in seconds, doubling (at most 60).",
    )
    max_per_minute: int = Field(
        default=20, ge=1, description="Per notifier; more are dropped and counted."
    )


class DynamicLRSettings(Settings):
    """The seeds' dynamic learning rate: the gradient norm below ``low`` for ``patience``
    steps -> lr x ``factor``; above ``high`` for ``patience`` steps -> lr / ``factor``."""

    enabled: bool = Field(default=False, description="Adjust the optimizer's lr.")
    metric: str = Field(default="train/grad_norm", description="Tag the rule watches.")
    low: float = Field(default=0.01, gt=0, description="Raise the lr below this norm.")
    high: Optional[float] = Field(
        default=None, gt=0, description="Lower the lr above this norm (None: never)."
    )
    patience: int = Field(default=5, ge=1, description="Consecutive steps needed.")
    factor: float = Field(default=1.5, gt=1, description="Multiplier per change.")
    max_scale: float = Field(default=100.0, ge=1, description="Largest total multiplier.")
    min_scale: float = Field(default=0.01, gt=0, le=1, description="Smallest one.")


class ForensicsSettings(Settings):
    """Spike forensics (docs/forensics.md): a flight recorder of the last ``window``
    steps in memory, analysed when an alert of one of ``rules`` is raised."""

    enabled: bool = Field(
        default=True,
        description="Keep the flight recorder and explain alerts (first movers, the "
        "first non-finite gradient, the batch, a skip list).",
    )
    window: int = Field(
        default=256,
        ge=16,
        le=100_000,
        description="Steps kept in memory (at most 100000; a step is its parameters' "
        "norms, 4 bytes each, plus its sample ids and scalars: 2-3 KB for 200 "
        "parameters and 32 ids).",
    )
    lookback: int = Field(
        default=32,
        ge=1,
        le=10_000,
        description="The last steps before an alert judged against the ones before "
        "them (at most 10000).",
    )
    z: float = Field(
        default=6.0,
        gt=0,
        description="Robust z-score (median and MAD of a series' own history) at which "
        "a series counts as departed.",
    )
    rules: list[str] = Field(
        default_factory=lambda: [
            "spike",
            "nonfinite",
            "grad_explosion",
            "grad_vanishing",
            "divergence",
            "layer_grad_outlier",
        ],
        description="Rules whose warning or critical alerts are explained.",
    )
    gather_timeout: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Under a reduction across ranks: seconds an alert waits for the other "
        "ranks' windows (they travel with the next reduction); then it is written with "
        "what arrived (at most 600).",
    )
    skip_list: bool = Field(
        default=True,
        description="Write <run>/skip.json with the batches of explained alerts, for a "
        "resumed run to skip (docs/forensics.md).",
    )

    @field_validator("rules")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in RULE_NAMES]
        if unknown:
            raise ValueError(f"unknown rule {unknown}; the rules are {', '.join(RULE_NAMES)}")
        return value


class _AlertsHead(Settings):
    """The ``alerts`` fields before the rules' sections (pydantic keeps a base's fields
    first: this split keeps the sections' place in the YAML dump and in docs/config.md)."""

    enabled: bool = Field(default=True, description="Evaluate the rules during training.")
    cooldown_steps: int = Field(
        default=100,
        ge=0,
        description="After an alert, the same (rule, metric, rank) stays quiet this many "
        "steps unless its severity rises.",
    )


# One section per rule of the registry, ``alerts.<rule.name>`` of its settings model:
# built from the rules' declarations, so a new rule needs no line here.
if TYPE_CHECKING:

    class _AlertsWithRules(_AlertsHead):
        def __getattr__(self, name: str) -> Any:
            """``alerts.<rule>``: the sections are made at run time (:meth:`rule` types them)."""

else:
    _AlertsWithRules = create_model(
        "_AlertsWithRules",
        __base__=_AlertsHead,
        __module__=__name__,
        **{
            rule.name: (rule.settings_model, Field(default_factory=rule.settings_model))
            for rule in BUILTIN_RULES
        },
    )


class AlertSettings(_AlertsWithRules):
    """Anomaly rules and what they write (``<run>/alerts.jsonl``, the log)."""

    stop_on: list[str] = Field(
        default_factory=list,
        description="Rules whose warning or critical alerts stop training cleanly (the "
        "MindSpore callback asks Model.train to stop; under data parallelism every rank "
        "stops at the same step), e.g. [nonfinite].",
    )
    last_stable_on: list[str] = Field(
        default_factory=lambda: ["nonfinite", "spike", "grad_explosion", "divergence"],
        description="Rules whose warning or critical alerts keep the newest checkpoint "
        "saved before them as 'last stable' (a hard link 'last_stable-<name>' next to it, "
        "which keep_checkpoint_max does not rotate away; path in the alert and run.json).",
    )
    dynamic_lr: DynamicLRSettings = Field(default_factory=DynamicLRSettings)
    sample_ids: Optional[int] = Field(
        default=None,
        ge=0,
        description="Position of a dataset column holding sample ids (the MindSpore "
        "callback reads it from each batch and puts the ids of the alerting step's batch "
        "in the alert; the network must accept the column, see docs/alerts.md).",
    )
    notify: list[NotifierSettings] = Field(
        default_factory=list,
        description="Notifiers: webhook, dingtalk, feishu, wecom, slack, email (docs/alerts.md).",
    )
    delivery: DeliverySettings = Field(default_factory=DeliverySettings)
    forensics: ForensicsSettings = Field(default_factory=ForensicsSettings)
    language: Optional[Literal["zh", "en"]] = Field(
        default=None,
        description="Language of alert messages, likely causes, notifications and console "
        "alert lines: zh (Chinese) or en (English). None: from the locale (LANGUAGE, "
        "LC_ALL, LC_MESSAGES or LANG starting with zh gives Chinese).",
    )

    @field_validator("stop_on", "last_stable_on")
    @classmethod
    def _known_rules(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in RULE_NAMES]
        if unknown:
            raise ValueError(f"unknown rule {unknown}; the rules are {', '.join(RULE_NAMES)}")
        return value

    def rule(self, rule: type[Rule[S]]) -> S:
        """The settings of ``rule`` (its ``alerts.<name>`` section), typed as its own."""
        return cast(S, getattr(self, rule.name))
