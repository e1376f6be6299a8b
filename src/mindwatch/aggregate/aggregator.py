"""``Aggregator``: buffer each rank's steps, reduce them across ranks in bulk, write them.

On the training thread a step costs one list append (:meth:`Aggregator.add`). Every
*interval* steps (:meth:`Aggregator.step_end`) the buffered steps go to the collective
thread, where they get their local derived values (``prepare``: step time,
throughput, ...: each rank's from its own clock), are reduced in four all-reduces whose
size does not grow with the world (:mod:`mindwatch.aggregate.allreduce`), and rank 0
emits one point per step and metric (float32 precision), reduced as the metric
declares (:mod:`mindwatch.aggregate.reductions`), plus the spread across ranks, into
its :class:`ReducedOutput` (the pipeline's ``MAIN`` route). With per-rank output, every
rank also emits its own values (``RANK``).

The interval is the same on every rank by construction: it is fixed in the config, or
(``auto``) agreed in the reduction itself (a max), every rank proposing the interval that keeps
its measured cost of a reduction under :data:`BUDGET` of its step time and all taking
the largest proposal. Collectives therefore happen at the same steps everywhere.

Failure never reaches training: a reduction that times out, raises, or returns data
that is not mindwatch's (another collective, or a peer at another round) makes the
aggregator write every rank's local values from then on (rank 0's in the global run),
warn once with the reason, and tell the output (``failed``; the monitor reads
:attr:`Aggregator.failure` for ``run.json``). It never issues another collective after
that.

Stopping is a value too: a rank asks (:meth:`Aggregator.request_stop`, on the training
thread); the request rides in the first all-reduce of the next reduction, and every
rank reads the agreement from that same reduction (:attr:`Aggregator.stop_agreed`, set
on the training thread when the reduction returns). So every rank stops at the same
step. The compute micro-benchmark is agreed the same way
(:meth:`Aggregator.request_benchmark`, :meth:`Aggregator.take_benchmark`): every rank
runs it right after the same reduction, whichever rank's clock said it was due.

Forensics ride the same way (:meth:`Aggregator.request_forensics`, from rank 0's
rules): the step travels in the next reduction's header, and right after that
reduction every rank puts its own analysis of that step (:attr:`Aggregator.forensics`,
a fixed-size slot: :mod:`mindwatch.forensics.exchange`) into one all-gather; rank 0
hands every rank's slot to its output (``gathered``). Steps without an alert pay
nothing; an alert pays one all-gather of a few hundred floats per rank.

At start (:meth:`Aggregator.agree_on_start`) one all-gather gives every rank rank 0's
new run folder and every rank's place (node, device: :mod:`mindwatch.aggregate.startup`);
it is the only collective whose size grows with the world.

The timeout only tells a dead or hung peer from a live one. It must be longer than any
pause one rank can take between two steps while the others wait (an evaluation or a
checkpoint on one rank only): a rank that gives up while its peers later complete the
same reduction leaves them reducing alone, and their next collective could pair with
something else. Data-parallel training itself cannot outlive such a pause longer than
the framework's own collective timeout, which is why the default is generous.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Union

import numpy as np
import numpy.typing as npt

from mindwatch.aggregate.allreduce import SAMPLES, TOKENS, Reduced, finish, layout_size, reduce_all
from mindwatch.aggregate.collective import (
    AggregationError,
    Collective,
    CollectiveGuard,
)
from mindwatch.aggregate.reductions import ReductionTable
from mindwatch.aggregate.startup import read_start, start_vector
from mindwatch.common.waits import finite_seconds
from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig, ReduceKind
from mindwatch.forensics.exchange import SLOT
from mindwatch.metrics.steps import Logged, Row, Telemetry
from mindwatch.run.ranks import RankPlace

__all__ = ["BUDGET", "START_TIMEOUT", "Aggregator", "ReducedOutput"]

log = logging.getLogger(__name__)

Floats = npt.NDArray[np.float64]
Values = list[tuple[str, float]]
MAIN, RANK = 0, 1  # ReducedOutput routes: the global run, this rank's own folder


class ReducedOutput(Protocol):
    """Where reduced steps go (the monitor's pipeline)."""

    def step(
        self, route: int, step: int, values: Values, wall: float, samples: Optional[float]
    ) -> None: ...

    def failed(self, step: int, reason: str) -> None: ...

    def gathered(self, step: int, slots: npt.NDArray[np.float64]) -> None:
        """Every rank's forensics slot of ``step`` (rank 0): ``(world, SLOT)``."""


BUDGET = 0.005  # auto interval: a reduction may cost this share of the step time
AUTO_START = 10  # auto interval before anything is measured
AUTO_MAX = 200  # auto interval cap: the global curve lags at most this many steps
START_TIMEOUT = 60.0  # the start-up agreement waits at least this for the other ranks
_START_CAPACITY_TAGS = 16
# Longest wait for the collective thread to hand reduced steps over: local work (never a
# collective: a thread stuck in one is not waited for), so not the aggregate timeout.
_HANDOVER_WAIT = 60.0


@dataclass
class _Reduced:
    reduced: Reduced
    tags: list[str]
    rows: list[Row]
    interval: int
    stop: bool
    bench: bool
    gathered: Optional[tuple[int, npt.NDArray[np.float64]]] = None


class _Prepared:
    """One interval's steps as logged, prepared once (:meth:`rows`) by whichever thread
    needs them first: the collective thread before the reduction, or, after a failed or
    abandoned one, the training thread writing them locally. A lock keeps the
    preparation single (it counts non-finite values)."""

    def __init__(
        self,
        raw: list[Any],
        prepare: Optional[Callable[[Logged], Row]],
        telemetry: Optional[Callable[[float], Values]] = None,
    ) -> None:
        self._raw = raw
        self._prepare = prepare
        self._telemetry = telemetry
        self._rows: Optional[list[Row]] = None
        self._lock = threading.Lock()

    def rows(self) -> list[Row]:
        with self._lock:
            if self._rows is None:
                prepare = self._prepare
                rows = [prepare(r) for r in self._raw] if prepare is not None else self._raw
                telemetry = self._telemetry
                if telemetry is not None and rows:
                    extra = telemetry(rows[-1][1])
                    if extra:
                        step, wall, values, samples, tokens, more = rows[-1]
                        rows[-1] = (step, wall, values + extra, samples, tokens, more)
                self._rows = rows
            return self._rows


class Aggregator:
    """Reduce buffered steps across ranks every ``every`` steps.

    Args:
        collective: the framework's collectives (all-reduce; all-gather at start).
        table: how each tag is reduced.
        every: steps between reductions, or ``"auto"``.
        timeout: seconds one reduction may wait for the other ranks before it is
            abandoned (see the module's notes).
        prepare: a step as logged -> its row with this rank's derived values (applied
            once per step, on the collective thread, before the reduction; on the calling
            thread only when the steps are written without a collective).
        output: where steps go (see :meth:`connect`; None: nowhere yet).
        telemetry: this rank's latest hardware sample (``hw/...`` values), added to the
            last step of every interval. Every rank reduces at the same steps, so every
            rank's sample is present at the same step and the spread and the outlier
            rank cover all ranks (a per-rank "a new sample arrived" would not: the
            samplers tick at different moments). One point per interval.
        per_rank: emit this rank's own values too (``RANK``); after a failure a rank
            other than 0 emits them anyway (they would be lost otherwise).
    """

    def __init__(
        self,
        collective: Collective,
        table: ReductionTable,
        *,
        every: Union[int, str] = "auto",
        timeout: float = 300.0,
        prepare: Optional[Callable[[Logged], Row]] = None,
        output: Optional[ReducedOutput] = None,
        per_rank: bool = False,
        telemetry: Optional[Telemetry] = None,
    ) -> None:
        self.collective = collective
        self.rank = int(collective.rank)
        self.world_size = int(collective.world_size)
        self.table = table
        self.auto = every == "auto"
        self.every = AUTO_START if self.auto else int(every)
        if self.every < 1:
            raise ValueError(f"every must be >= 1 or 'auto', got {every!r}")
        self.timeout = finite_seconds("timeout", timeout, positive=True)
        self._prepare = prepare
        self._output = output
        self._per_rank = per_rank
        self.telemetry = telemetry
        self._guard = CollectiveGuard()
        self._rows: list[Any] = []  # Logged steps (Rows without a ``prepare``)
        self._last_flush: Optional[int] = None
        self._round = 0  # reductions issued, the same count on every rank
        self._handed_over = False  # a reduction's writing may still be under way
        # Room for a typical interval; a rank that needs more says so and all resend.
        self._capacity = layout_size(min(self.every, 2 * AUTO_START), _START_CAPACITY_TAGS)
        self._cost: Optional[float] = None  # seconds per reduction, smoothed
        self._step_secs: Optional[float] = None
        self.reductions = 0
        self.last_reduced_step: Optional[int] = None
        self.failure: Optional[str] = None
        self.failed_at: Optional[int] = None
        # Stopping: a rank asks (an alert's action); every rank learns it in the same
        # reduction and stops at the same step.
        self.stop_asked = False
        self.stop_agreed = False
        self.bench_asked = False
        self._bench_agreed = False
        # Forensics: steps rank 0's rules asked every rank about (one per reduction), and
        # this rank's slot of a step (None: zeros, this rank has no recorder).
        self._forensics_asked: deque[int] = deque(maxlen=64)
        self.forensics: Optional[Callable[[int], npt.NDArray[np.float64]]] = None
        # Sees this rank's local values of every step, as prepared (the flight recorder).
        self.observe: Optional[Callable[[int, Values], None]] = None
        self._warn = WarnOnce(log)

    # ---------------------------------------------------------------- training thread

    @property
    def reducing(self) -> bool:
        return self.failure is None

    def request_stop(self) -> None:
        """Ask every rank to stop training; they all learn it at the next reduction."""
        self.stop_asked = True

    def request_benchmark(self) -> None:
        """Ask every rank to run the compute micro-benchmark after the next reduction."""
        self.bench_asked = True

    def request_forensics(self, step: int) -> None:
        """Ask every rank for its forensics of ``step`` at the next reduction (rank 0's
        rules; any thread: a deque append). Two alerts of one step ask once."""
        if int(step) not in self._forensics_asked:
            self._forensics_asked.append(int(step))

    def take_benchmark(self) -> bool:
        """Whether the reduction that just returned agreed on the micro-benchmark (once:
        the same answer on every rank, at the same step)."""
        agreed, self._bench_agreed = self._bench_agreed, False
        return agreed

    @classmethod
    def for_config(
        cls,
        collective: Collective,
        config: MonitorConfig,
        *,
        declared: Optional[Mapping[str, ReduceKind]] = None,
        loss_ranks: Optional[Sequence[int]] = None,
        prepare: Optional[Callable[[Logged], Row]] = None,
    ) -> Aggregator:
        """An aggregator as ``config`` sets it up (interval, timeout, per-rank output,
        declared reductions, the ranks the loss comes from)."""
        world = int(collective.world_size)
        if config.loss_source_rank is not None:
            loss_ranks = (config.loss_source_rank,)
        outside = [r for r in loss_ranks or () if not -world <= r < world]
        if outside:
            raise ValueError(
                f"mindwatch: loss_source_rank / loss_ranks {outside} is not a rank of this "
                f"job of {world} ranks; use 0..{world - 1}, or -1 for the last rank"
            )
        reductions = {**config.reductions, **(declared or {})}
        return cls(
            collective,
            ReductionTable(reductions, loss_ranks=loss_ranks),
            every=config.aggregate_every,
            timeout=config.aggregate_timeout,
            prepare=prepare,
            # A rank's own values: for <run>/rank_<r>/, or for its Prometheus exporter.
            per_rank=config.per_rank or bool(config.prometheus and config.prometheus.per_rank),
        )

    def connect(self, output: ReducedOutput) -> None:
        """Where steps go from now on (the monitor's pipeline, built after the run
        folder was agreed with :meth:`agree_on_start`)."""
        self._output = output

    def add(self, logged: Logged) -> None:
        """Buffer one step as logged (the training thread's whole cost on most steps)."""
        self._rows.append(logged)

    def due(self, step: int) -> bool:
        """Whether :meth:`step_end` at ``step`` reduces (the same answer on every rank);
        after a failure every step is written at once (nothing to wait for)."""
        if not self.reducing:
            return True
        last = self._last_flush
        if last is None:
            last = 0 if step > 0 else step - 1
        return step - last >= self.every or step < last

    def step_end(self, step: int) -> None:
        """Reduce now if ``step`` completes an interval (same decision on every rank)."""
        if self._last_flush is None:
            self._last_flush = 0 if step > 0 else step - 1
        if self.due(step):
            self._last_flush = step
            self.flush(step)

    def drop_from(self, step: int) -> None:
        """Forget buffered steps at or after ``step`` (a resume voids them) and wait until
        what was reduced before is written, so a purge marker written next comes after
        it. Local only: no collective."""
        self._rows = [row for row in self._rows if row[0] < step]
        self.sync()

    def flush(self, step: Optional[int] = None, *, communicate: bool = True) -> None:
        """Reduce and write what is buffered; ``communicate=False`` writes local values.

        Use ``communicate=False`` when the other ranks may not be flushing too (an
        exception unwinding one rank, a signal): a collective there could wait for
        peers that never come.
        """
        raw, self._rows = self._rows, []
        reduces = communicate and self.reducing
        telemetry = self.telemetry
        # Reduced: the latest sample on every rank's last step of the interval; written
        # locally (after a failure every step is): one point per sampling period.
        extra: Optional[Callable[[float], Values]] = None
        if telemetry is not None:
            extra = telemetry.due if not reduces else lambda wall: telemetry.latest()
        pending = _Prepared(raw, self._prepare, extra)
        at = step if step is not None else (raw[-1][0] if raw else -1)
        if not reduces:
            if self._handed_over:  # earlier reduced steps first: files stay in step order
                self.sync(_HANDOVER_WAIT)
                self._handed_over = self.reducing  # nothing more will be, after a failure
            self._write_local_values(pending.rows())
            return
        proposal = self._proposal(raw)  # steps and wall times only: as logged
        stop, bench = self.stop_asked, self.bench_asked
        asked = self._forensics_asked[0] if self._forensics_asked and self.rank == 0 else None
        round_no = self._round
        self._round += 1
        started = time.perf_counter()
        self._handed_over = True
        try:
            done = self._guard.call(
                lambda: self._reduce(
                    pending.rows(), proposal, round_no, stop, bench, forensics=asked
                ),
                self.timeout,
                after=self._write,
            )
        except AggregationError as exc:
            self._fail(at, str(exc))
            self.sync(_HANDOVER_WAIT)  # earlier reduced steps first
            self._handed_over = False
            self._write_local_values(pending.rows())
            return
        cost = time.perf_counter() - started
        if done.stop:
            self.stop_agreed = True  # every rank reads it from this same reduction
        if done.bench:
            self.bench_asked, self._bench_agreed = False, True
        if asked is not None and self._forensics_asked and self._forensics_asked[0] == asked:
            self._forensics_asked.popleft()
        self.reductions += 1
        if raw:
            self.last_reduced_step = raw[-1][0]
        if self.reductions > 1:  # the first one also waits for the slowest rank to start
            self._cost = cost if self._cost is None else 0.7 * self._cost + 0.3 * cost
        if self.auto:
            self.every = done.interval

    def sync(self, timeout: Optional[float] = None) -> bool:
        """Wait until reduced values of past flushes are handed to the writers."""
        return self._guard.sync(self.timeout if timeout is None else timeout)

    def close(self, *, communicate: bool = True, timeout: Optional[float] = None) -> None:
        """Reduce and write the last buffered steps; wait until they are written.

        Every rank that logged a step takes part in the final reduction (even with
        nothing left to send), so the ranks' collectives stay paired. Reduced steps the
        collective thread is still handing over are waited for (up to ``timeout``; by
        default :data:`_HANDOVER_WAIT`): handing over is local work, never a collective.
        """
        if self._last_flush is not None or self._rows:
            self.flush(communicate=communicate)
        self.sync(_HANDOVER_WAIT if timeout is None else timeout)
        self._guard.stop()

    def agree_on_start(self, text: str, place: RankPlace) -> tuple[str, list[RankPlace]]:
        """Rank 0's ``text`` (e.g. a new run folder's name) and every rank's place, on
        every rank: one all-gather (:mod:`mindwatch.aggregate.startup`).

        It waits ``timeout`` but at least :data:`START_TIMEOUT`: ranks reach this point
        when each has made its Monitor, after imports, loading data or compiling that
        take each rank its own time (a cold start once kept a rank 4 s behind; with
        ``aggregate_timeout: 3`` the ranks then wrote apart). Raises
        :class:`AggregationError` if the ranks do not answer in time or send something
        else; reductions are then off, as after any failed collective.
        """
        try:
            vector = start_vector(self.rank, text, place)
        except ValueError as exc:
            raise AggregationError(str(exc)) from None
        world = self.world_size

        def gather() -> tuple[str, list[RankPlace]]:
            return read_start(self.collective.all_gather(vector), world)

        self._round += 1  # every rank counts this collective too
        try:
            return self._guard.call(gather, max(self.timeout, START_TIMEOUT))
        except AggregationError as exc:
            self.failure, self.failed_at = str(exc), 0  # the caller reports it
            raise

    def _proposal(self, rows: Sequence[Union[Logged, Row]]) -> int:
        """The interval this rank would like next: cost under BUDGET of the step time."""
        if not self.auto:
            return self.every
        if len(rows) >= 2 and rows[-1][0] > rows[0][0]:
            secs = (rows[-1][1] - rows[0][1]) / (rows[-1][0] - rows[0][0])
            if secs > 0:
                prev = self._step_secs
                self._step_secs = secs if prev is None else 0.7 * prev + 0.3 * secs
        if self._cost is None or not self._step_secs:
            return self.every
        wanted = math.ceil(self._cost / (BUDGET * self._step_secs))
        return max(1, min(AUTO_MAX, wanted))

    def _fail(self, step: int, reason: str) -> None:
        if self.failure is not None:
            return
        self.failure = reason
        self.failed_at = step
        log.warning(
            "mindwatch: rank %d: the cross-rank reduction at step %d failed: %s. From now "
            "on every rank writes its own values (rank 0's in the global run); training "
            "goes on. If this rank is the only one running mindwatch, give the callback to "
            "every rank, or set aggregate_every: 0.",
            self.rank,
            step,
            reason,
        )
        if self._output is not None:
            self._output.failed(step, reason)

    def summary(self) -> dict[str, Any]:
        """What ``run.json`` says about the reductions (``aggregation``)."""
        summary: dict[str, Any] = {
            "reductions": self.reductions,
            "interval": self.every,
            # Later steps in the global run are rank 0's own values.
            "last_reduced_step": self.last_reduced_step,
        }
        if self.failure is not None:
            summary["failed"] = self.failure
            summary["failed_at_step"] = self.failed_at
        return summary

    # ---------------------------------------------------------------- collective thread

    def _reduce(
        self,
        rows: list[Row],
        proposal: int,
        round_no: int,
        stop: bool,
        bench: bool,
        *,
        forensics: Optional[int] = None,
    ) -> _Reduced:
        """The four all-reduces (:mod:`mindwatch.aggregate.allreduce`); the agreed interval."""
        self._observe(rows)
        tags: list[str] = []
        seen: set[str] = set()
        packed: list[tuple[int, dict[str, float]]] = []
        table = self.table
        for step, _, values, samples, tokens, _ in rows:
            row = {tag: value for tag, value in values if table[tag].communicated}
            if samples is not None:
                row[SAMPLES] = samples
            if tokens is not None:
                row[TOKENS] = tokens
            for tag in row:
                if tag not in seen:
                    seen.add(tag)
                    tags.append(tag)
            packed.append((step, row))
        reduced, self._capacity = reduce_all(
            self.collective.all_reduce,
            rank=self.rank,
            world=self.world_size,
            round_no=round_no,
            capacity=self._capacity,
            proposal=proposal,
            stop=stop,
            bench=bench,
            forensics=forensics,
            rows=packed,
            tags=tags,
            table=table,
        )
        layout = reduced.layout
        gathered = None
        if layout.forensics is not None:  # every rank reads the same header: all gather
            slots = self.collective.all_gather(self._forensics_slot(layout.forensics))
            gathered = (layout.forensics, np.asarray(slots, dtype=np.float64))
        return _Reduced(reduced, tags, rows, layout.proposal, layout.stop, layout.bench, gathered)

    def _forensics_slot(self, step: int) -> npt.NDArray[np.float64]:
        """This rank's slot of ``step``; zeros when it has none or its analysis fails
        (the all-gather must go ahead on every rank: a rank that skipped it would
        leave the others waiting)."""
        make = self.forensics
        if make is not None:
            try:
                slot = np.asarray(make(step), dtype=np.float64)
                if slot.shape == (SLOT,):
                    return slot
            except Exception as exc:  # a bug in forensics must not break the reduction
                self._warn("forensics", "mindwatch: forensics of step %d failed: %r", step, exc)
        return np.zeros(SLOT)

    def _write(self, pending: _Reduced) -> None:
        """After a successful reduction (collective thread): emit global and local points."""
        output = self._output
        try:
            steps = self._global_values(pending) if self.rank == 0 else []
        except Exception as exc:  # a bug here must not cost the data: write it locally
            self._warn("reduce", "mindwatch: reducing the values failed: %r", exc)
            self._write_local_values(pending.rows)
            return
        if output is not None:
            for step, values, wall, samples in steps:
                output.step(MAIN, step, values, wall, samples)
            if pending.gathered is not None and self.rank == 0:
                output.gathered(*pending.gathered)
        self._write_local(pending.rows)

    def _global_values(self, pending: _Reduced) -> list[tuple[int, Values, float, Optional[float]]]:
        """Rank 0's rows with every communicated metric reduced, plus the spreads."""
        return finish(pending.reduced, pending.rows, pending.tags, self.table)

    def _write_local(self, rows: Sequence[Row]) -> None:
        """This rank's own values of the metrics that differ between ranks (RANK)."""
        output = self._output
        writes = self._per_rank or (self.failure is not None and self.rank != 0)
        if output is None or not writes:
            return
        table = self.table
        for step, wall, values, samples, _, _ in rows:
            mine = [(t, v) for t, v in values if table[t].communicated]
            if mine:
                output.step(RANK, step, mine, wall, samples)

    def _observe(self, rows: Sequence[Row]) -> None:
        observe = self.observe
        if observe is not None:
            try:
                for row in rows:
                    observe(row[0], row[2])
            except Exception as exc:  # the recorder must not cost the reduction
                self._warn("observe", "mindwatch: recording steps failed: %r", exc)

    def _write_local_values(self, rows: Sequence[Row]) -> None:
        """No reduction: rank 0's own values globally, and every rank's in its folder."""
        self._observe(rows)
        output = self._output
        if output is not None and self.rank == 0:
            for step, wall, values, samples, _, _ in rows:
                output.step(MAIN, step, values, wall, samples)
        self._write_local(rows)
