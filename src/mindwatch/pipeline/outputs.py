"""Which outputs a process has, by its place in the job: the wiring of a pipeline.

=====================================  ==========================  ====================
process                                ``MAIN`` route (shared      ``RANK`` route
                                       values, rules, run.json)
=====================================  ==========================  ====================
single process, or rank 0              ``<run>/``                  ``<run>/rank_0/``
                                                                   with ``per_rank``
rank r > 0, values reduced             nothing                     ``<run>/rank_<r>/``
                                                                   with ``per_rank``
rank r > 0, nobody to reduce with      ``<run>/rank_<r>/`` (or a   nothing
                                       run folder of its own)
=====================================  ==========================  ====================

``MAIN`` gets the TensorBoard event files, the MindFormers tag view
(``tag_style: mindformers``), the console progress (rank 0), the rules with their
``alerts.jsonl``, and ``run.json``. A rank r > 0 whose reduction fails opens
``<run>/rank_<r>/`` then, for both routes, so none of its values is lost.

With ``prometheus`` configured, rank 0's ``MAIN`` route also feeds the Prometheus
exporter (the job's values); with ``prometheus.per_rank`` every rank's own values feed
its exporter too, labelled by rank (the ``RANK`` route under reduction, else ``MAIN``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional

from mindwatch.alerts import AlertLog
from mindwatch.common.redact import redact_value
from mindwatch.config import MonitorConfig
from mindwatch.events.writer import EventFileWriter, LogDirError, WriterStats
from mindwatch.exporter import RunExporter
from mindwatch.forensics import FlightRecorder
from mindwatch.metrics.steps import LocalSteps
from mindwatch.pipeline.alerting import Alerting
from mindwatch.pipeline.pipeline import Pipeline
from mindwatch.run.info import RunInfo
from mindwatch.run.layout import ALERTS_FILE, has_event_files
from mindwatch.run.ranks import RankPlace, rank_folder
from mindwatch.sinks import Sink, SinkGroup, SinkPlace, TensorBoardSink, open_sinks

__all__ = ["Outputs", "config_markdown", "open_outputs", "open_writer"]

log = logging.getLogger(__name__)


@dataclass
class Outputs:
    """A process's pipeline, its run.json, and the TensorBoard folders it writes."""

    pipeline: Pipeline
    run: Optional[RunInfo]
    global_tb: Optional[TensorBoardSink]  # <run>/ (rank 0)
    rank_tb: Optional[TensorBoardSink]  # <run>/rank_<r>/ (or a rank's own run folder)
    exporter: Optional[RunExporter] = None  # Prometheus (config.prometheus)

    def writers(self) -> list[EventFileWriter]:
        """The event writers: the global run's first, then this rank's own folder
        (also one opened after a failed reduction)."""
        tbs = (self.global_tb, self.rank_tb, *self.pipeline.rank.sinks)
        writers: list[EventFileWriter] = []
        for tb in tbs:
            writer = getattr(tb, "writer", None)
            if isinstance(writer, EventFileWriter) and writer not in writers:
                writers.append(writer)
        return writers

    def rank_logdir(self) -> Optional[Path]:
        """``<run>/rank_<r>/`` when this rank writes a folder of its own, else None."""
        writers = self.writers()[1 if self.global_tb is not None else 0 :]
        return writers[0].logdir if writers else None

    def finish_run(self, status: str, *, error: object = None, **fields: Any) -> None:
        """Write ``run.json``'s end: ``status``, the error (one line), the files and
        counters, the alerts and notifications, and ``fields``; and log the points
        dropped, if any, as one total: the number ``run.json`` records."""
        stats = self.stats()
        if stats.points_dropped:
            folders = sorted({str(w.logdir) for w in self.writers()})
            log.warning(
                "mindwatch: %d points were dropped in all and are not in %s "
                "(points_dropped in run.json): a queue stayed full for longer than "
                "max_block_secs (raise max_queue for bursts), or writes failed (%d write "
                "errors); the first warning above says which",
                stats.points_dropped,
                ", ".join(folders) or "the event files",
                stats.write_errors,
            )
        run = self.run
        if run is None:
            return
        if error is not None:
            # One line: framework errors carry pages of call stacks.
            text = " ".join(str(error).split())
            fields["error"] = f"{type(error).__name__}: {text}"[:300]
        alerting = self.pipeline.alerting
        if self.exporter is not None:
            fields["prometheus"] = self.exporter.summary()
        folder = run.path.parent
        run.finish(
            status=status,
            points_dropped=stats.points_dropped,
            write_errors=stats.write_errors,
            event_files=[os.path.relpath(f, folder) for f in stats.files],
            # What each file holds at least, so `mindwatch doctor` can tell a file cut
            # later (copied mid-write, a quota) from a complete one.
            event_file_bytes={
                os.path.relpath(f, folder): size for f, size in zip(stats.files, stats.file_bytes)
            },
            event_files_vanished=stats.files_vanished,
            **(alerting.summary() if alerting is not None else {"alerts": 0}),
            **fields,
        )

    def stats(self) -> WriterStats:
        """The writers' counters, summed, and the points the pipeline dropped (an end
        of the pipeline's thread on an unexpected error counts as a write error)."""
        writers = [w.stats for w in self.writers()]
        return WriterStats(
            records_written=sum(w.records_written for w in writers),
            points_dropped=sum(w.points_dropped for w in writers) + self.pipeline.points_dropped,
            write_errors=sum(w.write_errors for w in writers) + self.pipeline.errors,
            files=tuple(f for w in writers for f in w.files),
            file_bytes=tuple(b for w in writers for b in w.file_bytes),
            files_vanished=sum(w.files_vanished for w in writers),
        )


