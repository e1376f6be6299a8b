"""How each metric combines across data-parallel ranks, and the maths that does it.

Every tag has a :class:`Reduction`. Built-in metrics declare theirs here; users declare
their own in the config (``reductions:``) or in ``Monitor.log_step(..., reduce=...)``:

==========  ===========================================================================
kind        global value (written under the metric's own tag by rank 0)
==========  ===========================================================================
mean        mean over ranks, weighted by each rank's tokens (else samples) of that step
            when ``log_step`` got them: the loss of the whole global batch
sum         sum over ranks (samples, tokens, throughput of the job)
max / min   the extreme over ranks (step time: the job is as slow as its slowest rank)
once        already global (lr, the grad norm after the gradient reducer): rank 0's
            value, never communicated
per_rank    no global value: only the spread below, and each rank's own folder
==========  ===========================================================================

Every kind except ``once`` also gets its spread across the contributing ranks written
globally:
``ranks/<name>_min``, ``_max``, ``_mean``, ``_std`` and ``_argmax``, the rank with the
largest value (a rank whose value is NaN or infinite counts as the largest: that is the
rank to look at). ``<name>`` is the tag without its first namespace
(``train/loss`` -> ``loss``, ``perf/step_time_ms`` -> ``step_time_ms``).

The argmax compares the values at float32 precision (:func:`outlier_key`) and a tie goes
to the *lowest* rank: a loss equal on every rank names rank 0, and values that differ
only below float32's precision (which is all TensorBoard stores, and all MindSpore's CPU
collectives carry) tie. The all-reduce path (:mod:`mindwatch.aggregate.allreduce`)
uses the same key and the same rule, so ``mindwatch convert`` over per-rank logs and the
job's own reduction name the same rank.

A reduction may be limited to some ranks (``ranks``): under pipeline parallelism only
the last stage computes the loss, and the others report zeros.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt

from mindwatch.config import ReduceKind
from mindwatch.metrics.tags import TAGS, tag_for
from mindwatch.rules import straggler

__all__ = [
    "BUILTIN_REDUCTIONS",
    "Reduction",
    "ReductionTable",
    "outlier_key",
    "reduce_values",
    "spread_tags",
]

Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

KINDS: tuple[ReduceKind, ...] = ("mean", "sum", "max", "min", "once", "per_rank")
_F32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class Reduction:
    """How one metric combines across ranks; ``ranks`` limits which ranks contribute."""

    kind: ReduceKind
    ranks: Optional[tuple[int, ...]] = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown reduction {self.kind!r}; use one of {', '.join(KINDS)}")

    @property
    def communicated(self) -> bool:
        """Whether other ranks' values are needed (everything but ``once``)."""
        return self.kind != "once"


