"""The ``prometheus`` section: serve a run's metrics to Prometheus, or push them.

Off by default. ``prometheus: {port: 9410}`` serves rank 0's metrics (the job's,
reduced across ranks under ``msrun``) on ``http://127.0.0.1:9410/metrics``;
``push: {url_env: PUSHGATEWAY_URL}`` pushes them to a Pushgateway instead or as well
(jobs that cannot open a port, short jobs). Label names and the prefix are checked
here, once, against Prometheus' rules, so a scrape never fails on them.
"""

from __future__ import annotations

import re
from typing import Optional

from pydantic import Field, SecretStr, field_validator, model_validator

from mindwatch.config.settings import DAY, Settings
from mindwatch.config.urls import pushgateway_url_problem

__all__ = ["RESERVED_LABELS", "PrometheusSettings", "PushSettings"]

_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Labels mindwatch sets itself (mindwatch.exporter.families.OWN_LABELS; tests check they
# agree), and Prometheus' own.
RESERVED_LABELS = (
    "run", "rank", "metric", "stat", "rule", "severity", "status", "version", "world_size",
    "node", "device_id", "instance", "le", "quantile",
)  # fmt: skip
DEFAULT_PUSH_JOB = "mindwatch"


class PushSettings(Settings):
    """Pushes to a Prometheus Pushgateway, for jobs Prometheus cannot scrape."""

    # The address is a secret (``http://user:password@gateway:9091``) like a notifier's.

    url: Optional[SecretStr] = Field(
        default=None,
        description="The Pushgateway's address, e.g. 'http://pushgateway:9091'; kept out of "
        "run.json, the TEXT tab, logs and errors, as it may carry credentials.",
    )
    url_env: Optional[str] = Field(
        default=None,
        description="The NAME of an environment variable holding the address (wins over "
        "url when it is set), e.g. PUSHGATEWAY_URL: one config for every cluster.",
    )
    every_secs: Optional[float] = Field(
        default=30.0,
        gt=0,
        le=DAY,
        description="Push every this many seconds while the run goes on, from a thread of "
        "its own, and once more when it ends (None: only at the end). At most 86400 (a "
        "day); None pushes only at the end.",
    )
    job: Optional[str] = Field(
        default=None,
        min_length=1,
        description="The Pushgateway's job (its grouping key, with the run's name as "
        "'run' and, per rank, 'rank'). None: the constant label 'job' when given, else "
        "'mindwatch'.",
    )
    timeout: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="Seconds one push may take (at most 300). A push that fails or times "
        "out is one warning (and a count in run.json); training goes on and the next push "
        "tries again.",
    )

    @field_validator("url_env")
    @classmethod
    def _variable_name(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not _VARIABLE.fullmatch(value):
            raise ValueError(
                "must be the NAME of an environment variable (e.g. PUSHGATEWAY_URL), not its value"
            )
        return value

    @field_validator("url")
    @classmethod
    def _address(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        if value is not None:
            problem = pushgateway_url_problem(value.get_secret_value())
            if problem is not None:
                raise ValueError(problem)  # the error shows the value masked: '***'
        return value

    @model_validator(mode="after")
    def _has_address(self) -> PushSettings:
        if self.url is None and self.url_env is None:
            raise ValueError(
                "push needs url (e.g. 'http://pushgateway:9091') or url_env (the name of a "
                "variable holding it)"
            )
        return self


class PrometheusSettings(Settings):
    """Prometheus metrics of the run (docs/prometheus.md): served over HTTP for scraping,
    pushed to a Pushgateway, or both."""

    port: Optional[int] = Field(
        default=None,
        ge=0,
        le=65535,
        description="Serve the metrics on http://<host>:<port>/metrics for Prometheus to "
        "scrape (0: any free port, logged). With per_rank, rank r serves on port + r. A "
        "port already in use is one warning naming it; training goes on. None: no "
        "server (push only).",
    )
    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address the server listens on: loopback by default; '0.0.0.0' (all "
        "interfaces) for a Prometheus on another machine.",
    )
    prefix: str = Field(
        default="mindwatch",
        description="Start of every metric name (mindwatch_loss, mindwatch_step, ...).",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Constant labels on every series, e.g. {job: llama-7b, team: nlp}, so "
        "a platform tells jobs apart. Each series also has 'run' (the run folder's name). "
        "Prometheus renames a scraped 'job' label to 'exported_job' unless the scrape "
        "config sets honor_labels: true.",
    )
    per_rank: bool = Field(
        default=False,
        description="Multi-card: every rank serves its own values too, labelled "
        'rank="<r>" (rank r on port + r). False: rank 0 only, with the job\'s values '
        "(reduced across ranks) and their spread (mindwatch_rank_spread, "
        "mindwatch_rank_argmax).",
    )
    linger_secs: float = Field(
        default=0.0,
        ge=0,
        le=600,
        description="At the end of the run, keep serving until Prometheus has scraped "
        "once more (at most this many seconds), so the run's final status (finished, "
        "failed, terminated) is recorded and a job that ended is told from one that "
        "crashed. Set it to your scrape interval or a little more; 0: stop at once (the "
        "last status then reaches Prometheus only through push or mindwatch watch). At "
        "most 600 (ten minutes): longer than any scrape interval.",
    )
    push: Optional[PushSettings] = Field(
        default=None,
        description="Push to a Prometheus Pushgateway at the end of the run and every "
        "every_secs seconds: url or url_env, every_secs, job, timeout (None: no push).",
    )

    @field_validator("prefix")
    @classmethod
    def _metric_prefix(cls, value: str) -> str:
        if not _METRIC.fullmatch(value):
            raise ValueError(
                "is not a Prometheus metric name: use letters, digits, '_' and ':', not "
                "starting with a digit (e.g. 'mindwatch' or 'team_a')"
            )
        return value

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _LABEL.fullmatch(key) or key.startswith("__"):
                fixed = re.sub(r"[^a-zA-Z0-9_]", "_", key).lstrip("_") or "label"
                fixed = f"_{fixed}" if fixed[0].isdigit() else fixed
                raise ValueError(
                    f"{key!r} is not a Prometheus label name (letters, digits and '_', not "
                    f"starting with a digit or '__'): rename it, e.g. {fixed!r}"
                )
            if key in RESERVED_LABELS:
                raise ValueError(
                    f"{key!r} is a label mindwatch or Prometheus sets itself "
                    f"({', '.join(RESERVED_LABELS)}): choose another name, e.g. "
                    f"'{key}_name'"
                )
        return value

    @model_validator(mode="after")
    def _somewhere_to_go(self) -> PrometheusSettings:
        if self.port is None and self.push is None:
            raise ValueError(
                "prometheus needs port (a server Prometheus scrapes, e.g. 9410) or push (a "
                "Pushgateway), or both"
            )
        push, job = self.push, self.labels.get("job")
        if push is not None and push.job is not None and job is not None and push.job != job:
            raise ValueError(
                f"prometheus.push.job {push.job!r} differs from the constant label job "
                f"{job!r}, which the Pushgateway refuses: drop push.job (it takes the label) "
                "or make them equal"
            )
        return self

    def push_job(self) -> str:
        """The Pushgateway job: ``push.job``, else the ``job`` label, else mindwatch."""
        given = self.push.job if self.push is not None else None
        return given or self.labels.get("job") or DEFAULT_PUSH_JOB

    def push_address(self) -> Optional[str]:
        """The configured ``push.url`` in clear (``push.url_env`` is looked up later)."""
        url = self.push.url if self.push is not None else None
        return url.get_secret_value() if url is not None else None

    def rank_port(self, rank: int) -> Optional[int]:
        """The port rank ``rank`` serves on (None: no server; 0 stays any free port)."""
        if self.port is None:
            return None
        return self.port + rank if self.port and self.per_rank else self.port
