"""Fixtures for tests that train real MindSpore models on the CPU."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("GLOG_v", "3")
ms = pytest.importorskip("mindspore")
# Once, before any kernel runs: MindSpore refuses set_device after that.
ms.set_device("CPU")
# PyNative runs each operator as it is called, not through its asynchronous pipeline: on
# a 2-core CPU machine that pipeline's queue threads took 15 ms of CPU a step of a tiny
# MLP, the synchronous launch 3 (500 steps: 15.4 s of CPU against 5.4). These tests
# train in this process; a user's PyNative run as it is by default (the pipeline) runs
# in processes of their own: examples/custom_loop.py (test_examples.py) and
# examples/pytorch_tutorial.py (test_summarywriter.py), both PyNative, and the overhead
# benchmark's PyNative row (test_overhead_benchmark.py).
ms.set_context(pynative_synchronize=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/mindspore" in str(item.fspath):
            item.add_marker(pytest.mark.mindspore)


@pytest.fixture(params=["graph", "pynative"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test in GRAPH and in PyNative mode (restored afterwards)."""
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    yield str(request.param)
    ms.set_context(mode=previous)


class Recorder(ms.train.Callback):  # type: ignore[misc]
    """An independent callback: what the network really returned at each step."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[int] = []
        self.losses: list[float] = []
        self.grad_norms: list[float] = []

    def on_train_step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        outputs = cb.net_outputs
        loss = outputs[0] if isinstance(outputs, (tuple, list)) else outputs
        self.steps.append(int(cb.cur_step_num))
        self.losses.append(float(loss.asnumpy()))
        # (loss, grad_norm[, squared_norms]) from mindwatch's cell, whose grad norm is
        # second; not a loss-scale cell's (loss, overflow, loss_scale).
        if isinstance(outputs, (tuple, list)) and (
            len(outputs) == 2 or (len(outputs) == 3 and outputs[2].ndim == 1)
        ):
            self.grad_norms.append(float(outputs[1].asnumpy()))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def run_context(**fields: Any) -> Any:
    """A RunContext like Model.train builds, from MindSpore's own parameter class, for
    driving a callback by hand (e.g. Ascend's once-per-sink calls)."""
    from mindspore.train import RunContext
    from mindspore.train.callback._callback import InternalCallbackParam

    params = InternalCallbackParam()
    params.update(fields)
    return RunContext(params)
