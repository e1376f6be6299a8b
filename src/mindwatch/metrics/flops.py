"""TFLOPS per device and MFU from model FLOPs and time: small pure functions.

``perf/tflops_per_device`` is the model's useful work done by one device per second,
``FLOPs per step / seconds per step / 1e12``, over the whole step's wall time (data
wait included: what the job really achieves, the convention of PaLM's "model FLOPs
utilization"). ``perf/mfu`` is that divided by the device's peak dense TFLOPS at the
training precision.

MindFormers' ``model-flops-throughput-per-npu`` divides by its ``iteration-time``
instead (the step's compute only, without waiting for data); the MindFormers tag view
(``tag_style: mindformers``) reproduces that figure under MindFormers' name.

Peaks mindwatch knows without being told (``peak_tflops`` in the config wins):

=================  ======  ==========================================================
SoC name (CANN)    TFLOPS  source
=================  ======  ==========================================================
``Ascend910A``     256     Huawei's launch of the Ascend 910 (Aug. 2019) and its Hot
                           Chips 31 talk: 32 Da Vinci cores, 256 TFLOPS FP16
=================  ======  ==========================================================

No Huawei datasheet with a per-variant figure for the Ascend 910B (Atlas 800T A2:
``Ascend910B1`` .. ``Ascend910B4``) or the 910C (``Ascend910_93xx``) was found;
third-party reports put the 910B at about 320 TFLOPS FP16, and the variants differ, so
mindwatch does not guess: set ``peak_tflops`` from your vendor's sheet.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["PEAK_TFLOPS", "mfu", "peak_for_device", "tflops"]

PEAK_TFLOPS: dict[str, tuple[float, str]] = {
    "Ascend910A": (256.0, "Huawei: Ascend 910, 256 TFLOPS FP16 (launch, Aug. 2019)"),
}


def peak_for_device(soc_name: str) -> Optional[tuple[float, str]]:
    """``(peak TFLOPS, source)`` of a device by its SoC name, or None if unknown."""
    return PEAK_TFLOPS.get(soc_name.strip())


def tflops(flops_per_step: float, seconds_per_step: float) -> float:
    """TFLOPS achieved: ``flops_per_step`` done every ``seconds_per_step``."""
    return flops_per_step / seconds_per_step / 1e12


def mfu(achieved_tflops: float, peak_tflops: float) -> float:
    """Model FLOPs utilization: the fraction of the peak the model's work achieved."""
    return achieved_tflops / peak_tflops
