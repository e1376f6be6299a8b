"""The Prometheus exporter as a sink: a run's steps, evaluations, alerts and status into
its :class:`~mindwatch.exporter.RunSeries`, on the pipeline's thread.

The exporter (:class:`~mindwatch.exporter.RunExporter`: the HTTP server, the pushes)
starts with the first item a sink gets, so a process that logs nothing opens no port.
On rank 0 the ``MAIN`` route's sink serves the job's values (reduced across ranks under
``msrun``, with their ``ranks/`` spread); with ``prometheus.per_rank`` a ``RANK`` route
sink adds the rank's own values under a ``rank`` label. The sink that owns the exporter
closes it: the last push, then the server stops.
"""

from __future__ import annotations

from typing import Optional

from mindwatch.exporter import RunExporter, RunSeries
from mindwatch.sinks.items import EvalValues, Item, RaisedAlert, RunStatus, StepValues

__all__ = ["PrometheusSink"]


class PrometheusSink:
    """Feed ``series`` of ``exporter`` from the items of one route."""

    def __init__(self, exporter: RunExporter, series: RunSeries, *, owner: bool) -> None:
        self.exporter = exporter
        self.series = series
        self.owner = owner
        self.name = "Prometheus exporter" + ("" if owner else " (rank)")
        self._started = False

    def write(self, item: Item) -> None:
        if not self._started:
            self._started = True
            self.exporter.start()
        series = self.series
        if isinstance(item, StepValues):
            series.observe_step(item.step, item.values, item.wall)
        elif isinstance(item, EvalValues):
            series.observe_eval(item.values)
        elif isinstance(item, RaisedAlert):
            series.count_alert(item.alert.rule, item.alert.severity)
        elif isinstance(item, RunStatus):
            series.set_status(item.status)

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self, timeout: Optional[float] = None) -> None:
        if self.owner:
            self.exporter.close(timeout)
