"""The ``alerts`` section: each anomaly rule's thresholds, notifiers, delivery, and the
actions alerts may take (stop, keep the last stable checkpoint, dynamic learning rate)."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator

from mindwatch.config.settings import DAY, Settings
from mindwatch.config.urls import webhook_url_problem

__all__ = [
    "RULE_NAMES",
    "AlertSettings",
    "DeliverySettings",
    "DivergenceSettings",
    "DynamicLRSettings",
    "EvalReboundSettings",
    "GradExplosionSettings",
    "GradVanishingSettings",
    "NonFiniteSettings",
    "NotifierSettings",
    "PlateauSettings",
    "SpikeSettings",
    "StallSettings",
    "ThroughputDropSettings",
]


# Points a rule keeps and sorts on the pipeline's thread: far above any useful window, far
# below what would slow the pipeline or fill memory.
MAX_WINDOW = 10_000


class _RuleSettings(Settings):
    enabled: bool = Field(default=True, description="Run this rule.")


class NonFiniteSettings(_RuleSettings):
    """``nonfinite``: NaN or Inf in a watched metric (critical)."""

    metrics: list[str] = Field(
        default_factory=list,
        description="Tags to watch (empty: every train/ and eval/ tag).",
    )


class SpikeSettings(_RuleSettings):
    """``spike``: a value far above its recent level (median/MAD z-score and a ratio)."""

    metrics: list[str] = Field(default_factory=lambda: ["train/loss"], description="Tags.")
    window: int = Field(
        default=100,
        ge=5,
        le=MAX_WINDOW,
        description="Recent points the level is taken from (at most 10000: they are kept "
        "and sorted on the pipeline's thread).",
    )
    warmup: int = Field(default=30, ge=1, description="Points seen before the rule may fire.")
    ratio: float = Field(default=3.0, gt=1, description="Value / recent mean must exceed this.")
    zscore: float = Field(
        default=6.0,
        gt=0,
        description="Robust z-score that must be exceeded: (x - median) / (1.4826 MAD) of "
        "the window, with x = log(value) for positive values.",
    )


class GradExplosionSettings(_RuleSettings):
    """``grad_explosion``: the global gradient norm many times its running median (scale
    free: what is "large" depends on the model and the loss scale), or above absolute
    thresholds when ``warning`` / ``critical`` are set (the seeds' 10 and 20)."""

    metric: str = Field(default="train/grad_norm", description="Tag.")
    factor: float = Field(
        default=10.0, gt=1, description="Warning above this many times the running median."
    )
    critical_factor: float = Field(
        default=100.0, gt=1, description="Critical above this many times the running median."
    )
    window: int = Field(
        default=100,
        ge=3,
        le=MAX_WINDOW,
        description="Points the running median is taken from (at most 10000: they are "
        "sorted at every step).",
    )
    warmup: int = Field(
        default=10, ge=1, description="Points seen before the relative test may fire."
    )
    warning: Optional[float] = Field(
        default=None,
        gt=0,
        validation_alias=AliasChoices("warning", "threshold"),
        description="Absolute warning threshold (alias: threshold; None: relative). "
        "Setting it (or critical) replaces the relative test.",
    )
    critical: Optional[float] = Field(
        default=None,
        gt=0,
        description="Absolute critical threshold (None: twice warning, or relative).",
    )


class GradVanishingSettings(_RuleSettings):
    """``grad_vanishing``: the global gradient norm below a threshold for several steps."""

    metric: str = Field(default="train/grad_norm", description="Tag.")
    below: float = Field(default=1e-3, gt=0, description="Norm threshold.")
    steps: int = Field(default=5, ge=1, description="Consecutive steps below it.")


class PlateauSettings(_RuleSettings):
    """``plateau``: the smoothed loss has not improved by ``min_delta`` in ``steps`` steps."""

    metric: str = Field(default="train/loss", description="Tag.")
    steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="Steps without improvement (None: adapts to the run: ``patience`` x "
        "the steps the run took to reach its best, at least ``min_steps``).",
    )
    patience: float = Field(
        default=0.5, gt=0, description="With steps None: the flat part / the improving part."
    )
    min_steps: int = Field(default=100, ge=1, description="With steps None: at least this.")
    min_delta: float = Field(default=0.05, ge=0, description="Relative improvement required.")
    smoothing: int = Field(default=50, ge=1, description="EMA span of the loss, in points.")
    severity: Literal["info", "warning"] = Field(default="info", description="Alert severity.")


