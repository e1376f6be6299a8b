"""Read the learning rate an optimizer used at the step that just ran.

Facts this relies on (``mindspore/nn/optim/optimizer.py``, 2.10):

* Each optimizer's ``construct`` evaluates ``learning_rate(global_step)`` and then adds
  one to ``global_step``; so after step *k* ran, the lr it used is
  ``lr(global_step - 1)``. (``Optimizer.get_lr()`` is not called: it costs a graph
  launch, about 1 ms.)
* ``optimizer.learning_rate`` is a scalar ``Parameter`` (fixed lr), an
  ``_IteratorLearningRate`` (a list of per-step values in a 1-d Parameter), a
  ``LearningRateSchedule`` cell, or, with parameter groups, one such object per
  parameter (fixed lrs inside dynamic groups are wrapped in ``_ConvertToCell``). The
  first two wrappers are themselves ``LearningRateSchedule`` subclasses, so they are
  recognised by their Parameter before the generic schedule case.

Calling a schedule cell from a callback costs a graph launch (about 0.25 ms in GRAPH
mode, several ms in PyNative) per step. Instead the schedule is evaluated on chunks of
4,096 steps at once (``schedule(Tensor(offset + arange(4096)))``: one compiled graph,
reused for every chunk), checked against scalar calls, and then read from that table.
A schedule that is not element-wise is called per step instead, with the step shaped
as the optimizer's own ``global_step``: slower, still exact. A schedule whose own
Parameters change during training would make the table stale: pass ``tabulate=False``.

Which schedules are element-wise is decided by reading their source before anything is
compiled (:func:`branches_on_values`): a schedule that branches on a tensor
(MindFormers' ``if self.greater_equal(global_step, self.decay_steps):``) cannot take a
vector of steps, and trying would make MindSpore's compiler print an ``[ERROR]`` call
stack into the user's log (and an ``analyze_fail.ir`` file) before it raises. No
schedule is ever compiled with an input the optimizer would not give it.
"""

from __future__ import annotations

import ast
import inspect
import logging
import textwrap
from typing import Any, Optional

import numpy as np
from mindspore import Parameter, Tensor
from mindspore.common import dtype as mstype
from mindspore.nn.learning_rate_schedule import LearningRateSchedule

from mindwatch.mindspore.tensors import to_float

__all__ = [
    "LearningRateReader",
    "LearningRateScaler",
    "branches_on_values",
    "find_optimizer",
]

log = logging.getLogger(__name__)

_CHUNK = 4096


def find_optimizer(cb_params: Any) -> Any:
    """The optimizer of a ``Model.train`` run, also when ``Model`` was built from a
    train-step cell without ``optimizer=`` (then ``cb_params.optimizer`` is None)."""
    optimizer = cb_params.get("optimizer")
    if optimizer is None:
        optimizer = getattr(cb_params.get("train_network"), "optimizer", None)
    return optimizer