def open_writer(folder: Path, config: MonitorConfig) -> EventFileWriter:
    """An event writer for ``folder`` with the config's limits.

    A run's first session starts with ``SessionLog.START``, as TensorFlow's did:
    TensorBoard's server treats the first START in a run as the start and only later ones
    as restarts, so a resume's marker needs this one.
    """
    writer = EventFileWriter(
        folder,
        flush_secs=config.flush_secs,
        max_file_size=config.max_file_size,
        max_queue=config.max_queue,
        max_block_secs=config.max_block_secs,
        filename_suffix=config.filename_suffix,
        purge_step=0 if not has_event_files(folder) else None,
    )
    writer.summarize_drops = False  # Outputs.finish_run logs one total, run.json's
    return writer


def config_markdown(config: Mapping[str, Any]) -> str:
    """The effective config as a TEXT entry (TensorBoard renders markdown), without its
    secrets (:func:`~mindwatch.common.redact.redact_value`)."""
    body = json.dumps(redact_value(dict(config)), indent=2, sort_keys=True, default=str)
    return "Effective mindwatch configuration:\n\n```json\n" + body + "\n```"


def open_outputs(
    config: MonitorConfig,
    logdir: Path,
    *,
    rank: int,
    world_size: int,
    reduced: bool,
    own_run_folder: bool,
    total_steps: Optional[int],
    run_info: Optional[Mapping[str, Any]],
    local: LocalSteps,
    places: Sequence[RankPlace] = (),
) -> Outputs:
    """Open the folders this process writes (LogDirError if one cannot be written), its
    run.json, and the pipeline that feeds them. Each route's sinks are the kinds of
    :data:`~mindwatch.sinks.SINK_KINDS` that its place and the config ask for.
    ``places``: where the ranks run (every rank's once they agreed, else this one's),
    for run.json's ``ranks`` and the alerts."""
    cfg = config
    # The folders: rank 0's run folder, and a rank's own (see the module's table).
    main_writer = rank_writer = None
    if rank == 0:
        main_writer = open_writer(logdir, cfg)
    if (reduced and cfg.per_rank) or (rank != 0 and not reduced):
        folder = logdir if own_run_folder else logdir / rank_folder(rank)
        rank_writer = open_writer(folder, cfg)
        if rank != 0 and not reduced:  # its values are the run this process writes
            main_writer, rank_writer = rank_writer, None
    exporter = _exporter(cfg, logdir.name, rank=rank, world_size=world_size)

    def place(route: Literal["main", "rank"], writer: Optional[EventFileWriter]) -> SinkPlace:
        return SinkPlace(
            route,
            rank=rank,
            world_size=world_size,
            reduced=reduced,
            total_steps=total_steps,
            rates=local.rates,
            writer=writer,
            exporter=exporter,
        )

    main = open_sinks(cfg, place("main", main_writer))
    rank_sinks = open_sinks(cfg, place("rank", rank_writer))
    main_tb, own_tb = _tensorboard(main), _tensorboard(rank_sinks)
    global_tb = main_tb if rank == 0 else None
    rank_tb = main_tb if rank != 0 and not reduced else own_tb
    run = None
    if main_tb is not None:
        run = RunInfo(
            main_tb.writer.logdir,
            config=cfg.model_dump(mode="json") | {"logdir": str(logdir)},
            world_size=world_size,
            rank=rank,
            extra=run_info,
        )
        given: dict[str, Any] = {}
        if cfg.flops_per_sample is not None:
            given.update(per_sample=cfg.flops_per_sample, source="config")
        if cfg.peak_tflops is not None:
            given.update(peak_tflops=cfg.peak_tflops, peak_source="config")
        if given:
            run.update(flops=given)
        if places:
            run.update(ranks=[p.to_dict() for p in places])
        run.write()
    # Every rank keeps its own flight recorder: under reduction rank 0's rules ask the
    # others for their analysis of an alert's step (mindwatch.forensics.exchange).
    recorder = None
    if cfg.alerts.enabled and cfg.alerts.forensics.enabled:
        recorder = FlightRecorder(cfg.alerts.forensics.window)
    alerting = None
    if cfg.alerts.enabled and main_tb is not None:
        dispatcher = None
        if cfg.alerts.notify:  # smtplib, urllib...: imported only when needed
            from mindwatch.alerts.notify import build_dispatcher

            dispatcher = build_dispatcher(cfg.alerts)
        alerting = Alerting(
            cfg.alerts,
            run=logdir.name,
            rank=rank,
            places=places,
            alert_log=AlertLog(main_tb.writer.logdir / ALERTS_FILE),
            dispatcher=dispatcher,
            recorder=recorder,
        )

    def open_rank_folder() -> Optional[SinkGroup]:
        """After a failed reduction: rank r's own folder, for all its values."""
        try:
            writer = open_writer(logdir / rank_folder(rank), cfg)
        except LogDirError as exc:
            log.warning("mindwatch: rank %d cannot write its own values: %s", rank, exc)
            return None
        return SinkGroup([TensorBoardSink(writer, name="TensorBoard rank")])

    pipeline = Pipeline(
        main=SinkGroup(main),
        rank=SinkGroup(rank_sinks),
        local=local,
        perplexity=cfg.perplexity,
        alerting=alerting,
        recorder=recorder,
        open_rank_folder=open_rank_folder if reduced and rank != 0 and rank_tb is None else None,
        max_queue=cfg.max_queue,
        max_block_secs=cfg.max_block_secs,
    )
    return Outputs(pipeline, run, global_tb, rank_tb, exporter)


def _tensorboard(sinks: list[Sink]) -> Optional[TensorBoardSink]:
    """The route's event files, if it has them."""
    return next((sink for sink in sinks if isinstance(sink, TensorBoardSink)), None)


def _exporter(cfg: MonitorConfig, run: str, *, rank: int, world_size: int) -> Optional[RunExporter]:
    """The Prometheus exporter of this process, if it has one: rank 0's, and with
    ``per_rank`` every rank's (its sinks: :meth:`PrometheusSink.from_config`)."""
    settings = cfg.prometheus
    if settings is None or not (rank == 0 or settings.per_rank):
        return None
    return RunExporter(settings, run=run, rank=rank, world_size=world_size)
