"""One rank's forensics as a fixed-size slot and back, the job's merge of every rank's,
the skip list, and the investigator writing them with an alert (no framework)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mindwatch.alerts import Alert
from mindwatch.config import ForensicsSettings
from mindwatch.forensics import FlightRecorder, SkipList, analyse
from mindwatch.forensics.exchange import SLOT, decode, encode, merge, rank_slot
from mindwatch.pipeline.investigate import Investigator
from tests.forensics.test_analysis import NAMES, healthy, record


def _analysis(rank: int, *, layer: int = 2, loss_jump: bool = True, ids: bool = True):
    squares, loss = healthy(120, seed=rank)
    squares[100:, layer] *= 30.0**2
    if loss_jump:
        loss[100:] *= 8.0
    recorder = record(squares, loss)
    if ids:
        recorder.add_sample_ids(110, [1000 * rank + i for i in range(4)])
    return recorder, analyse(recorder.window(110), 110, lookback=20, z=6.0, rank=rank)


def test_a_slot_carries_the_movers_the_loss_onset_and_the_batch() -> None:
    recorder, full = _analysis(1)
    slot = rank_slot(recorder, 110, lookback=20, z=6.0, rank=1)
    assert slot.shape == (SLOT,)
    got = decode(slot, 1, NAMES)
    assert got is not None
    assert got["loss_onset"] == full["loss_onset"] == 101
    assert [(m["name"], m["onset"]) for m in got["movers"]][:2] == [
        ("loss", 101),
        ("fc2.weight", 101),
    ]
    layer = next(m for m in got["movers"] if m["kind"] == "layer")
    expected = next(m for m in full["movers"] if m["kind"] == "layer")
    assert layer["z"] == pytest.approx(expected["z"], rel=1e-5)
    assert got["batch"]["sample_ids"] == [1000, 1001, 1002, 1003]
    assert got["batch"]["nonfinite_samples"] is None
    assert decode(np.zeros(SLOT), 0, NAMES) is None  # a rank with nothing to say
    assert encode(None, NAMES).tolist() == [0.0] * SLOT


def test_large_ids_and_a_non_finite_gradient_survive_the_slot() -> None:
    recorder, _ = _analysis(0, ids=False)
    squares = np.full(len(NAMES), 1.0)
    squares[1] = math.nan
    recorder.add_layers(121, squares)
    recorder.add_scalars(121, {"loss": math.nan})
    recorder.add_sample_ids(121, [2**52 + 7, 3])
    recorder.add_nonfinite_samples(121, [2**52 + 7, "#1"])  # a position is not sent
    got = decode(rank_slot(recorder, 121, lookback=20, z=6.0, rank=0), 0, NAMES)
    assert got is not None
    assert got["nonfinite"] == {"step": 121, "parameter": "fc1.bias", "parameters": 1, "of": 4}
    assert got["batch"]["sample_ids"] == [2**52 + 7, 3]
    assert got["batch"]["nonfinite_samples"] == [2**52 + 7]


def test_the_merge_names_the_rank_whose_loss_moved_and_folds_shared_layers() -> None:
    # Rank 0 and 1 see the same all-reduced layer norms; only rank 1's loss jumps.
    squares, loss = healthy(120, seed=5)
    squares[100:, 2] *= 30.0**2
    quiet = analyse(record(squares, loss).window(110), 110, lookback=20, z=6.0, rank=0)
    loss[100:] *= 8.0
    loud = analyse(record(squares, loss).window(110), 110, lookback=20, z=6.0, rank=1)
    merged = merge(110, [quiet, loud])
    assert merged["blame"] == 1
    assert merged["loss_onset"] == 101
    layers = [m for m in merged["movers"] if m["kind"] == "layer"]
    assert [(m["name"], m["rank"]) for m in layers] == [("fc2.weight", None)]
    assert merged["first_mover"]["name"] == "fc2.weight"
    # Layers that differ between ranks stay apart, each with its rank.
    _, other = _analysis(0, layer=0)
    apart = merge(110, [other, loud])
    assert {(m["name"], m["rank"]) for m in apart["movers"] if m["kind"] == "layer"} == {
        ("fc1.weight", 0),
        ("fc2.weight", 1),
    }


def test_the_skip_list_round_trips_and_filters(tmp_path: Path) -> None:
    skips = SkipList()
    assert skips.add({"step": 7, "rank": 1, "sample_ids": [np.int64(5), 9]})
    assert not skips.add({"step": 7, "rank": 1, "sample_ids": [5]})  # once per batch
    skips.write(tmp_path / "skip.json")
    loaded = SkipList.load(tmp_path)  # the run folder or the file
    assert loaded.samples == {5, 9}
    assert [loaded.keep(np.array([i])) for i in (4, 5, 9)] == [True, False, False]
    assert loaded.keep(np.array(4)) is True
    (tmp_path / "other.json").write_text(json.dumps({"samples": [1]}))
    with pytest.raises(ValueError, match="not a mindwatch skip list"):
        SkipList.load(tmp_path / "other.json")
    with pytest.raises(ValueError, match="no skip list at"):
        SkipList.load(tmp_path / "nowhere")


def _alert(step: int, rank: int = 0, rule: str = "spike") -> Alert:
    return Alert(
        rule=rule,
        severity="critical",
        metric="train/loss",
        value=9.0,
        step=step,
        message="jumped",
        rank=rank,
        batch=3,
    )


def _jump_at(step: int, ids: list[int]) -> FlightRecorder:
    """fc2.weight's gradient and the loss jump together at ``step``, whose batch is ``ids``."""
    squares, loss = healthy(120, seed=2)
    squares[step - 1 :, 2] *= 30.0**2
    loss[step - 1 :] *= 8.0
    recorder = record(squares, loss)
    recorder.add_sample_ids(step, ids)
    return recorder


