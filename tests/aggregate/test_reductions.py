"""The reduction maths (``reduce_values``: ``mindwatch convert`` reduces per-rank logs
with it) and the reduction table, without any framework."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mindwatch.aggregate.reductions import (
    Reduction,
    ReductionTable,
    reduce_values,
    spread_tags,
)

NAN = math.nan


def _reduce(values: list[list[float]], kind: str, **kw: object):  # type: ignore[no-untyped-def]
    array = np.array(values, dtype=np.float64)
    present = ~np.isnan(array) | kw.pop("nan_present", False)  # type: ignore[operator]
    return reduce_values(array, present, Reduction(kind, **kw))[:2]  # type: ignore[arg-type]


def test_each_kind_over_two_ranks_and_three_steps() -> None:
    values = [[1.0, 2.0, 3.0], [3.0, 6.0, 1.0]]
    assert _reduce(values, "mean")[0].tolist() == [2.0, 4.0, 2.0]
    assert _reduce(values, "sum")[0].tolist() == [4.0, 8.0, 4.0]
    assert _reduce(values, "max")[0].tolist() == [3.0, 6.0, 3.0]
    assert _reduce(values, "min")[0].tolist() == [1.0, 2.0, 1.0]
    once, spread = _reduce(values, "once")
    assert once.tolist() == [1.0, 2.0, 3.0]
    assert spread is None
    per_rank, spread = _reduce(values, "per_rank")
    assert np.isnan(per_rank).all()
    low, high, mean, std, argmax = spread
    assert low.tolist() == [1.0, 2.0, 1.0]
    assert high.tolist() == [3.0, 6.0, 3.0]
    assert mean.tolist() == [2.0, 4.0, 2.0]
    assert std.tolist() == [1.0, 2.0, 1.0]
    assert argmax.tolist() == [1.0, 1.0, 0.0]


def test_mean_is_weighted_by_each_ranks_samples_when_all_have_them() -> None:
    values = np.array([[1.0, 1.0], [4.0, 4.0]])
    present = np.ones_like(values, dtype=bool)
    weights = np.array([[1.0, 1.0], [3.0, 0.0]])  # step 2: rank 1 gave no weight
    result, _, _ = reduce_values(values, present, Reduction("mean"), weights)
    assert result.tolist() == [(1.0 * 1 + 4.0 * 3) / 4, 2.5]


def test_a_rank_that_did_not_log_the_metric_is_left_out() -> None:
    values = np.array([[2.0, 5.0], [NAN, 7.0]])
    present = np.array([[True, True], [False, True]])
    result, spread, _ = reduce_values(values, present, Reduction("mean"))
    assert result.tolist() == [2.0, 6.0]
    assert spread is not None
    assert spread[4].tolist() == [0.0, 1.0]  # argmax among the ranks that logged it


def test_nan_on_one_rank_makes_the_global_value_nan_and_names_that_rank() -> None:
    values = np.array([[1.0, 9.0, 1.0], [NAN, 2.0, math.inf], [5.0, 1.0, 2.0]])
    present = np.ones_like(values, dtype=bool)
    for kind in ("mean", "max", "min", "sum"):
        result, spread, _ = reduce_values(values, present, Reduction(kind))  # type: ignore[arg-type]
        assert math.isnan(result[0]), kind
        assert spread is not None
        assert spread[4].tolist() == [1.0, 0.0, 1.0], kind  # NaN / inf rank, else largest
        assert math.isnan(spread[0][0])
        assert math.isnan(spread[1][0])


def test_a_reduction_limited_to_some_ranks_uses_only_them() -> None:
    values = np.array([[0.0, 0.0], [0.0, 0.0], [2.0, 3.0], [4.0, 5.0]])
    present = np.ones_like(values, dtype=bool)
    last_stage, spread, _ = reduce_values(values, present, Reduction("mean", ranks=(2, 3)))
    assert last_stage.tolist() == [3.0, 4.0]
    only_last, _, _ = reduce_values(values, present, Reduction("mean", ranks=(-1,)))
    assert only_last.tolist() == [4.0, 5.0]
    assert spread is not None  # over the contributing ranks: the zeros of stage 0 left out
    assert spread[0].tolist() == [2.0, 3.0]
    assert spread[2].tolist() == [3.0, 4.0]
    assert spread[4].tolist() == [3.0, 3.0]  # argmax: the rank number, not the position


def test_steps_nobody_logged_come_back_as_nan() -> None:
    values = np.array([[NAN, 1.0], [NAN, 2.0]])
    present = np.array([[False, True], [False, True]])
    result, spread, counted = reduce_values(values, present, Reduction("mean"))
    assert math.isnan(result[0])
    assert counted.tolist() == [False, True]
    _, _, counted = reduce_values(values, present, Reduction("mean", ranks=(5,)))
    assert counted.tolist() == [False, False]  # a rank that does not exist contributes nothing
    assert spread is not None
    assert np.isnan(spread[:, 0]).all()


def test_the_table_prefers_declarations_then_builtins_then_mean() -> None:
    table = ReductionTable({"accuracy": "max", "perf/memory_mb": "per_rank"})
    assert table["train/accuracy"].kind == "max"
    assert table["perf/memory_mb"].kind == "per_rank"
    assert table["train/loss"].kind == "mean"
    assert table["train/lr"].kind == "once"
    assert table["train/lr/group_1"].kind == "once"
    assert table["train/grad_norm"].kind == "once"
    assert table["perf/step_time_ms"].kind == "max"
    assert table["perf/samples_per_s"].kind == "sum"
    assert table["layers/grad_norm/fc.weight"].kind == "once"
    assert table["train/my_metric"].kind == "mean"
    table.declare("my_metric", "sum")
    assert table["train/my_metric"].kind == "sum"
    assert ReductionTable(loss_ranks=(3,))["train/loss"] == Reduction("mean", (3,))


def test_an_unknown_kind_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="use one of mean, sum, max, min, once, per_rank"):
        Reduction("average")  # type: ignore[arg-type]


def test_spread_tag_names() -> None:
    assert spread_tags("train/loss") == (
        "ranks/loss_min",
        "ranks/loss_max",
        "ranks/loss_mean",
        "ranks/loss_std",
        "ranks/loss_argmax",
    )
    assert spread_tags("perf/step_time_ms")[1] == "ranks/step_time_ms_max"
    assert spread_tags("accuracy")[0] == "ranks/accuracy_min"


def test_a_nested_tags_spread_keeps_every_level_but_the_first() -> None:
    """Only the first namespace goes: ``train/lr/group_1`` -> ``ranks/lr/group_1_*``
    (a tag nested deeper must not collide with its parent's spread)."""
    assert spread_tags("train/lr/group_1") == tuple(
        f"ranks/lr/group_1_{s}" for s in ("min", "max", "mean", "std", "argmax")
    )
    assert spread_tags("hw/npu/3/temp_c")[4] == "ranks/npu/3/temp_c_argmax"
    assert spread_tags("/loss")[0] == "ranks/loss_min"
