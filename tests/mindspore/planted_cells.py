"""Cells that plant a fault in one layer's gradient, shared by the forensics tests.

``GradScale`` is the masked op: ``w * s + stop_gradient(w * (1 - s))`` has the forward
value ``w`` and the gradient ``s`` times it, so only the layer it wraps gets a larger
gradient; ``PlantAt`` sets ``s`` from a given step on.
"""

from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common import dtype as mstype


class GradScale(nn.Cell):  # type: ignore[misc]
    """Identity forward; the gradient through it times ``scale``."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = Parameter(Tensor(1.0, mstype.float32), name="fault", requires_grad=False)

    def construct(self, x: Any) -> Any:
        return x * self.scale + ops.stop_gradient(x * (1.0 - self.scale))


class Dense(nn.Cell):  # type: ignore[misc]
    """A dense layer with seeded weights, its weight through ``fault`` when given."""

    def __init__(self, i: int, o: int, seed: int, fault: Any = None) -> None:
        super().__init__()
        w = np.random.default_rng(seed).normal(size=(i, o)) / np.sqrt(i)
        self.weight = Parameter(Tensor(w.astype(np.float32)), name="weight")
        self.bias = Parameter(Tensor(np.zeros(o, np.float32)), name="bias")
        self.fault = fault

    def construct(self, x: Any) -> Any:
        w = self.weight if self.fault is None else self.fault(self.weight)
        return ops.matmul(x, w) + self.bias


class WithIds(nn.Cell):  # type: ignore[misc]
    """The loss network, taking (and ignoring) the dataset's id column."""

    def __init__(self, net: nn.Cell) -> None:
        super().__init__()
        self.loss = nn.WithLossCell(net, nn.MSELoss())

    def construct(self, x: Any, y: Any, ids: Any) -> Any:
        return self.loss(x, y)


class PlantAt(ms.train.Callback):  # type: ignore[misc]
    """From step ``at`` on, the gradient through ``fault`` is ``factor`` times larger."""

    def __init__(self, fault: GradScale, at: int, factor: float) -> None:
        super().__init__()
        self.fault, self.at, self.factor = fault, at, factor

    def on_train_step_begin(self, run_context: Any) -> None:
        if int(run_context.original_args().cur_step_num) == self.at:
            self.fault.scale.set_data(Tensor(self.factor, mstype.float32))