BUILTIN_REDUCTIONS: dict[str, Reduction] = {
    TAGS["loss"]: Reduction("mean"),
    TAGS["lr"]: Reduction("once"),
    TAGS["grad_norm"]: Reduction("once"),  # computed after the gradient AllReduce
    "train/epoch": Reduction("once"),
    "train/param_norm": Reduction("once"),
    "train/loss_scale": Reduction("once"),
    "train/overflow": Reduction("max"),  # any rank overflowing skips the update
    TAGS["step_time_ms"]: Reduction("max"),
    TAGS["compute_ms"]: Reduction("max"),
    TAGS["data_wait_ms"]: Reduction("max"),
    TAGS["samples_per_s"]: Reduction("sum"),
    TAGS["tokens_per_s"]: Reduction("sum"),
    TAGS["tflops_per_device"]: Reduction("mean"),  # per device: the job's average
    TAGS["mfu"]: Reduction("mean"),
    straggler.INPUT_WAIT: Reduction("max"),  # its spread names the slow rank
    straggler.STEP: Reduction("max"),
    straggler.BENCH: Reduction("max"),  # the compute micro-benchmark: slowest rank
    straggler.BENCH_RANKS: Reduction("once"),  # how many ranks ran it (rank 0 knows)
    straggler.INDIVIDUAL: Reduction("min"),
    "perf/host_peak_rss_mb": Reduction("per_rank"),
    "perf/device_peak_memory_mb": Reduction("per_rank"),
    # Hardware telemetry (mindwatch.hardware): the job is as hot, as full and as leaky as
    # its worst rank, and that rank is the one to name (argmax); utilisation and the
    # process's CPU are the job's average, the host's free memory its scarcest.
    "hw/cpu_percent": Reduction("mean"),
    "hw/rss_mb": Reduction("max"),
    "hw/host_mem_available_mb": Reduction("min"),
    "hw/disk_read_mb_s": Reduction("max"),
    "hw/disk_write_mb_s": Reduction("max"),
    "hw/net_recv_mb_s": Reduction("max"),
    "hw/net_sent_mb_s": Reduction("max"),
    "hw/rss_growth_mb_per_min": Reduction("max"),
    "hw/rss_rising_share": Reduction("max"),
    "hw/device_mem_allocated_mb": Reduction("max"),
    "hw/device_mem_reserved_mb": Reduction("max"),
    "hw/device_mem_peak_mb": Reduction("max"),
    "hw/npu_aicore_pct": Reduction("mean"),
    "hw/npu_hbm_used_mb": Reduction("max"),
    "hw/npu_hbm_total_mb": Reduction("min"),
    "hw/npu_hbm_used_pct": Reduction("max"),
    "hw/npu_temp_c": Reduction("max"),
    "hw/npu_power_w": Reduction("max"),
    "hw/npu_health": Reduction("max"),  # 0 OK; any rank not OK is the job's state
}
# Tag prefixes whose metrics are the same on every rank (model state after the update).
_ONCE_PREFIXES = ("train/lr/", "layers/", "parameters/", "gradients/", "eval/")


class ReductionTable:
    """Tag -> :class:`Reduction`: the user's declarations, then the built-ins, then mean.

    Args:
        declared: ``{name or tag: kind}`` (a bare name means ``train/<name>``).
        loss_ranks: ranks ``train/loss`` comes from (pipeline parallelism), or None.
    """

    def __init__(
        self,
        declared: Optional[Mapping[str, ReduceKind]] = None,
        *,
        loss_ranks: Optional[Sequence[int]] = None,
    ) -> None:
        self._declared: dict[str, Reduction] = {}
        self._cache: dict[str, Reduction] = {}
        if loss_ranks is not None:
            self._declared[TAGS["loss"]] = Reduction("mean", tuple(loss_ranks))
        for key, kind in (declared or {}).items():
            self.declare(key, kind)

    def declare(self, key: str, kind: ReduceKind) -> None:
        """Declare how ``key`` (a name or a tag) is reduced; later declarations win."""
        tag = tag_for(key)
        previous = self._declared.get(tag)
        if previous is not None and previous.kind == kind:
            return  # log_step(reduce=...) repeats its declaration every step
        ranks = previous.ranks if previous is not None else None
        self._declared[tag] = Reduction(kind, ranks)
        self._cache.pop(tag, None)

    def __getitem__(self, tag: str) -> Reduction:
        found = self._cache.get(tag)
        if found is None:
            found = self._cache[tag] = self._lookup(tag)
        return found

    def _lookup(self, tag: str) -> Reduction:
        if tag in self._declared:
            return self._declared[tag]
        if tag in BUILTIN_REDUCTIONS:
            return BUILTIN_REDUCTIONS[tag]
        if tag.startswith(_ONCE_PREFIXES):
            return Reduction("once")
        return Reduction("mean")


def spread_tags(tag: str) -> tuple[str, str, str, str, str]:
    """``ranks/<name>_min``, ``_max``, ``_mean``, ``_std``, ``_argmax`` for ``tag``."""
    name = tag.split("/", 1)[1] if "/" in tag else tag
    base = f"ranks/{name}"
    return (f"{base}_min", f"{base}_max", f"{base}_mean", f"{base}_std", f"{base}_argmax")


