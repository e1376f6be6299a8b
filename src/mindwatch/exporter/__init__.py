"""Prometheus: the metrics a run serves (:mod:`~mindwatch.exporter.families`), the HTTP
server and the Pushgateway pushes (:mod:`~mindwatch.exporter.serving`).

``prometheus_client`` is imported only when an exporter is made.
"""

from mindwatch.exporter.families import (
    DEFAULT_PREFIX,
    METRIC_NAMES,
    RUN_STATUSES,
    PrometheusMetrics,
    RunSeries,
    metric_names,
)

__all__ = [
    "DEFAULT_PREFIX",
    "METRIC_NAMES",
    "RUN_STATUSES",
    "PrometheusMetrics",
    "RunSeries",
    "metric_names",
]
