"""``tag_style: mindformers``: a step's values under MindFormers' own TensorBoard names.

MindFormers' ``MFLossMonitor`` (1.9) writes these tags; each has a twin
``<tag>_vs_samples`` whose x axis is the number of samples seen (``step x global batch``;
tensorboardX turns the spaces of MindFormers' ``"<tag> vs samples"`` into
underscores, so that is the name existing dashboards know):

==================================  ==================================================
MindFormers tag                     mindwatch's value
==================================  ==================================================
``loss``                            ``train/loss``
``learning-rate``                   ``train/lr``
``grad-norm``                       ``train/grad_norm`` (absent without a grad norm)
``loss-scale``                      ``train/loss_scale``
``batch-size``                      samples per step x world size (global batch)
``iteration-time``                  ``perf/compute_ms``: the step's compute, without the
                                    wait for the next batch (``perf/step_time_ms``
                                    when the caller measured no compute time)
``throughput``                      samples per step per device / iteration time (s)
``B-samples-per-day`` (no twin)     throughput x world size x 86400 / 1e9
``model-flops-throughput-per-npu``  FLOPs per step per device / iteration time (ms) /
(no twin)                           1e9, i.e. TFLOPS over the compute part only
==================================  ==================================================

MindFormers truncates ``iteration-time`` to whole milliseconds; mindwatch does not.

The samples axis is TensorBoard's int64 step: when ``step x global batch`` is not a
finite number within it (``samples`` logged as NaN, ``10**400`` or ``1e18``), that step
has no ``_vs_samples`` twins, which would be lost or wrap to a negative step; its
MindFormers tags against steps are written all the same, and one warning per run (per
``warn``) names ``samples``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Optional

from mindwatch.common.warn import WarnOnce
from mindwatch.metrics.values import INT64

__all__ = ["mindformers_view", "view_warnings"]

log = logging.getLogger(__name__)
_process_warnings = WarnOnce(log)

_RENAMED = {
    "train/loss": "loss",
    "train/lr": "learning-rate",
    "train/grad_norm": "grad-norm",
    "train/loss_scale": "loss-scale",
}
_SECONDS_PER_DAY = 86400.0

Values = list[tuple[str, float]]


def mindformers_view(
    step: int,
    values: Iterable[tuple[str, float]],
    *,
    samples: Optional[float],
    world_size: int,
    flops_per_step: Optional[float] = None,
    warn: Optional[WarnOnce] = None,
) -> list[tuple[int, Values]]:
    """``[(step, values), (samples seen, twins)]`` in MindFormers' names.

    ``samples``: samples per step on one device (None: no batch size, throughput or
    samples axis); ``flops_per_step``: model FLOPs of one step on one device; ``warn``:
    the run's warnings (:func:`view_warnings`; without it, once per process).
    """
    by_tag = dict(values)
    out = [(name, by_tag[tag]) for tag, name in _RENAMED.items() if tag in by_tag]
    compute_ms = by_tag.get("perf/compute_ms", by_tag.get("perf/step_time_ms"))
    if compute_ms is not None:
        out.append(("iteration-time", compute_ms))
    if samples is None:
        return [(step, out)] if out else []
    batch = samples * world_size
    out.append(("batch-size", batch))
    twins = [(f"{tag}_vs_samples", v) for tag, v in out]
    if compute_ms is not None and compute_ms > 0:
        throughput = samples / (compute_ms / 1000.0)
        out.append(("throughput", throughput))
        twins.append(("throughput_vs_samples", throughput))
        out.append(("B-samples-per-day", throughput * world_size * _SECONDS_PER_DAY / 1e9))
        if flops_per_step is not None:
            out.append(("model-flops-throughput-per-npu", flops_per_step / compute_ms / 1e9))
    seen = step * batch
    if not (math.isfinite(seen) and -INT64 <= seen < INT64):
        (warn or _process_warnings)(
            "samples axis",
            "mindwatch: at step %d, samples seen (step x samples %s x world size %d = %s) "
            "is not a step TensorBoard can hold (a finite int64), so the MindFormers "
            "*_vs_samples twins of this step (and of any other such step) are left out; "
            "the MindFormers tags against steps are written. Check the samples= given "
            "to log_step (samples per step on one device).",
            step,
            f"{samples:.4g}",
            world_size,
            f"{seen:.4g}",
        )
        return [(step, out)]
    return [(step, out), (int(seen), twins)]


def view_warnings() -> WarnOnce:
    """The warnings of one run's MindFormers view (each said once per run)."""
    return WarnOnce(log)
