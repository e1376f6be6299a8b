"""The samples axis of ``tag_style: mindformers`` (review of issue 20, item 7).

``samples=10**400`` (or NaN) at one step made the MindFormers view fail with
"OverflowError('cannot convert float infinity to integer')": that step's MindFormers
tags were lost while run.json said write_errors 0; ``samples=1e18`` wrapped the
``loss_vs_samples`` step to -8446744073709551616. Now such a step has no twins, one
warning names samples, the MindFormers tags against steps are written; and a step
beyond int64 that reaches the encoder is a bad item (counted), never a wrapped step.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindwatch
from mindwatch.events import EventFileWriter
from mindwatch.metrics.mindformers_view import mindformers_view, view_warnings
from tests.hostile.promise import mindwatch_warnings, one_warning, reads_back
from tests.tbread import scalars

INT64 = 1 << 63


@pytest.mark.parametrize("bad", [10**400, math.nan, 2e18, -1e300, math.inf])
def test_samples_beyond_int64_leave_out_the_twins_of_that_step_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: Any
) -> None:
    caplog.set_level(logging.WARNING)
    with mindwatch.Monitor(tmp_path, {"print_every": 0, "tag_style": "mindformers"}) as mon:
        for step in range(1, 13):
            mon.log_step(step, loss=1.0 / step, samples=bad if step in (5, 10) else 8)
    warnings = [w for w in mindwatch_warnings(caplog.records) if "samples" in w and "int64" in w]
    assert len(warnings) == 1, mindwatch_warnings(caplog.records)  # once per run
    assert "_vs_samples" in warnings[0]
    assert "at step 5" in warnings[0]
    assert not [w for w in mindwatch_warnings(caplog.records) if "failed writing" in w]
    info = json.loads((tmp_path / "run.json").read_text())
    assert (info["status"], info["write_errors"], info["points_dropped"]) == ("finished", 0, 0)
    steps = [s for s in range(1, 13) if s not in (5, 10)]
    read = scalars(tmp_path)
    assert [s for s, _ in read["loss"]] == list(range(1, 13))  # every step, as MindFormers'
    assert [s for s, _ in read["loss_vs_samples"]] == [8 * s for s in steps]
    assert all(0 <= s < INT64 for tag, points in read.items() for s, _ in points)
    reads_back(tmp_path, {"train/loss": [(s, 1.0 / s) for s in range(1, 13)]})


def test_the_warning_is_once_per_run_not_per_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for run in ("a", "b"):
        with mindwatch.Monitor(tmp_path / run, {"print_every": 0, "tag_style": "mindformers"}) as m:
            m.log_step(1, loss=1.0, samples=1e18)
            m.log_step(20, loss=1.0, samples=1e18)
    assert len([w for w in mindwatch_warnings(caplog.records) if "_vs_samples" in w]) == 2


@settings(max_examples=300, deadline=None, derandomize=True, database=None)  # ~0.1 s
@given(
    step=st.integers(-(2**63), 2**63 - 1),
    samples=st.one_of(st.floats(), st.integers(-(2**70), 2**70).map(float)),
    world=st.integers(1, 4096),
)
def test_the_samples_step_is_an_int64_or_absent(step: int, samples: float, world: int) -> None:
    view = mindformers_view(
        step, [("train/loss", 1.0)], samples=samples, world_size=world, warn=view_warnings()
    )
    assert repr(view[0]) == repr((step, [("loss", 1.0), ("batch-size", samples * world)]))
    seen = step * (samples * world)  # as MindFormers computes it: step x global batch
    if math.isfinite(seen) and -INT64 <= seen < INT64:
        assert view[1][0] == int(seen)
    else:
        assert len(view) == 1
    for x, _ in view:
        assert -INT64 <= x < INT64


@pytest.mark.parametrize("step", [2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30])
def test_a_step_beyond_int64_at_the_writer_is_a_counted_bad_item_not_a_wrapped_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, step: int
) -> None:
    """The encoder wrote 2**63 as -2**63 (a varint of its two's complement) and 2**64 as
    an 11-byte varint TensorBoard reads as something else."""
    with caplog.at_level(logging.WARNING, logger="mindwatch"), EventFileWriter(tmp_path) as w:
        w.add_scalar("good", 1.0, 1)
        w.add_scalar("bad", 2.0, step)
        w.add_scalars(step, [("bad", 3.0), ("bad2", 4.0)])
        w.add_scalar("good", 5.0, 2**63 - 1)
        w.add_scalar("good", 6.0, -(2**63))
        assert w.flush(timeout=30)
        one_warning(caplog.records, "could not encode", "int64")
    assert "3 points were not written" in mindwatch_warnings(caplog.records)[-1]  # at close
    assert (w.stats.write_errors, w.stats.points_dropped) == (2, 3)
    assert scalars(tmp_path) == {"good": [(1, 1.0), (2**63 - 1, 5.0), (-(2**63), 6.0)]}
