"""``RunSession``: one run of this process, from its folder to how it ended.

It holds what a run *is*, apart from its steps: this process's place in the job (rank
and world size; every rank's node and device, once the ranks agreed), the run folder
(claimed so two runs never mix, or named from ``run_name``; the link to an earlier run
it moved next to), the outputs that write it
(:func:`~mindwatch.pipeline.open_outputs`), ``run.json`` (fields recorded as the run
goes, the end status), the hyperparameters for TensorBoard's HPARAMS dashboard and the
FLOPs facts ``run.json`` records. The steps travel on a
:class:`~mindwatch.monitor.route.StepRoute`; the front door,
:class:`~mindwatch.monitor.front.Monitor`, drives both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, Optional

from mindwatch.aggregate import Collective
from mindwatch.config import MonitorConfig, ReduceKind
from mindwatch.events.summaries import (
    hparams_session_end_values,
    hparams_session_values,
    import_text_support,
)
from mindwatch.events.writer import EventFileWriter, LogDirError, PathLike, absolute_logdir
from mindwatch.hardware.telemetry import HardwareTelemetry, open_telemetry
from mindwatch.metrics.derived import StepRates
from mindwatch.metrics.hparams import HParamValue
from mindwatch.metrics.steps import LocalSteps
from mindwatch.metrics.values import NonFiniteCounter
from mindwatch.monitor.route import RoutePlan, StepRoute
from mindwatch.pipeline import BOTH, Pipeline
from mindwatch.pipeline.outputs import config_markdown, open_outputs
from mindwatch.run import lifecycle
from mindwatch.run.claim import claim_run_dir, link_runs
from mindwatch.run.layout import new_run_dir
from mindwatch.run.rank_file import write_rank_file
from mindwatch.run.ranks import RankPlace, env_rank_and_world
from mindwatch.sinks.items import RunStatus, SummaryValues, Text

__all__ = ["RunSession", "open_run", "place_in_job"]

log = logging.getLogger(__name__)


def place_in_job(
    collective: Any, rank: Optional[int], world_size: Optional[int]
) -> tuple[int, int]:
    """This process's ``(rank, world_size)``: as given, else the collective's, else
    ``RANK_ID`` / ``RANK_SIZE`` (``msrun`` sets them), else a single process."""
    env_rank, env_world = env_rank_and_world()
    if collective is not None:
        env_rank, env_world = int(collective.rank), int(collective.world_size)
    return (
        env_rank if rank is None else int(rank),
        env_world if world_size is None else int(world_size),
    )


def open_run(
    config: MonitorConfig,
    target: PathLike,
    *,
    collective: Optional[Collective],
    rank: int,
    world_size: int,
    place: RankPlace,
    reductions: Optional[Mapping[str, ReduceKind]],
    loss_ranks: Optional[Sequence[int]],
    resume: bool,
    total_steps: Optional[int],
    run_info: Optional[Mapping[str, Any]],
) -> tuple[RunSession, StepRoute]:
    """This process's run and the route its steps take. The route is planned first:
    with several ranks, their first collective agrees on the run folder's name (and
    tells rank 0 where every rank runs: ``place`` is this process's)."""
    rates = StepRates(
        tokens_per_sample=config.tokens_per_sample,
        flops_per_sample=config.flops_per_sample,
        peak_tflops=config.peak_tflops,
    )
    local = LocalSteps(rates, NonFiniteCounter())
    plan = RoutePlan(
        config,
        collective,
        rank=rank,
        world_size=world_size,
        place=place,
        reductions=reductions,
        loss_ranks=loss_ranks,
        local=local,
    )
    session = RunSession(
        config,
        target,
        rank=rank,
        world_size=world_size,
        plan=plan,
        resume=resume,
        total_steps=total_steps,
        run_info=run_info,
        local=local,
    )
    # Started once the run folder is claimed (nothing to stop if claiming fails).
    telemetry = session.telemetry = open_telemetry(
        config.hardware, session.logdir, rank=rank, record=session.record
    )
    if telemetry is not None:
        if plan.aggregator is not None:  # the interval's last step, on every rank
            plan.aggregator.telemetry = telemetry
        else:
            local.telemetry = telemetry
    return session, plan.open(session.pipeline, rates, session.record)


