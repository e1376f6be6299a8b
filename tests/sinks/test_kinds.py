"""Each sink kind opens itself from the config at a place of the job (SINK_KINDS): the
same sinks, in the same order, as the table in mindwatch.pipeline.outputs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest

from mindwatch.config import MonitorConfig
from mindwatch.events.writer import EventFileWriter
from mindwatch.exporter import RunExporter
from mindwatch.metrics.derived import StepRates
from mindwatch.sinks import (
    SINK_KINDS,
    MindFormersView,
    ProgressSink,
    PrometheusSink,
    Sink,
    SinkPlace,
    TensorBoardSink,
    open_sinks,
)


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[EventFileWriter]:
    events = EventFileWriter(tmp_path)
    yield events
    events.close()


def opened(
    config: dict[str, Any],
    route: str,
    *,
    rank: int = 0,
    reduced: bool = False,
    writer: Optional[EventFileWriter] = None,
) -> list[tuple[Any, ...]]:
    """What open_sinks gives at ``route``: (kind, what tells it apart) per sink."""
    cfg = MonitorConfig.from_any({"print_every": 0, **config})
    exporter = None
    if cfg.prometheus is not None and (rank == 0 or cfg.prometheus.per_rank):
        exporter = RunExporter(cfg.prometheus, run="run", rank=rank, world_size=4)
        exporter.series = lambda *, rank=None, own=None: ("series", rank)  # type: ignore[method-assign]
    place = SinkPlace(
        route,  # type: ignore[arg-type]
        rank=rank,
        world_size=4,
        reduced=reduced,
        total_steps=100,
        rates=StepRates(),
        writer=writer,
        exporter=exporter,
    )
    return [describe(sink) for sink in open_sinks(cfg, place)]


def describe(sink: Sink) -> tuple[Any, ...]:
    if isinstance(sink, TensorBoardSink):
        return ("tensorboard", sink.name.split(" (")[0], sink._layout_pending)
    if isinstance(sink, PrometheusSink):
        return ("prometheus", sink.series, sink.owner)
    if isinstance(sink, ProgressSink):
        return ("progress", sink.reporter.total)
    assert isinstance(sink, MindFormersView)
    return ("mindformers view", sink.world_size)


PROMETHEUS = {"prometheus": {"port": 9410, "per_rank": True}}


def test_the_kinds_in_the_order_a_route_gets_them() -> None:
    kinds = SINK_KINDS
    assert kinds == (TensorBoardSink, MindFormersView, ProgressSink, PrometheusSink)


def test_rank_0_writes_the_run_its_progress_and_the_jobs_exporter(
    writer: EventFileWriter,
) -> None:
    assert opened({}, "main", writer=writer) == [
        ("tensorboard", "TensorBoard", True),
        ("progress", 100),
    ]
    assert opened({"tag_style": "mindformers", **PROMETHEUS}, "main", writer=writer) == [
        ("tensorboard", "TensorBoard", True),
        ("mindformers view", 4),
        ("progress", 100),
        ("prometheus", ("series", None), True),
    ]
    assert opened(PROMETHEUS, "rank", reduced=False) == []
    # Under reduction with per_rank: its own folder (a writer), and its own values for
    # the exporter (prometheus.per_rank).
    assert opened(PROMETHEUS, "rank", reduced=True, writer=writer) == [
        ("tensorboard", "TensorBoard rank", False),
        ("prometheus", ("series", 0), False),
    ]
    only_rank_0 = {"prometheus": {"port": 9410}}
    assert opened(only_rank_0, "rank", reduced=True) == []


def test_another_rank_writes_its_own_values_where_they_go(writer: EventFileWriter) -> None:
    # Reduced: rank 0 writes the run; this rank's own folder (per_rank) is its RANK route.
    assert opened(PROMETHEUS, "main", rank=2, reduced=True) == []
    assert opened(PROMETHEUS, "rank", rank=2, reduced=True, writer=writer) == [
        ("tensorboard", "TensorBoard rank", False),
        ("prometheus", ("series", 2), True),
    ]
    # Nobody to reduce with: its own folder is the run it writes (MAIN), no console.
    assert opened({"tag_style": "mindformers", **PROMETHEUS}, "main", rank=2, writer=writer) == [
        ("tensorboard", "TensorBoard rank", True),
        ("mindformers view", 4),
        ("prometheus", ("series", 2), True),
    ]
    assert opened(PROMETHEUS, "rank", rank=2) == []
    assert opened({"prometheus": {"port": 9410}}, "main", rank=2, writer=writer) == [
        ("tensorboard", "TensorBoard rank", True),
    ]