def reduce_values(
    values: Floats,
    present: Mask,
    reduction: Reduction,
    weights: Optional[Floats] = None,
) -> tuple[Floats, Optional[Floats], Mask]:
    """Reduce one metric over ranks, for many steps at once.

    Args:
        values: ``(world, steps)`` values; entries where ``present`` is False are ignored.
        present: ``(world, steps)``: the rank logged the metric at that step.
        reduction: the metric's reduction.
        weights: ``(world, steps)`` per-rank weights for ``mean`` (tokens or samples), or
            None; a step where a contributing rank lacks a positive weight is averaged
            unweighted.

    Returns:
        ``(global, spread, counted)``: ``global`` is ``(steps,)`` (all NaN for
        ``per_rank``), ``spread`` is ``(5, steps)`` min/max/mean/std/argmax over the
        contributing ranks, or None for ``once``; ``counted`` marks the steps at which
        at least one contributing rank logged the metric (elsewhere both are NaN).

    NaN and infinities propagate: a rank with a NaN loss makes the global loss NaN
    (the job's update used it), and becomes the ``argmax`` rank.
    """
    world, steps = values.shape
    use = present
    if reduction.ranks is not None:
        chosen = np.zeros(world, dtype=bool)
        for rank in reduction.ranks:
            if -world <= rank < world:
                chosen[rank] = True
        use = present & chosen[:, None]
    none = use.sum(axis=0) == 0
    counted = ~none
    kind = reduction.kind
    if kind == "once":
        first = np.argmax(use, axis=0)
        return np.where(none, np.nan, values[first, np.arange(steps)]), None, counted
    # The spread's min, max and mean are the min, max and (unweighted) mean reductions.
    spread = _spread(values, use)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if kind == "mean":
            result = spread[2]
            if weights is not None:
                usable = use & (weights > 0)
                weighted = (usable == use).all(axis=0) & ~none
                if weighted.any():
                    w = np.where(usable, weights, 0.0)
                    filled = np.where(use, values, 0.0)
                    wmean = (filled * w).sum(axis=0) / np.maximum(w.sum(axis=0), 1e-300)
                    result = np.where(weighted, wmean, result)
        elif kind == "sum":
            result = np.where(none, np.nan, np.where(use, values, 0.0).sum(axis=0))
        elif kind == "max":
            result = spread[1]
        elif kind == "min":
            result = spread[0]
        else:  # per_rank
            result = np.full(steps, np.nan)
    return result, spread, counted


def _nan_if_any(result: Floats, values: Floats, use: Mask) -> Floats:
    """max/min ignore nothing: NaN in any contributing rank makes the result NaN."""
    has_nan = (np.isnan(values) & use).any(axis=0)
    return np.where(has_nan, np.nan, result)


def outlier_key(values: Floats, present: Mask) -> Floats:
    """What ``ranks/<name>_argmax`` ranks the ranks by (see the module docs): +inf for a
    value that is not finite (NaN, +-inf: the rank to look at), else the value rounded to
    float32, clipped to float32's finite range so that no finite value ties with a
    non-finite one; -inf where the rank did not contribute. The argmax is the lowest
    rank holding the largest key."""
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(values)
        clipped = np.clip(np.where(finite, values, 0.0), -_F32_MAX, _F32_MAX)
        key = np.where(finite, clipped.astype(np.float32).astype(np.float64), np.inf)
    out: Floats = np.where(present, key, -np.inf)
    return out


def _spread(values: Floats, present: Mask) -> Floats:
    count = present.sum(axis=0)
    with np.errstate(invalid="ignore", over="ignore"):
        low = np.where(present, values, np.inf).min(axis=0)
        high = np.where(present, values, -np.inf).max(axis=0)
        low = _nan_if_any(low, values, present)
        high = _nan_if_any(high, values, present)
        filled = np.where(present, values, 0.0)
        mean = filled.sum(axis=0) / np.maximum(count, 1)
        dev = np.where(present, values - mean, 0.0)
        std = np.sqrt((dev * dev).sum(axis=0) / np.maximum(count, 1))
        # The outlier rank: a non-finite value first (the rank to look at), else the
        # largest; np.argmax takes the first of equal keys: the lowest rank.
        argmax = np.argmax(outlier_key(values, present), axis=0)
    out: npt.NDArray[np.float64] = np.stack([low, high, mean, std, argmax.astype(np.float64)])
    out[:, count == 0] = np.nan
    return out
