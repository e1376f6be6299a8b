"""A net whose parameter names tell ``re.match`` from ``re.search`` and hold more than
five parameters: ``fc.*``, ``fc2.*`` start with "fc", ``head.fc.*`` only contains it."""

from __future__ import annotations

from typing import Any

from mindspore import nn


class _Head(nn.Cell):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Dense(16, 10)

    def construct(self, x: Any) -> Any:
        return self.fc(x)


class HistogramNet(nn.Cell):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Dense(64, 32)  # a "conv" by name only: the demo's rows are flat
        self.fc = nn.Dense(32, 32)
        self.fc2 = nn.Dense(32, 16)
        self.head = _Head()
        self.relu = nn.ReLU()

    def construct(self, x: Any) -> Any:
        x = self.relu(self.conv(x))
        x = self.relu(self.fc(x))
        x = self.relu(self.fc2(x))
        return self.head(x)
