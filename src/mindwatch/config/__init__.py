"""Configuration: one validated, frozen :class:`MonitorConfig`, by concern.

=================  ==============================================================
module             what it holds
=================  ==============================================================
:mod:`.model`      ``MonitorConfig`` and its building (dict, YAML, MindFormers)
:mod:`.alerts`     the ``alerts`` section: rules, notifiers, delivery, actions
:mod:`.prometheus` the ``prometheus`` section: the exporter's server and pushes
:mod:`.hardware`   the ``hardware`` section: per-rank telemetry sources and period
:mod:`.mindformers` MindFormers YAML sections -> mindwatch fields (pure mapping)
:mod:`.yaml`       reading a YAML file (UTF-8/16/32, GBK) with errors naming file and line
:mod:`.settings`   the base of every section: frozen, finite numbers, 64-bit integers
:mod:`.urls`       webhook addresses, checked without ever quoting them
:mod:`.errors`     ``ConfigError`` and its one-message-for-every-mistake text
=================  ==============================================================
"""

from mindwatch.config.alerts import (
    RULE_NAMES,
    AlertSettings,
    DeliverySettings,
    DivergenceSettings,
    DynamicLRSettings,
    EvalReboundSettings,
    ForensicsSettings,
    GradExplosionSettings,
    GradVanishingSettings,
    NonFiniteSettings,
    NotifierSettings,
    PlateauSettings,
    SpikeSettings,
    StallSettings,
    ThroughputDropSettings,
)
from mindwatch.config.errors import ConfigError, accepted_keys
from mindwatch.config.hardware import HardwareSettings
from mindwatch.config.mindformers import mindformers_notes
from mindwatch.config.model import (
    CheckpointSettings,
    HistogramKind,
    MonitorConfig,
    ReduceKind,
    canonical_key,
)
from mindwatch.config.prometheus import PrometheusSettings, PushSettings

__all__ = [
    "RULE_NAMES",
    "AlertSettings",
    "CheckpointSettings",
    "ConfigError",
    "DeliverySettings",
    "DivergenceSettings",
    "DynamicLRSettings",
    "EvalReboundSettings",
    "ForensicsSettings",
    "GradExplosionSettings",
    "GradVanishingSettings",
    "HardwareSettings",
    "HistogramKind",
    "MonitorConfig",
    "NonFiniteSettings",
    "NotifierSettings",
    "PlateauSettings",
    "PrometheusSettings",
    "PushSettings",
    "ReduceKind",
    "SpikeSettings",
    "StallSettings",
    "ThroughputDropSettings",
    "accepted_keys",
    "canonical_key",
    "mindformers_notes",
]
