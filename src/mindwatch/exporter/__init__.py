"""Prometheus: the metrics a run serves (:mod:`~mindwatch.exporter.families`), the HTTP
server and the Pushgateway pushes (:mod:`~mindwatch.exporter.serving`), and one
process's exporter as the config asks (:mod:`~mindwatch.exporter.run_exporter`).

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
from mindwatch.exporter.run_exporter import RunExporter
from mindwatch.exporter.serving import MetricsServer, Pusher, push_url

__all__ = [
    "DEFAULT_PREFIX",
    "METRIC_NAMES",
    "RUN_STATUSES",
    "MetricsServer",
    "PrometheusMetrics",
    "Pusher",
    "RunExporter",
    "RunSeries",
    "metric_names",
    "push_url",
]