class DivergenceSettings(_RuleSettings):
    """``divergence``: the smoothed loss has risen well above its minimum and stays there."""

    metric: str = Field(default="train/loss", description="Tag.")
    window: Optional[int] = Field(
        default=None,
        ge=2,
        le=MAX_WINDOW,
        description="Smoothing (EMA span, in points); not set: a third of the points seen "
        "so far, between 10 and 100, so a short run is judged on a short span. At most "
        "10000.",
    )
    rise: float = Field(default=1.0, gt=0, description="Relative rise above the minimum.")
    zscore: float = Field(
        default=6.0,
        ge=0,
        description="The rise must also exceed this many standard deviations of the "
        "smoothed value's own noise (measured from point to point): a noisy loss needs a "
        "larger rise.",
    )
    steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="Consecutive points above it; not set: a tenth of the points seen, "
        "between 10 and 50.",
    )
    warmup: int = Field(
        default=100,
        ge=0,
        description="Points seen before the rule may fire (the minimum is taken from then "
        "on: a noisy loss dips low in its first, fast-falling steps).",
    )


class ThroughputDropSettings(_RuleSettings):
    """``throughput_drop``: the median of the last ``recent`` points well below the
    run's baseline, by more than ``drop`` and by more than ``zscore`` times the run's
    own point-to-point noise; names the part of the step that grew (input pipeline:
    ``perf/data_wait_ms``, or compute: ``perf/compute_ms``) and, under data
    parallelism, the rank."""

    metric: str = Field(default="perf/samples_per_s", description="Tag.")
    drop: float = Field(default=0.4, gt=0, lt=1, description="Smallest relative drop that alerts.")
    window: int = Field(
        default=200,
        ge=10,
        le=MAX_WINDOW,
        description="Baseline: median of this many points (at most 10000: they are kept "
        "and sorted on the pipeline's thread).",
    )
    recent: int = Field(
        default=12,
        ge=1,
        le=MAX_WINDOW,
        description="Compared: median of the last points (at most 10000).",
    )
    skip: int = Field(
        default=100,
        ge=0,
        description="First points ignored: compile time, and the input pipeline's "
        "prefetch buffer filled meanwhile, make the first steps faster or slower than the "
        "run's own pace.",
    )
    warmup: int = Field(default=20, ge=5, description="Baseline points needed after those.")
    zscore: float = Field(
        default=6.0,
        ge=0,
        description="The drop (in log) must also exceed this many robust standard "
        "deviations of the baseline's points: a jittery machine needs a larger drop.",
    )


class StallSettings(_RuleSettings):
    """``stall``: no new step for ``seconds`` (checked by ``mindwatch watch``)."""

    seconds: float = Field(
        default=600.0,
        gt=0,
        le=7 * DAY,
        description="Seconds without a new step (at most 604800, a week: a run silent for "
        "longer has stopped, and mindwatch watch says so sooner with a smaller value).",
    )


class EvalReboundSettings(_RuleSettings):
    """``eval_rebound``: validation loss rising for K evaluations while the train loss falls."""

    metric: str = Field(default="eval/loss", description="Validation tag.")
    train_metric: str = Field(default="train/loss", description="Training tag.")
    evaluations: int = Field(default=3, ge=1, description="Consecutive rising evaluations.")
    train_tolerance: float = Field(
        default=0.1,
        ge=0,
        description="The train loss (mean between evaluations) counts as not rising "
        "unless it rose by more than this (noise near convergence).",
    )


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


RULE_NAMES = (
    "nonfinite",
    "spike",
    "grad_explosion",
    "grad_vanishing",
    "plateau",
    "divergence",
    "throughput_drop",
    "stall",
    "eval_rebound",
)


class AlertSettings(Settings):
    """Anomaly rules and what they write (``<run>/alerts.jsonl``, the log)."""

    enabled: bool = Field(default=True, description="Evaluate the rules during training.")
    cooldown_steps: int = Field(
        default=100,
        ge=0,
        description="After an alert, the same (rule, metric, rank) stays quiet this many "
        "steps unless its severity rises.",
    )
    nonfinite: NonFiniteSettings = Field(default_factory=NonFiniteSettings)
    spike: SpikeSettings = Field(default_factory=SpikeSettings)
    grad_explosion: GradExplosionSettings = Field(default_factory=GradExplosionSettings)
    grad_vanishing: GradVanishingSettings = Field(default_factory=GradVanishingSettings)
    plateau: PlateauSettings = Field(default_factory=PlateauSettings)
    divergence: DivergenceSettings = Field(default_factory=DivergenceSettings)
    throughput_drop: ThroughputDropSettings = Field(default_factory=ThroughputDropSettings)
    stall: StallSettings = Field(default_factory=StallSettings)
    eval_rebound: EvalReboundSettings = Field(default_factory=EvalReboundSettings)
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
