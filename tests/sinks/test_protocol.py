"""The sink protocol: a TypedSink declares one method per item type, and a group hands
each item only to the sinks that write its type, with failures isolated as before."""

from __future__ import annotations

import logging
import typing
from typing import Any, Optional

import pytest

from mindwatch.sinks import (
    MindFormersView,
    ProgressSink,
    PrometheusSink,
    SinkGroup,
    TensorBoardSink,
    TypedSink,
    handles,
)
from mindwatch.sinks.items import (
    EvalValues,
    Item,
    RaisedAlert,
    RunStatus,
    StepValues,
    Text,
    TotalSteps,
)
from mindwatch.testing import MemorySink


class Steps(TypedSink):
    """Writes steps and evaluations, nothing else."""

    name = "steps"

    def __init__(self) -> None:
        self.got: list[Any] = []

    @handles(StepValues)
    def _step(self, item: StepValues) -> None:
        self.got.append(("step", item.step))

    @handles(EvalValues)
    def _eval(self, item: EvalValues) -> None:
        self.got.append(("eval", item.step))


class EvalsTwice(Steps):
    """A subclass overrides a handler; the table follows."""

    def _eval(self, item: EvalValues) -> None:
        self.got.append(("eval twice", item.step))


class Nothing(TypedSink):
    """Declares no item type: a group never calls it, only flushes and closes it."""

    name = "nothing"

    def __init__(self) -> None:
        self.calls = 0
        self.closed = False

    def write(self, item: Item) -> None:  # a group calls a TypedSink's handlers only
        self.calls += 1

    def close(self, timeout: Optional[float] = None) -> None:
        self.closed = True


class FailsOnEvals(Steps):
    name = "fails on evals"

    @handles(EvalValues)
    def _eval(self, item: EvalValues) -> None:
        raise RuntimeError("boom")


def step(n: int) -> StepValues:
    return StepValues(n, [("train/loss", 1.0)], 0.0)


def test_the_table_is_built_once_from_the_marked_methods() -> None:
    assert set(Steps.handlers) == {StepValues, EvalValues}
    assert Steps.handlers[StepValues] is Steps._step
    assert EvalsTwice.handlers[EvalValues] is EvalsTwice._eval  # the override
    assert dict(Nothing.handlers) == {}
    sink = EvalsTwice()
    sink.write(step(1))
    sink.write(EvalValues(1, [("eval/loss", 0.5)]))
    sink.write(Text("t", "not written", 1))  # a type it does not declare: ignored
    assert sink.got == [("step", 1), ("eval twice", 1)]


def test_mindwatchs_sinks_declare_what_they_write() -> None:
    every = set(typing.get_args(Item))
    assert set(TensorBoardSink.handlers) == every - {TotalSteps, RunStatus, RaisedAlert}
    assert set(MindFormersView.handlers) == {StepValues}
    assert set(ProgressSink.handlers) == {StepValues, EvalValues, TotalSteps}
    # The exporter starts with the first item of any kind (the config's TEXT entry when
    # the monitor opens), so it takes them all.
    assert set(PrometheusSink.handlers) == every


def test_a_group_routes_each_type_to_the_sinks_that_write_it() -> None:
    steps, nothing, memory = Steps(), Nothing(), MemorySink()
    group = SinkGroup([steps, nothing, memory])
    group.write(step(1))
    group.write(TotalSteps(10))
    group.write(EvalValues(1, [("eval/loss", 0.5)]))
    assert steps.got == [("step", 1), ("eval", 1)]
    assert nothing.calls == 0  # never asked to write anything
    assert memory.items == [step(1), TotalSteps(10), EvalValues(1, [("eval/loss", 0.5)])]
    late = Steps()
    group.add(late)  # routes already built: the new sink gets the next items
    group.write(step(2))
    assert late.got == [("step", 2)]
    assert group.sinks == (steps, nothing, memory, late)
    group.close()
    assert nothing.closed
    assert memory.closed


def test_a_failing_handler_is_one_warning_and_the_others_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad, good = FailsOnEvals(), Steps()
    group = SinkGroup([bad, good])
    with caplog.at_level(logging.WARNING, logger="mindwatch"):
        for n in range(1, 4):
            group.write(EvalValues(n, [("eval/loss", 0.5)]))
            group.write(step(n))
    assert good.got == [(kind, n) for n in range(1, 4) for kind in ("eval", "step")]
    assert bad.got == [("step", n) for n in range(1, 4)]  # its steps were all written
    assert group.failures == {"fails on evals": 3}
    assert sum("fails on evals" in r.getMessage() for r in caplog.records) == 1