class RunSession:
    """The run folder this process writes, its ``run.json`` and its hyperparameters.

    Args:
        config: the monitor's config.
        target: the log folder asked for (made absolute; a run folder is claimed in it
            or, with ``run_name``, named inside it).
        rank, world_size: this process's place in the job.
        plan: the route the steps will take (its ranks agree on a new folder's name, and
            learn each other's places: node, device).
        resume: continue the run already in ``target`` (see :class:`Monitor`).
        total_steps, run_info: for the progress display and ``run.json``.
        local: this rank's derivation: its rates (FLOPs settings; the MindFormers view
            reads them) and its count of non-finite values, which ``run.json`` records.
    """

    def __init__(
        self,
        config: MonitorConfig,
        target: PathLike,
        *,
        rank: int,
        world_size: int,
        plan: RoutePlan,
        resume: bool,
        total_steps: Optional[int],
        run_info: Optional[Mapping[str, Any]],
        local: LocalSteps,
    ) -> None:
        cfg = self.config = config
        self.rank, self.world_size = rank, world_size
        self.rates, self.counter = local.rates, local.counter
        previous: Optional[Path] = None
        folder = absolute_logdir(target)
        if cfg.run_name:
            named = {key: cfg.hparams[key] for key in cfg.name_hparams}
            self.logdir, self.own_run_folder = new_run_dir(
                folder, cfg.run_name, named, rank=rank, world_size=world_size, agree=plan.agree
            )
        else:
            try:
                claim = claim_run_dir(
                    folder, resume=resume, rank=rank, world_size=world_size, agree=plan.agree
                )
            except OSError as exc:
                raise LogDirError(
                    f"log folder '{folder}' holds an earlier run and no new folder could be "
                    f"made next to it ({exc}). Pass another logdir, or resume_step=N to "
                    "continue that run."
                ) from exc
            self.logdir, self.own_run_folder = claim.folder, claim.own_run_folder
            previous = claim.previous
            if previous is not None:
                run_info = {**(run_info or {}), "previous_run": str(previous)}
        self.outputs = open_outputs(
            cfg,
            self.logdir,
            rank=rank,
            world_size=world_size,
            reduced=plan.reduced,
            own_run_folder=self.own_run_folder,
            total_steps=total_steps,
            run_info=run_info,
            local=local,
            places=plan.places,
        )
        self.pipeline: Pipeline = self.outputs.pipeline
        self.run = self.outputs.run
        if previous is not None and self.run is not None and rank == 0:
            link_runs(previous, self.logdir)
        self.hparams: dict[str, HParamValue] = {}
        self.hparams_written = False
        self._start_time = time.time()
        self.telemetry: Optional[HardwareTelemetry] = None  # open_run starts it

    @property
    def writes_shared(self) -> bool:
        """Whether this rank writes the values that are the same on every rank."""
        return self.pipeline.writes_main

    def write_config_text(self) -> None:
        """The effective config as TensorBoard text (``mindwatch/config``), once."""
        if self.run is not None and self.writes_shared:
            import_text_support()  # here, not on a background thread at exit
            text = config_markdown(self.run.data["config"])
            self.pipeline.item(Text("mindwatch/config", text, 0))

    def record(self, **fields: Any) -> None:
        """Add ``fields`` to ``run.json`` now (on the rank that writes it); a rank that
        writes only its own folder keeps its hardware facts there (``rank.json``)."""
        if self.run is not None:
            self.run.update(**fields)
            self.run.write()
        elif "hardware" in fields and self.outputs.rank_tb is not None:
            folder = self.outputs.rank_tb.writer.logdir
            write_rank_file(folder, rank=self.rank, hardware=fields["hardware"])

    # ------------------------------------------------------------ hyperparameters

    def add_hparams(self, flat: Mapping[str, HParamValue]) -> None:
        """More hyperparameters (flattened): in ``run.json`` now, and for TensorBoard
        with the first step (later ones only in ``run.json``, with a warning)."""
        self.hparams.update(flat)
        if self.run is None:
            return
        self.run.update(hparams=dict(self.hparams))
        if self.hparams_written:
            log.warning(
                "mindwatch: hparams %s arrived after the first step; they are in run.json, "
                "but TensorBoard's HPARAMS dashboard keeps the set written first",
                sorted(flat),
            )
            self.run.write()

    def write_hparams(self) -> None:
        """At the first step: the hyperparameters collected so far, for TensorBoard."""
        self.hparams_written = True
        if self.hparams and self.writes_shared and self.run is not None:
            values = hparams_session_values(self.hparams, start_time_secs=self._start_time)
            self.pipeline.item(SummaryValues(0, values))
            self.run.write()

    # ------------------------------------------------------------ FLOPs facts

    def record_flops(self, **facts: Any) -> None:
        """Add FLOPs facts (count, peak, their sources) to ``run.json``'s ``flops``."""
        info = self.run.data.get("flops") if self.run is not None else None
        self.record(flops={**(dict(info) if isinstance(info, Mapping) else {}), **facts})

    # ------------------------------------------------------------ the end

    def end(self, error: object, last_step: Optional[int]) -> str:
        """Write the end of the HPARAMS session and return how the run ended:
        ``failed`` (an error), ``terminated`` (SIGTERM closed it) or ``finished``."""
        if not self.hparams_written:
            self.write_hparams()
        if self.hparams and self.writes_shared:
            ok = not lifecycle.signal_received and error is None
            end = hparams_session_end_values(ok, time.time())
            self.pipeline.item(SummaryValues(last_step or 0, end))
        if error is not None:
            return "failed"
        return "terminated" if lifecycle.signal_received else "finished"

    def close(
        self,
        route: StepRoute,
        timeout: Optional[float],
        *,
        communicate: bool,
        error: object,
        nonfinite: Callable[[], dict[str, int]],
        last_step: Optional[int],
        **counts: Any,
    ) -> None:
        """End the run: the steps still on ``route`` first, then the records that end
        it, the alerts still waiting for the training loop (written as they are: nobody
        will keep a checkpoint now), the files, the notifications, and ``run.json``
        with its status, the ``nonfinite`` counts and ``counts``. ``timeout`` bounds the
        whole close (exit and SIGTERM pass one: a hung disk must not keep a finished job
        alive), shared by its stages."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> Optional[float]:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        if self.telemetry is not None:
            self.telemetry.close()  # its latest sample still joins the last steps
        route.close(communicate=communicate, timeout=left())
        status = self.end(error, last_step)
        self.pipeline.sync(left())
        for control in route.take().controls:
            if control.alert is not None:
                self.pipeline.alert(control.alert)
        self.pipeline.item(RunStatus(status), BOTH)  # the exporter's
        self.pipeline.close(left())
        self.pipeline.close_notifiers(left())
        found = nonfinite()
        self.outputs.finish_run(
            status, error=error, last_step=last_step, nonfinite=found, **counts, **route.summary()
        )
        if found:
            log.warning(
                "mindwatch: non-finite values were logged: %s",
                ", ".join(f"{tag} x{n}" for tag, n in sorted(found.items())),
            )

    # ------------------------------------------------------------ files

    def writers(self) -> list[EventFileWriter]:
        return self.outputs.writers()

    @property
    def rank_logdir(self) -> Optional[Path]:
        return self.outputs.rank_logdir()
