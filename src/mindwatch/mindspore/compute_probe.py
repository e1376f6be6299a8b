"""A fixed compute micro-benchmark, run on every rank at the same steps: the one way,
from outside the graph, to tell which rank's compute is slow under synchronous data
parallelism.

Every rank waits for the slowest in the gradient all-reduce, inside the graph, so each
rank's step and compute times are the same; only the profiler splits compute from the
wait. A fixed MatMul, the same on every rank and run at the same step, takes longer on
the rank whose device or host is slow: a card that throttles, a process starved by a
busy neighbour on its cores. Megatron's ``gpu_sniff_test`` does the same with a GEMM.
When it runs is the callback's business (every ``alerts.straggler.bench_every_s``,
agreed in a reduction, after mindwatch's own threads went idle:
:class:`mindwatch.mindspore.TrainingMonitor` at a step end).

What is timed, and why:

- **On the CPU** the host is the device: a NumPy float32 product (256 x 256, about 0.2 ms
  on one core), which holds no GIL while BLAS runs. A loop of MindSpore's own CPU
  MatMul was tried first and rejected: each PyNative call takes the GIL several times,
  so a rank whose Python threads are busy (rank 0 runs mindwatch's reduction and
  writers) timed 3x slower than the others with nothing planted (measured under msrun
  with 2 CPU workers; with a thread spinning in Python beside it, a 256 x 256 MatMul
  went from about 1 ms to 30 ms).
- **On Ascend and GPU** a MindSpore float16 MatMul of 4096 x 4096 (about 0.5 ms at a
  910's rate), launched ``k`` times back to back and synchronised once, so the device's
  time, not the launch, is what is measured. No NPU was available here: the Ascend size
  follows from the chips' published rates, not from a measurement.

Products run back to back for ``BUDGET_MS`` and the result is the mean time per
product: a sustained run, because a process sharing its core with a busy neighbour gets
its share of the core only over the scheduler's time slices (milliseconds), and a short
product that has just woken up runs at full speed (measured: 5 single 0.5 ms products on
a rank pinned beside a spinning process were as fast as on a free core). One untimed
product first (the first call compiles the kernel).
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from mindwatch.rules.straggler import BENCH, INDIVIDUAL

__all__ = ["BUDGET_MS", "ComputeBenchmark"]

BUDGET_MS = 25.0  # per run: about 0.6 % of 200 steps of 20 ms
_DEVICE_SIZE = 4096  # Ascend, GPU: float16
_HOST_SIZE = 256  # CPU: float32, NumPy


class ComputeBenchmark:
    """Times a fixed MatMul on this rank's device; ``run()`` gives the tags above.

    Args:
        target: the device MindSpore runs on (``CPU``, ``Ascend``, ``GPU``).
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._once: Optional[Callable[[int], float]] = None
        self.best: Optional[float] = None

    def _host(self) -> Callable[[int], float]:
        import numpy as np

        rng = np.random.default_rng(0)  # the same operands on every rank
        a, b = (rng.standard_normal((_HOST_SIZE, _HOST_SIZE), dtype=np.float32) for _ in "ab")

        def once(count: int) -> float:
            begin = time.perf_counter()
            for _ in range(count):
                np.matmul(a, b)
            return (time.perf_counter() - begin) * 1000.0

        return once

    def _device(self) -> Callable[[int], float]:
        import mindspore as ms
        import numpy as np
        from mindspore import ops

        rng = np.random.default_rng(0)
        shape = (_DEVICE_SIZE, _DEVICE_SIZE)
        a, b = (ms.Tensor(rng.standard_normal(shape).astype(np.float16)) for _ in "ab")
        synchronize = ms.runtime.synchronize

        def once(count: int) -> float:
            begin = time.perf_counter()
            for _ in range(count):
                ops.matmul(a, b)
            synchronize()
            return (time.perf_counter() - begin) * 1000.0

        return once

    def run(self, budget_ms: float = BUDGET_MS) -> dict[str, float]:
        """``straggler/bench_ms`` (the mean time per product over about ``budget_ms``)
        and ``straggler/bench_individual`` (this rank's best mean so far / this one)."""
        if self._once is None:
            self._once = self._host() if self.target in ("CPU", "unknown") else self._device()
        once = self._once
        first = once(1)  # warm-up: compiles the kernel the first time
        count = max(3, min(1000, int(budget_ms / max(first, 1e-3))))
        mean = once(count) / count
        self.best = mean if self.best is None else min(self.best, mean)
        return {BENCH: mean, INDIVIDUAL: self.best / mean if mean > 0 else 1.0}
