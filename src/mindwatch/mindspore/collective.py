"""MindSpore's collectives as mindwatch's :class:`~mindwatch.aggregate.Collective`.

    from mindspore.communication import init
    init()
    monitor = mindwatch.Monitor("runs/exp", collective=MindSporeCollective())

Every interval's reduction is ``mindspore.ops.communication.all_reduce`` in float32
(sum and max; :meth:`MindSporeCollective.all_reduce` says why float32). The one
start-up all-gather (rank 0's run folder, every rank's node and device) is
``ops.AllGather`` over the world group, which works the same from Python on CPU
(``mccl``) and Ascend (HCCL), in GRAPH and PyNative mode, and from a helper thread
(measured: ``docs/dev/multicard-notes.md``). Its float64 payload travels as int32
words: on CPU, MindSpore 2.10's AllGather silently rounds float64 through float32 and
truncates int64 to 32 bits, while int32 is moved bit for bit.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np
import numpy.typing as npt
from mindspore import Tensor, ops

__all__ = ["MindSporeCollective", "pipeline_loss_ranks", "rank_and_world_size"]

log = logging.getLogger(__name__)

Floats = npt.NDArray[np.float64]


def _initialised() -> bool:
    try:
        from mindspore.communication import GlobalComm

        return bool(GlobalComm.INITED)
    except Exception:  # an older or unusual build
        return False


def rank_and_world_size() -> tuple[int, int]:
    """This process's rank and the job's size: MindSpore's communication module once
    ``init()`` ran, else ``RANK_ID`` / ``RANK_SIZE`` (what ``msrun`` exports), else 0 / 1."""
    if _initialised():
        from mindspore.communication import get_group_size, get_rank

        return int(get_rank()), int(get_group_size())
    from mindwatch.run.ranks import env_rank_and_world

    return env_rank_and_world()


def pipeline_loss_ranks(world_size: int) -> Optional[tuple[int, ...]]:
    """The last pipeline stage's ranks (the ones that compute the loss), or None.

    MindSpore numbers stages by rank blocks: with ``pipeline_stages = S`` the last
    stage is the last ``world_size / S`` ranks.
    """
    try:
        import mindspore as ms

        stages = int(ms.get_auto_parallel_context("pipeline_stages") or 1)
    except Exception:
        return None
    if stages <= 1 or world_size % stages:
        return None
    per_stage = world_size // stages
    return tuple(range(world_size - per_stage, world_size))


_OP: list[Any] = []


def _all_gather_op() -> Any:
    """One AllGather primitive per process: its first launch compiles a kernel (tens of
    ms); a second monitor in the same process (Model.eval after training) reuses it."""
    if not _OP:
        _OP.append(ops.AllGather())
    return _OP[0]


class MindSporeCollective:
    """``all_reduce`` and ``all_gather`` over MindSpore's world group
    (``mindspore.communication.init()`` first)."""

    def __init__(self) -> None:
        if not _initialised():
            raise RuntimeError(
                "mindspore.communication.init() has not run: call it before creating the "
                "collective (msrun starts the processes; init() connects them)"
            )
        self.rank, self.world_size = rank_and_world_size()
        self._gather = _all_gather_op()

    def all_gather(self, vector: Floats) -> Floats:
        words = np.ascontiguousarray(vector, dtype=np.float64).view(np.int32)
        out = self._gather(Tensor(words)).asnumpy()
        stacked: Floats = np.ascontiguousarray(out.reshape(self.world_size, -1)).view(np.float64)
        return stacked

    def all_reduce(self, vector: Floats, op: str) -> Floats:
        """``mindspore.ops.communication.all_reduce`` in float32: on CPU (2.10) float64
        all-reduce fails ("AllReduce failed", measured under msrun from a helper thread),
        float32 sum and max work; mindwatch keeps its integers below 2^24 for it."""
        from mindspore.ops import communication

        if op not in ("sum", "max"):
            raise ValueError(f"all_reduce op must be 'sum' or 'max', got {op!r}")
        with np.errstate(over="ignore"):
            tensor = Tensor(np.ascontiguousarray(vector, dtype=np.float32))
        communication.all_reduce(tensor, op)  # in place
        out: Floats = tensor.asnumpy().astype(np.float64)
        return out

    @staticmethod
    def available() -> bool:
        """Whether MindSpore's communication is initialised in this process."""
        return _initialised()