def test_the_investigator_writes_the_file_the_skip_list_and_the_summary(tmp_path: Path) -> None:
    recorder = _jump_at(110, [0, 1, 2, 3])
    inv = Investigator(ForensicsSettings(lookback=20), recorder, tmp_path, 0)
    alert = _alert(110)
    assert inv.explains(alert)
    assert not inv.explains(_alert(110, rule="throughput_drop"))
    inv.finish(alert, inv.analyse(110, 3))
    summary = alert.extra["forensics"]
    assert summary["file"] == "forensics/step-110-spike.json"
    assert summary["first_mover"]["name"] == "fc2.weight"
    assert len(summary["movers"]) <= 5
    assert alert.extra["sample_ids"] == [0, 1, 2, 3]
    record_ = json.loads((tmp_path / summary["file"]).read_text())
    assert record_["alert"]["step"] == 110
    assert "heat" in record_
    assert SkipList.load(tmp_path).samples == {0, 1, 2, 3}
    assert summary["skip"]["python"][0] == "from mindwatch.forensics import SkipList"
    second = _alert(110)
    inv.finish(second, inv.analyse(110, 3))  # the same step again: its own file
    assert second.extra["forensics"]["file"] == "forensics/step-110-spike-2.json"


def test_the_investigator_merges_gathered_slots(tmp_path: Path) -> None:
    squares, loss = healthy(120, seed=5)
    squares[109:, 2] *= 30.0**2  # from step 110, the alert's
    mine = record(squares, loss)
    mine.add_sample_ids(110, [1, 2])
    loss[109:] *= 8.0
    theirs = record(squares, loss)
    theirs.add_sample_ids(110, [101, 102])
    inv = Investigator(ForensicsSettings(lookback=20), mine, tmp_path, 0)
    slots = np.stack([np.zeros(SLOT), rank_slot(theirs, 110, lookback=20, z=6.0, rank=1)])
    alert = _alert(110, rank=1)
    inv.finish(alert, inv.analyse(110, 3), slots)
    summary = alert.extra["forensics"]
    assert summary["blame"] == 1
    assert summary["batch"]["sample_ids"] == [101, 102]
    assert alert.extra["sample_ids"] == [101, 102]
    assert SkipList.load(tmp_path).steps[0]["rank"] == 1


def test_an_alert_in_a_spikes_aftermath_puts_no_batch_in_the_skip_list(tmp_path: Path) -> None:
    recorder = _jump_at(105, [7, 8])
    recorder.add_sample_ids(110, [9, 10])
    inv = Investigator(ForensicsSettings(lookback=20), recorder, tmp_path, 0)
    late = _alert(110, rule="layer_grad_outlier")  # a layer still outlying 5 steps on
    inv.finish(late, inv.analyse(110, 3))
    assert late.extra["forensics"]["batch"]["sample_ids"] == [9, 10]  # told, not blamed
    assert "skip" not in late.extra["forensics"]
    assert not (tmp_path / "skip.json").exists()
    spike = _alert(105)
    inv.finish(spike, inv.analyse(105, 3))
    assert SkipList.load(tmp_path).samples == {7, 8}


def test_a_full_disk_costs_the_file_not_the_alert(tmp_path: Path) -> None:
    recorder, _ = _analysis(0)
    blocked = tmp_path / "run"
    blocked.mkdir()
    (blocked / "forensics").write_text("a file where the folder should be")
    inv = Investigator(ForensicsSettings(lookback=20, skip_list=False), recorder, blocked, 0)
    alert = _alert(110)
    inv.finish(alert, inv.analyse(110, 3))
    assert "forensics" not in alert.extra  # no summary pointing at a file that is not there
