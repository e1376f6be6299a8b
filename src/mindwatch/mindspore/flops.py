"""Model FLOPs per step from MindSpore's compiler, and the device's peak TFLOPS.

**FLOPs.** In GRAPH mode MindSpore counts the floating-point operations of a compiled
graph: ``mindspore.common.api.flops_collection(phase)`` returns ``(full_model_flops,
full_hardware_flops, shard_model_flops, shard_hardware_flops, is_dynamic_shape)`` for
the train cell's ``current_phase``. The count covers the matrix multiplications of the
forward and the backward pass (the work MFU is defined over), e.g. for a Dense MLP
``64-128-10`` at batch 8: ``2*8*(64*128 + 128*10)`` forward, the same again for the
weight gradients, plus ``2*8*128*10`` for the one input gradient the backward pass
needs = 323,584. MindFormers uses the same count for its
``model-flops-throughput-per-npu``.

Under ``data_parallel`` (and a single device) each device compiles the graph of its own
batch, so the full count is one device's work (measured with ``msrun`` on CPU: both
ranks report the count of their local batch). Under ``semi_auto_parallel`` /
``auto_parallel`` the full count is the whole model's, and one device's share is the
full count divided by the number of devices, as MindFormers computes it. (MindFormers
1.9 divides in ``data_parallel`` mode too, so its figure there is the per-device count
divided by the data-parallel degree.) A graph with dynamic shapes has no count, nor
does PyNative mode: give ``flops_per_sample`` in the config then.

**Peak.** :func:`device_peak_tflops` knows the devices in
:data:`mindwatch.metrics.flops.PEAK_TFLOPS`, found by the Ascend SoC name CANN reports
(``acl.get_soc_name()``); any other device needs ``peak_tflops`` in the config for
``perf/mfu``.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from mindwatch.metrics.flops import PEAK_TFLOPS, peak_for_device

__all__ = ["device_peak_tflops", "graph_flops_per_step"]

log = logging.getLogger(__name__)


def graph_flops_per_step(train_network: Any, world_size: int) -> Optional[tuple[float, str]]:
    """``(FLOPs of one training step on this device, where the count comes from)``, or
    None where MindSpore has no count (PyNative, dynamic shapes, nothing compiled)."""
    import mindspore as ms

    if ms.get_context("mode") != ms.GRAPH_MODE:
        return None
    phase = getattr(train_network, "current_phase", None)
    if not phase:
        return None
    from mindspore.common.api import flops_collection

    try:
        full, _, _, _, dynamic = flops_collection(phase)
    except (RuntimeError, ValueError, TypeError) as exc:
        log.info("mindwatch: MindSpore has no FLOPs count for this graph: %s", exc)
        return None
    if dynamic or not full > 0:
        return None
    flops = float(full)
    mode = ms.get_auto_parallel_context("parallel_mode")
    if mode in ("semi_auto_parallel", "auto_parallel") and world_size > 1:
        flops /= world_size
    return flops, "MindSpore's count of the compiled train graph (flops_collection)"


def _soc_name() -> Optional[str]:
    """The Ascend SoC name (e.g. ``Ascend910B3``) from CANN's pyACL, when installed."""
    try:
        import acl  # type: ignore[import-not-found]  # CANN's pyACL, with the toolkit

        name = acl.get_soc_name()
    except Exception:  # no CANN here, or no device: not an Ascend machine
        return None
    return str(name) if name else None


def device_peak_tflops() -> Optional[tuple[float, str]]:
    """``(peak dense FP16/BF16 TFLOPS of this device, where the number comes from)`` for
    a device mindwatch knows; None otherwise (say once how to set it on Ascend)."""
    import mindspore as ms

    if ms.get_context("device_target") != "Ascend":
        return None
    soc = _soc_name()
    found = peak_for_device(soc) if soc else None
    if found is None:
        log.info(
            "mindwatch: perf/mfu needs the device's peak TFLOPS and mindwatch does not know "
            "'%s' (it knows %s); set peak_tflops in the config (docs/mindformers.md lists "
            "the published figures)",
            soc or "this Ascend device",
            ", ".join(sorted(PEAK_TFLOPS)),
        )
    return found
