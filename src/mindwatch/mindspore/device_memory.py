"""MindSpore's runtime memory counters as a telemetry probe, and this rank's device.

``mindspore.runtime.memory_allocated`` / ``memory_reserved`` / ``max_memory_allocated``
read the device allocator's statistics (host-side bookkeeping: no device sync, no
kernel launch), so the sampler thread may call them while training runs. The CPU
backend has no device allocator and reports 0 for all three (measured with MindSpore
2.10): there the probe is not made at all, so no flat zero curve pretends to be a
measurement.
"""

from __future__ import annotations

from typing import Callable, Optional

from mindwatch.run.ranks import env_device_id

__all__ = ["device_id", "device_memory_probe", "device_target"]

_MB = 1024.0 * 1024.0


def device_target() -> str:
    """The device MindSpore runs on (``CPU``, ``Ascend``, ``GPU``), or ``unknown``."""
    try:
        import mindspore as ms

        return str(ms.get_context("device_target") or "unknown")
    except Exception:
        return "unknown"


def device_id() -> Optional[int]:
    """This rank's logical device id (what ``npu-smi info -m`` lists as the logical id):
    the ``DEVICE_ID`` msrun exports to each worker, else MindSpore's context."""
    found_in_env = env_device_id()
    if found_in_env is not None:
        return found_in_env
    try:
        import mindspore as ms

        found = ms.get_context("device_id")
        return int(found) if found is not None and int(found) >= 0 else None
    except Exception:
        return None


def device_memory_probe() -> Optional[Callable[[], dict[str, float]]]:
    """A probe returning ``hw/device_mem_allocated_mb``, ``..._reserved_mb`` and
    ``..._peak_mb``, or None where the backend keeps no such counters (CPU)."""
    if device_target() in ("CPU", "unknown"):
        return None
    from mindspore import runtime

    def read() -> dict[str, float]:
        return {
            "hw/device_mem_allocated_mb": float(runtime.memory_allocated()) / _MB,
            "hw/device_mem_reserved_mb": float(runtime.memory_reserved()) / _MB,
            "hw/device_mem_peak_mb": float(runtime.max_memory_allocated()) / _MB,
        }

    return read
