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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

__all__ = ["mindformers_view"]

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
) -> list[tuple[int, Values]]:
    """``[(step, values), (samples seen, twins)]`` in MindFormers' names.

    ``samples``: samples per step on one device (None: no batch size, throughput or
    samples axis); ``flops_per_step``: model FLOPs of one step on one device.
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
    return [(step, out), (int(step * batch), twins)]
