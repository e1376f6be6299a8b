"""``Aggregator``: buffer each rank's steps, reduce them across ranks in bulk, write them.

On the training thread a step costs one list append (:meth:`Aggregator.add`). Every
*interval* steps (:meth:`Aggregator.step_end`) the buffered steps of every rank travel
in one all-gather (:mod:`mindwatch.aggregate.packing`), and rank 0 writes one exact
point per step and metric, reduced as the metric declares
(:mod:`mindwatch.aggregate.reductions`), plus the spread across ranks. With per-rank
output, every rank also writes its own values to its own folder.

The interval is the same on every rank by construction: it is fixed in the config, or
(``auto``) agreed in the gather itself, every rank proposing the interval that keeps
its measured cost of a reduction under :data:`BUDGET` of its step time and all taking
the largest proposal. Collectives therefore happen at the same steps everywhere.

Failure never reaches training: a reduction that times out, raises, or returns data
that is not mindwatch's makes the aggregator write every rank's local values from then
on (rank 0's in the global run), warn once with the reason, and report it through
``on_failure`` (``run.json``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Optional, Union

import numpy as np
import numpy.typing as npt

from mindwatch.aggregate.collective import AggregationError, Collective, CollectiveGuard
from mindwatch.aggregate.packing import (
    MISSING,
    CorruptSliceError,
    is_missing,
    needed,
    pack,
    read_header,
    tag_id,
    unpack,
)
from mindwatch.aggregate.reductions import ReductionTable, reduce_values, spread_tags

__all__ = ["BUDGET", "Aggregator", "Row"]

log = logging.getLogger(__name__)

Floats = npt.NDArray[np.float64]
Values = list[tuple[str, float]]
# (step, wall time, [(tag, value)], samples per step or None, tokens per step or None)
Row = tuple[int, float, Values, Optional[float], Optional[float]]
Emit = Callable[[int, Values, float, Optional[float]], None]

BUDGET = 0.005  # auto interval: a reduction may cost this share of the step time
AUTO_START = 10  # auto interval before anything is measured
AUTO_MAX = 200  # auto interval cap: the global curve lags at most this many steps
_TOKENS, _SAMPLES = "_w/tokens", "_w/samples"  # per-rank weights of 'mean' metrics
_START_CAPACITY_TAGS = 16
_TEXT_BYTES = 4096


@dataclass
class _Gathered:
    gathered: Floats
    tags: list[str]
    rows: list[Row]
    interval: int


class Aggregator:
    """Reduce buffered steps across ranks every ``every`` steps.

    Args:
        collective: the framework's all-gather.
        table: how each tag is reduced.
        every: steps between reductions, or ``"auto"``.
        timeout: seconds one reduction may take before it is abandoned.
        emit_global: writes a step of the global run (rank 0 only; None elsewhere).
        emit_local: writes a step of this rank's own folder (None: no per-rank output).
        on_failure: told ``(step, reason)`` once when reductions stop.
    """

    def __init__(
        self,
        collective: Collective,
        table: ReductionTable,
        *,
        every: Union[int, str] = "auto",
        timeout: float = 60.0,
        emit_global: Optional[Emit] = None,
        emit_local: Optional[Emit] = None,
        on_failure: Optional[Callable[[int, str], None]] = None,
    ) -> None:
        self.collective = collective
        self.rank = int(collective.rank)
        self.world_size = int(collective.world_size)
        self.table = table
        self.auto = every == "auto"
        self.every = AUTO_START if self.auto else int(every)
        if self.every < 1:
            raise ValueError(f"every must be >= 1 or 'auto', got {every!r}")
        self.timeout = float(timeout)
        self._emit_global = emit_global
        self.emit_local = emit_local
        self._on_failure = on_failure
        self._guard = CollectiveGuard()
        self._rows: list[Row] = []
        self._last_flush: Optional[int] = None
        self._capacity = needed(_START_CAPACITY_TAGS, self.every)
        self._cost: Optional[float] = None  # seconds per reduction, smoothed
        self._step_secs: Optional[float] = None
        self._flushes = 0
        self.reductions = 0
        self.last_reduced_step: Optional[int] = None
        self.failure: Optional[str] = None
        self.failed_at: Optional[int] = None
        self._warned_write = False

    # ---------------------------------------------------------------- training thread

    @property
    def reducing(self) -> bool:
        return self.failure is None

    def add(
        self,
        step: int,
        wall: float,
        values: Values,
        samples: Optional[float],
        tokens: Optional[float],
    ) -> None:
        """Buffer one step's values (the training thread's whole cost on most steps)."""
        self._rows.append((step, wall, values, samples, tokens))

    def step_end(self, step: int) -> None:
        """Reduce now if ``step`` completes an interval (same decision on every rank)."""
        last = self._last_flush
        if last is None:
            last = self._last_flush = 0 if step > 0 else step - 1
        if step - last >= self.every or step < last:
            self._last_flush = step
            self.flush(step)

    def flush(self, step: Optional[int] = None, *, communicate: bool = True) -> None:
        """Reduce and write what is buffered; ``communicate=False`` writes local values.

        Use ``communicate=False`` when the other ranks may not be flushing too (an
        exception unwinding one rank, a signal): a collective there could wait for
        peers that never come.
        """
        rows, self._rows = self._rows, []
        at = step if step is not None else (rows[-1][0] if rows else -1)
        if not (communicate and self.reducing):
            self._write_local_values(rows)
            return
        proposal = self._proposal(rows)
        started = time.perf_counter()
        try:
            done = self._guard.call(
                lambda: self._gather(rows, proposal), self.timeout, after=self._write
            )
        except AggregationError as exc:
            self._fail(at, str(exc))
            self._write_local_values(rows)
            return
        cost = time.perf_counter() - started
        self.reductions += 1
        if rows:
            self.last_reduced_step = rows[-1][0]
        self._flushes += 1
        if self._flushes > 1:  # the first one also waits for the slowest rank to start
            self._cost = cost if self._cost is None else 0.7 * self._cost + 0.3 * cost
        if self.auto:
            self.every = done.interval

    def sync(self, timeout: Optional[float] = None) -> bool:
        """Wait until reduced values of past flushes are handed to the writers."""
        return self._guard.sync(self.timeout if timeout is None else timeout)

    def close(self, *, communicate: bool = True, timeout: Optional[float] = None) -> None:
        """Reduce and write the last buffered steps; wait until they are written.

        Every rank that logged a step takes part in the final reduction (even with
        nothing left to send), so the ranks' collectives stay paired.
        """
        if self._last_flush is None and not self._rows:
            return
        self.flush(communicate=communicate)
        if self.reducing:
            self.sync(timeout)

    def agree_on_text(self, text: str) -> str:
        """Rank 0's ``text`` on every rank (one all-gather; e.g. a new run folder's name).

        Raises :class:`AggregationError` if the ranks do not answer in time; reductions
        are then off, as after any failed collective.
        """
        data = text.encode("utf-8")
        if len(data) > _TEXT_BYTES:
            raise AggregationError(f"text of {len(data)} bytes is longer than {_TEXT_BYTES}")
        vector = np.zeros(_TEXT_BYTES + 1)
        vector[0] = len(data)
        vector[1 : len(data) + 1] = np.frombuffer(data, dtype=np.uint8)

        def gather() -> str:
            got = np.asarray(self.collective.all_gather(vector), dtype=np.float64)
            if got.shape != (self.world_size, _TEXT_BYTES + 1) or not 0 <= got[0, 0] <= _TEXT_BYTES:
                raise CorruptSliceError(f"all_gather returned {got.shape} for {vector.shape}")
            size = int(got[0, 0])
            return bytes(got[0, 1 : size + 1].astype(np.uint8)).decode("utf-8")

        try:
            return self._guard.call(gather, self.timeout)
        except AggregationError as exc:
            self._fail(0, str(exc))
            raise

    def _proposal(self, rows: Sequence[Row]) -> int:
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
        if self._on_failure is not None:
            with contextlib.suppress(Exception):  # run.json writing warns by itself
                self._on_failure(step, reason)

    # ---------------------------------------------------------------- collective thread

    def _gather(self, rows: list[Row], proposal: int) -> _Gathered:
        """Pack, all-gather (twice if a rank needs more room), check; the agreed interval."""
        tags: list[str] = []
        seen: set[str] = set()
        packed_rows: list[dict[str, float]] = []
        table = self.table
        for _, _, values, samples, tokens in rows:
            row = {tag: value for tag, value in values if table[tag].communicated}
            if samples is not None:
                row[_SAMPLES] = samples
            if tokens is not None:
                row[_TOKENS] = tokens
            for tag in row:
                if tag not in seen:
                    seen.add(tag)
                    tags.append(tag)
            packed_rows.append(row)
        steps = [r[0] for r in rows]
        walls = [r[1] for r in rows]
        gathered = self._all_gather(tags, steps, walls, packed_rows, proposal)
        headers = [read_header(gathered, r) for r in range(self.world_size)]
        largest = max(h.needed for h in headers)
        if largest > gathered.shape[1]:  # someone had more to say: everyone resends
            self._capacity = largest + largest // 2
            gathered = self._all_gather(tags, steps, walls, packed_rows, proposal)
        return _Gathered(gathered, tags, rows, max(h.proposal for h in headers))

    def _all_gather(
        self,
        tags: list[str],
        steps: list[int],
        walls: list[float],
        rows: list[dict[str, float]],
        proposal: int,
    ) -> Floats:
        vector = pack(
            self.rank,
            tags=tags,
            steps=steps,
            walls=walls,
            rows=rows,
            capacity=self._capacity,
            proposal=proposal,
        )
        gathered = np.asarray(self.collective.all_gather(vector), dtype=np.float64)
        if gathered.shape != (self.world_size, self._capacity):
            raise CorruptSliceError(
                f"all_gather returned shape {gathered.shape}, expected "
                f"{(self.world_size, self._capacity)}"
            )
        return gathered

    def _write(self, pending: _Gathered) -> None:
        """After a successful gather (collective thread): write global and local points."""
        try:
            if self._emit_global is not None:
                self._write_global(pending)
            if self.emit_local is not None:
                self._write_local(pending.rows)
        except Exception as exc:  # a bug here must not cost the data: write it locally
            if not self._warned_write:
                self._warned_write = True
                log.warning("mindwatch: writing reduced values failed: %r", exc)
            self._write_local_values(pending.rows)

    def _write_global(self, pending: _Gathered) -> None:
        rows, tags = pending.rows, pending.tags
        if not rows:
            return
        world = self.world_size
        steps = [r[0] for r in rows]
        step_index = {s: i for i, s in enumerate(steps)}
        columns = {tag_id(t): j for j, t in enumerate(tags)}
        cube = np.full((world, len(steps), len(tags)), MISSING)
        for rank in range(world):
            part = unpack(pending.gathered, rank)
            if not part.complete or part.values.size == 0:
                continue
            cols = np.array([columns.get(i, -1) for i in part.ids], dtype=np.int64)
            idx = np.array([step_index.get(int(s), -1) for s in part.steps], dtype=np.int64)
            keep_c, keep_r = cols >= 0, idx >= 0
            if keep_c.any() and keep_r.any():
                block = part.values[np.ix_(keep_r, keep_c)]
                cube[rank][np.ix_(idx[keep_r], cols[keep_c])] = block
        present = ~is_missing(cube)
        weights = None
        for name in (_TOKENS, _SAMPLES):
            if name in tags:
                j = tags.index(name)
                weights = np.where(present[:, :, j], cube[:, :, j], 0.0)
                break
        out: list[Values] = [[] for _ in rows]
        for j, tag in enumerate(tags):
            if tag in (_TOKENS, _SAMPLES):
                continue
            reduction = self.table[tag]
            result, spread = reduce_values(cube[:, :, j], present[:, :, j], reduction, weights)
            contributed = present[:, :, j].any(axis=0)
            names = spread_tags(tag)
            for i in np.flatnonzero(contributed).tolist():
                if reduction.kind != "per_rank":
                    out[i].append((tag, float(result[i])))
                if spread is not None:
                    out[i].extend(zip(names, spread[:, i].tolist()))
        for k, (step, wall, values, samples, _) in enumerate(rows):
            once = [(t, v) for t, v in values if not self.table[t].communicated]
            emitted = once + out[k]
            if emitted:
                self._emit_global(step, emitted, wall, samples)  # type: ignore[misc]

    def _write_local(self, rows: Sequence[Row]) -> None:
        emit = self.emit_local
        assert emit is not None
        table = self.table
        for step, wall, values, samples, _ in rows:
            mine = [(t, v) for t, v in values if table[t].communicated]
            if mine:
                emit(step, mine, wall, samples)

    def _write_local_values(self, rows: Sequence[Row]) -> None:
        """No reduction: rank 0's own values globally, and every rank's in its folder."""
        if self._emit_global is not None:
            for step, wall, values, samples, _ in rows:
                self._emit_global(step, values, wall, samples)
        if self.emit_local is not None:
            self._write_local(rows)