class LearningRateReader:
    """Exact lr of the last optimizer update, cheap enough to call every step."""

    def __init__(self, optimizer: Any, *, tabulate: bool = True) -> None:
        self.optimizer = optimizer
        self.tabulate = tabulate
        self._lists: dict[int, np.ndarray[Any, Any]] = {}
        self._chunks: dict[tuple[int, int], np.ndarray[Any, Any]] = {}
        self._per_step: set[int] = set()  # schedules that cannot be tabulated
        self._elementwise: set[int] = set()  # schedules whose source allows tabulating
        self._step: Optional[int] = None

    def invalidate(self) -> None:
        """Forget cached lr tables (the lr was changed, e.g. by the dynamic-lr rule)."""
        self._lists.clear()
        self._chunks.clear()

    def step(self) -> int:
        """0-based index of the optimizer update that ran last (read once per ``read``)."""
        if self._step is None:
            self._step = max(int(to_float(self.optimizer.global_step)) - 1, 0)
        return self._step

    def read(self) -> list[tuple[str, float]]:
        """``(name, lr)`` per distinct lr of the optimizer, in parameter order.

        The name is that of the lr's Parameter (``learning_rate``, or
        ``learning_rate_group_<i>`` for the user's group ``i``), or ``schedule_<k>``.
        """
        self._step = None
        learning_rate = self.optimizer.learning_rate
        if not getattr(self.optimizer, "is_group_lr", False):
            return [self._value(learning_rate, 0)]
        values: list[tuple[str, float]] = []
        seen: set[int] = set()
        for entry in learning_rate:  # one entry per parameter; groups share the object
            if id(entry) not in seen:
                seen.add(id(entry))
                values.append(self._value(entry, len(values)))
        return values

    def _value(self, lr: Any, index: int) -> tuple[str, float]:
        # The step (a device read) is only fetched for lrs that depend on it.
        if isinstance(lr, Parameter):
            return lr.name, to_float(lr)
        inner = getattr(lr, "learning_rate", None)
        if isinstance(inner, Parameter):
            if len(inner.shape) == 1:  # _IteratorLearningRate: per-step values
                table = self._lists.get(id(lr))
                if table is None:
                    table = self._lists[id(lr)] = inner.asnumpy().astype(np.float32).copy()
                # Past the end the optimizer itself fails (Gather out of range).
                step = min(self.step(), table.shape[0] - 1)
                return inner.name, float(table[step])
            return inner.name, to_float(inner)  # _ConvertToCell: fixed lr in a group
        if isinstance(lr, LearningRateSchedule):
            return f"schedule_{index}", self._schedule(lr, self.step())
        if isinstance(lr, Tensor):
            return f"lr_{index}", to_float(lr)
        raise TypeError(f"unsupported learning-rate object {type(lr).__name__}")

    @staticmethod
    def _call(schedule: Any, step: int) -> float:
        # Same dtype and shape as Optimizer.global_step, so the compiled graph is reused.
        return to_float(schedule(Tensor(np.array([step], np.int32))))

    def _schedule(self, schedule: Any, step: int) -> float:
        key = id(schedule)
        if not self.tabulate or key in self._per_step:
            return self._call(schedule, step)
        if key not in self._elementwise:
            if branches_on_values(schedule):
                log.debug("mindwatch: lr schedule %s branches on values: read per step", schedule)
                self._per_step.add(key)
                return self._call(schedule, step)
            self._elementwise.add(key)
        chunk = self._chunks.get((key, step // _CHUNK))
        if chunk is None:
            chunk = self._tabulate(schedule, step // _CHUNK)
            if chunk is None:
                self._per_step.add(key)
                return self._call(schedule, step)
            self._chunks = {k: v for k, v in self._chunks.items() if k[0] != key}
            self._chunks[(key, step // _CHUNK)] = chunk
        return float(chunk[step % _CHUNK])

    def _tabulate(self, schedule: Any, index: int) -> Optional[np.ndarray[Any, Any]]:
        offset = index * _CHUNK
        try:
            steps = np.arange(offset, offset + _CHUNK, dtype=np.int32)
            values = np.asarray(schedule(Tensor(steps)).asnumpy())
            if values.shape != (_CHUNK,):
                return None
            chunk = values.astype(np.float32)
            for probe in (0, _CHUNK // 2, _CHUNK - 1):
                if chunk[probe] != np.float32(self._call(schedule, offset + probe)):
                    return None
        except Exception as exc:  # a schedule that is not element-wise
            log.debug("mindwatch: lr schedule %s is read per step: %r", schedule, exc)
            return None
        return chunk


_STATIC = (bool, int, float, str, type(None))


def _source_tree(function: Any) -> Optional[ast.AST]:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None


def _static_test(node: ast.AST, owner: Any) -> bool:
    """Whether a condition is decided by plain Python values of ``owner`` alone
    (``if self.is_stair:``), not by a tensor computed from the step."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id == "self" and isinstance(getattr(owner, node.attr, None), _STATIC)
    if isinstance(node, ast.UnaryOp):
        return _static_test(node.operand, owner)
    if isinstance(node, ast.BoolOp):
        return all(_static_test(v, owner) for v in node.values)
    if isinstance(node, ast.Compare):
        return all(_static_test(v, owner) for v in (node.left, *node.comparators))
    return False


def branches_on_values(cell: Any, _seen: Optional[set[int]] = None) -> bool:
    """Whether ``cell.construct`` (or a cell or method it calls through ``self``) has
    an ``if``, ``while``, conditional expression, ``and``/``or`` or ``assert`` decided
    by a computed value. Such a schedule cannot be evaluated on a vector of steps. An
    unreadable source counts as branching: the safe answer."""
    seen = set() if _seen is None else _seen
    if id(cell) in seen:
        return False
    seen.add(id(cell))
    functions = [type(cell).construct]
    checked: set[str] = {"construct"}
    while functions:
        tree = _source_tree(functions.pop())
        if tree is None:
            return True
        for node in ast.walk(tree):
            test = None
            if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
                test = node.test
            elif isinstance(node, ast.BoolOp):
                test = node
            if test is not None and not _static_test(test, cell):
                return True
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
            ):
                target = getattr(cell, node.func.attr, None)
                if isinstance(target, LearningRateSchedule) or _is_cell(target):
                    if branches_on_values(target, seen):
                        return True
                elif inspect.ismethod(target) and node.func.attr not in checked:
                    checked.add(node.func.attr)
                    functions.append(target.__func__)
    return False


def _is_cell(value: Any) -> bool:
    from mindspore import nn

    return isinstance(value, nn.Cell)


class _ScaledSchedule(LearningRateSchedule):  # type: ignore[misc]
    """A schedule times a scale Parameter (changed in place, no recompilation)."""

    def __init__(self, schedule: Any) -> None:
        super().__init__()
        self.schedule = schedule
        self.scale = Parameter(Tensor(1.0, mstype.float32), name="mindwatch_lr_scale")

    def construct(self, global_step: Any) -> Any:
        return self.schedule(global_step) * self.scale


class LearningRateScaler:
    """Multiply an optimizer's learning rate in place, whatever form it has.

    A fixed lr (a ``Parameter``) and a per-step list (its 1-d ``Parameter``) are
    rescaled directly; a ``LearningRateSchedule`` is wrapped, before the graph is
    compiled (``prepare`` at the start of training), in a schedule times a scale
    ``Parameter``. Parameter groups with their own lrs are not supported (a warning).
    """

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.target: Any = None

    def prepare(self) -> bool:
        """Make the lr scalable; False (with a warning) if it cannot be."""
        opt = self.optimizer
        lr = getattr(opt, "learning_rate", None)
        if getattr(opt, "is_group_lr", False):
            log.warning("mindwatch: dynamic_lr does not support per-group learning rates")
            return False
        if isinstance(lr, Parameter):
            self.target = lr
            return True
        inner = getattr(lr, "learning_rate", None)
        if isinstance(inner, Parameter):  # a per-step list (_IteratorLearningRate)
            self.target = inner
            return True
        if isinstance(lr, LearningRateSchedule):
            wrapped = _ScaledSchedule(lr)
            opt.learning_rate = wrapped
            self.target = wrapped.scale
            return True
        log.warning("mindwatch: dynamic_lr cannot scale a %s learning rate", type(lr).__name__)
        return False

    def apply(self, factor: float) -> None:
        """Multiply the learning rate by ``factor`` from the next update on."""
        target = self.target
        values = target.asnumpy() * np.float32(factor)
        target.set_data(Tensor(values.astype(target.asnumpy().dtype)))
