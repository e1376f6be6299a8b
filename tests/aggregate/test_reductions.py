"""The reduction maths and the payload format, without any framework."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mindwatch.aggregate.packing import (
    MISSING,
    CorruptSliceError,
    is_missing,
    needed,
    pack,
    read_header,
    tag_id,
    unpack,
)
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
    values = np.array([[2.0, 5.0], [MISSING, 7.0]])
    present = ~is_missing(values)
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
    values = np.array([[MISSING, 1.0], [MISSING, 2.0]])
    present = ~is_missing(values)
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


def test_a_packed_slice_round_trips_and_keeps_nan_apart_from_missing() -> None:
    tags = ["train/loss", "train/acc"]
    rows = [{"train/loss": 0.5, "train/acc": NAN}, {"train/loss": 2.0**60 + 0.5}]
    size = needed(len(tags), len(rows))
    vector = pack(
        3,
        round_no=4,
        tags=tags,
        steps=[7, 8],
        walls=[1.5, 2.5],
        rows=rows,
        capacity=size + 5,
        proposal=12,
    )
    gathered = np.stack([np.zeros_like(vector)] * 3 + [vector])
    part = unpack(gathered, 3)
    assert part.complete
    assert part.needed == size
    assert part.proposal == 12
    assert part.round_no == 4
    assert part.ids.tolist() == [tag_id("train/loss"), tag_id("train/acc")]
    assert part.steps.tolist() == [7, 8]
    assert part.walls.tolist() == [1.5, 2.5]
    assert part.values[0, 0] == 0.5
    assert part.values[1, 0] == 2.0**60 + 0.5
    assert math.isnan(part.values[0, 1])
    assert not is_missing(part.values[0, 1])
    assert is_missing(part.values[1, 1])


def test_a_slice_too_small_carries_only_what_it_needs() -> None:
    vector = pack(
        0, round_no=0, tags=["a"], steps=[1, 2], walls=[0, 0], rows=[{}, {}], capacity=8, proposal=1
    )
    part = unpack(vector[None, :], 0)
    assert not part.complete
    assert part.needed == needed(1, 2) > 8


def test_data_that_is_not_a_mindwatch_payload_is_refused() -> None:
    garbage = np.full((2, 20), 1.0)
    good = pack(0, round_no=3, tags=[], steps=[], walls=[], rows=[], capacity=20, proposal=1)
    with pytest.raises(CorruptSliceError, match="rank 1 is not mindwatch's"):
        unpack(np.stack([good, garbage[1]]), 1)
    late = pack(1, round_no=2, tags=[], steps=[], walls=[], rows=[], capacity=20, proposal=1)
    with pytest.raises(CorruptSliceError, match="rank 1 sent reduction 2 while this rank sent 3"):
        read_header(np.stack([good, late]), 1, round_no=3)


def test_tag_ids_are_stable_exact_52_bit_integers() -> None:
    ident = tag_id("train/loss")
    assert ident == float(int(ident))
    assert 0 <= ident < 2**52
    assert ident == 4032855540105964.0  # the same in every process, every run
