"""Read the learning rate an optimizer used at the step that just ran.

Facts this relies on (``mindspore/nn/optim/optimizer.py``, 2.10):

* Each optimizer's ``construct`` evaluates ``learning_rate(global_step)`` and then adds
  one to ``global_step``; so after step *k* ran, the lr it used is
  ``schedule(global_step - 1)``. ``Optimizer.get_lr()`` is not used: in some MindSpore
  versions it also advances ``global_step``.
* ``optimizer.learning_rate`` is a scalar ``Parameter`` (fixed lr), an
  ``_IteratorLearningRate`` (a list of per-step values), a ``LearningRateSchedule`` cell,
  or, with parameter groups, one such object per parameter.

Calling a schedule cell from a callback costs a graph launch per step. Instead, the
schedule is evaluated once on a vector of steps (``schedule(Tensor(arange(n)))``),
checked against scalar calls, and then read from that table. A schedule that is not
element-wise (the check fails, or it raises) is called per step instead: slower, still
exact.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np
from mindspore import Parameter, Tensor
from mindspore.nn.learning_rate_schedule import LearningRateSchedule

__all__ = ["LearningRateReader", "find_optimizer"]

log = logging.getLogger(__name__)

_TABLE_CHUNK = 4096


def find_optimizer(cb_params: Any) -> Any:
    """The optimizer of a ``Model.train`` run, also when ``Model`` was built from a
    train-step cell without ``optimizer=`` (then ``cb_params.optimizer`` is None)."""
    optimizer = getattr(cb_params, "optimizer", None)
    if optimizer is None:
        optimizer = getattr(getattr(cb_params, "train_network", None), "optimizer", None)
    return optimizer


def _scalar(tensor: Any) -> float:
    if getattr(tensor, "size", 0) == 1:
        return float(tensor.item())  # cheaper than asnumpy() for one element
    return float(np.asarray(tensor.asnumpy()).reshape(-1)[0])


class LearningRateReader:
    """Exact lr of the last optimizer update, cheap enough to call every step."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self._lists: dict[int, np.ndarray] = {}
        self._tables: dict[int, Optional[np.ndarray]] = {}

    def step(self) -> int:
        """0-based index of the optimizer update that ran last."""
        return max(int(_scalar(self.optimizer.global_step)) - 1, 0)

    def read(self) -> list[float]:
        """The lr of each parameter group (one value without groups)."""
        learning_rate = self.optimizer.learning_rate
        if not getattr(self.optimizer, "is_group_lr", False):
            return [self._value(learning_rate)]
        values: list[float] = []
        seen: set[int] = set()
        for entry in learning_rate:  # one entry per parameter; groups share the object
            if id(entry) not in seen:
                seen.add(id(entry))
                values.append(self._value(entry))
        return values

    def _value(self, lr: Any) -> float:
        # The step (a device read) is only fetched for lrs that depend on it.
        if isinstance(lr, Parameter):
            return _scalar(lr)
        if isinstance(lr, LearningRateSchedule):
            return self._schedule(lr, self.step())
        inner = getattr(lr, "learning_rate", None)
        if isinstance(inner, Parameter) and len(inner.shape) == 1:  # _IteratorLearningRate
            table = self._lists.get(id(lr))
            if table is None:
                table = self._lists[id(lr)] = inner.asnumpy().astype(np.float32).copy()
            step = self.step()
            return float(table[step]) if step < table.shape[0] else float(table[-1])
        if isinstance(inner, Parameter):  # _ConvertToCell: a fixed lr inside a group
            return _scalar(inner)
        if isinstance(lr, Tensor):
            return _scalar(lr)
        raise TypeError(f"unsupported learning-rate object {type(lr).__name__}")

    @staticmethod
    def _call(schedule: Any, step: int) -> float:
        # Same dtype and shape as Optimizer.global_step, so the compiled graph is reused.
        return _scalar(schedule(Tensor(np.array([step], np.int32))))

    def _schedule(self, schedule: Any, step: int) -> float:
        key = id(schedule)
        if key in self._tables and self._tables[key] is None:
            return self._call(schedule, step)
        table = self._tables.get(key)
        if table is None or step >= table.shape[0]:
            table = self._tabulate(schedule, step)
            self._tables[key] = table
            if table is None:
                return self._call(schedule, step)
        return float(table[step])

    def _tabulate(self, schedule: Any, step: int) -> Optional[np.ndarray]:
        n = (step // _TABLE_CHUNK + 1) * _TABLE_CHUNK
        try:
            values = np.asarray(schedule(Tensor(np.arange(n, dtype=np.int32))).asnumpy())
            if values.shape != (n,):
                return None
            table = values.astype(np.float32)
            for probe in {0, step, n // 2, n - 1}:
                if table[probe] != np.float32(self._call(schedule, probe)):
                    return None
        except Exception as exc:  # a schedule that is not element-wise
            log.debug("mindwatch: lr schedule %s is read per step: %r", schedule, exc)
            return None
        return table
