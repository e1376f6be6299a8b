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

from typing import TYPE_CHECKING, Optional

from mindwatch.exporter import RunExporter, RunSeries
from mindwatch.sinks.base import SinkPlace, TypedSink, handles
from mindwatch.sinks.items import (
    EvalValues,
    Histogram,
    Item,
    RaisedAlert,
    RunStatus,
    Scalars,
    SessionStart,
    StepValues,
    SummaryValues,
    Text,
    TotalSteps,
)

if TYPE_CHECKING:
    from mindwatch.config import MonitorConfig

__all__ = ["PrometheusSink"]


class PrometheusSink(TypedSink):
    """Feed ``series`` of ``exporter`` from the items of one route."""

    def __init__(self, exporter: RunExporter, series: RunSeries, *, owner: bool) -> None:
        self.exporter = exporter
        self.series = series
        self.owner = owner
        self.name = "Prometheus exporter" + ("" if owner else " (rank)")
        self._started = False

    @classmethod
    def from_config(cls, config: MonitorConfig, place: SinkPlace) -> Optional[PrometheusSink]:
        """The route's series of the process's exporter (made from ``prometheus``): on
        rank 0 the job's values on ``main``, and with ``per_rank`` rank 0's own on
        ``rank`` (under reduction); on another rank (``per_rank``) its own values, on
        the route that has them."""
        exporter = place.exporter
        if exporter is None:
            return None
        if place.rank == 0:
            if place.route == "main":  # unreduced, the main route has rank 0's own values
                return cls(exporter, exporter.series(own=not place.reduced), owner=True)
            if place.reduced and exporter.settings.per_rank:
                return cls(exporter, exporter.series(rank=0), owner=False)
            return None
        if place.route != ("rank" if place.reduced else "main"):
            return None
        return cls(exporter, exporter.series(rank=place.rank), owner=True)

    def _start(self) -> None:
        self._started = True
        self.exporter.start()

    @handles(StepValues)
    def _step(self, item: StepValues) -> None:
        if not self._started:
            self._start()
        self.series.observe_step(item.step, item.values, item.wall)

    @handles(EvalValues)
    def _eval(self, item: EvalValues) -> None:
        if not self._started:
            self._start()
        self.series.observe_eval(item.values)

    @handles(RaisedAlert)
    def _alert(self, item: RaisedAlert) -> None:
        if not self._started:
            self._start()
        self.series.count_alert(item.alert.rule, item.alert.severity)

    @handles(RunStatus)
    def _status(self, item: RunStatus) -> None:
        if not self._started:
            self._start()
        self.series.set_status(item.status)

    @handles(Scalars, Histogram, Text, SummaryValues, SessionStart, TotalSteps)
    def _other(self, item: Item) -> None:
        """Not exported, but the first item of any kind starts the exporter, as the
        module says (the config's TEXT entry, on rank 0, when the monitor opens)."""
        if not self._started:
            self._start()

    def close(self, timeout: Optional[float] = None) -> None:
        if self.owner:
            self.exporter.close(timeout)
