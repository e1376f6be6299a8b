"""The job's forensics merged from 3 to 8 ranks: which layers fold into one rank-less
mover (only those *every* rank saw alike), which rank is blamed, and how ties between
ranks are broken (the lowest rank, whatever order the analyses arrive in); the skip
list keeping every rank's batch of one step; and the investigator doing both with
gathered slots (no framework)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

from mindwatch.alerts import Alert
from mindwatch.config import ForensicsSettings
from mindwatch.forensics import FlightRecorder, SkipList
from mindwatch.forensics.exchange import decode, merge, rank_slot
from mindwatch.pipeline.investigate import Investigator
from tests.forensics.test_analysis import NAMES, healthy, record

WORLDS = range(3, 9)
LAYER = "fc2.weight"


def mover(
    name: str, onset: int, z: Any, rank: Optional[int], kind: str = "layer"
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "onset": onset,
        "z": z,
        "peak_z": z,
        "value": None,
        "baseline": None,
        "rank": rank,
    }


def analysis(
    rank: int, movers: list[dict[str, Any]], nonfinite: Optional[dict[str, Any]] = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"rank": rank, "movers": movers}
    losses = [m for m in movers if m["name"] == "loss"]
    out["loss_onset"] = losses[0]["onset"] if losses else None
    if nonfinite is not None:
        out["nonfinite"] = nonfinite
    return out


def layer_movers(merged: dict[str, Any]) -> list[tuple[str, Optional[int]]]:
    return [(m["name"], m["rank"]) for m in merged["movers"] if m["kind"] == "layer"]


def subsets(world: int) -> list[tuple[int, ...]]:
    """Every non-empty subset of the ranks for small worlds; for larger ones the
    singletons, the pairs with rank 0 and the last rank, and every rank but one."""
    ranks = range(world)
    if world <= 4:
        return [s for k in range(1, world + 1) for s in itertools.combinations(ranks, k)]
    found = {(r,) for r in ranks} | {(0, world - 1), (world - 2, world - 1)}
    found |= {tuple(r for r in ranks if r != gone) for gone in ranks}
    found.add(tuple(ranks))
    return sorted(found)


@pytest.mark.parametrize("world", WORLDS)
def test_a_layer_folds_into_one_rankless_mover_only_when_every_rank_saw_it(world: int) -> None:
    for seen in subsets(world):
        analyses = [
            analysis(r, [mover(LAYER, 101, 12.5, r)] if r in seen else []) for r in range(world)
        ]
        merged = merge(110, analyses)
        assert merged["ranks"] == list(range(world))
        if len(seen) == world:
            assert layer_movers(merged) == [(LAYER, None)], seen
        else:  # the ranks that saw it keep their names, in rank order
            assert layer_movers(merged) == [(LAYER, r) for r in seen], seen
        assert merged["first_mover"]["name"] == LAYER
        assert merged["first_mover"]["rank"] == (None if len(seen) == world else seen[0])


@pytest.mark.parametrize("world", WORLDS)
def test_a_layer_every_rank_saw_differently_stays_apart(world: int) -> None:
    for odd in range(world):  # one rank's onset or size differs: no single series
        later = [
            analysis(r, [mover(LAYER, 102 if r == odd else 101, 12.5, r)]) for r in range(world)
        ]
        got = layer_movers(merge(110, later))
        assert sorted(got, key=lambda m: m[1] or 0) == [(LAYER, r) for r in range(world)]
        assert got[-1] == (LAYER, odd)  # the later onset ranks last
        larger = [
            analysis(r, [mover(LAYER, 101, 12.7 if r == odd else 12.5, r)]) for r in range(world)
        ]
        got = layer_movers(merge(110, larger))
        assert got[0] == (LAYER, odd)  # farther at the same onset: first
        assert sorted(r for _, r in got) == list(range(world))  # type: ignore[type-var]
    # Alike is the same onset and z within 0.1 %: float32 rounding on the way, not a
    # different series; "inf" on every rank (non-finite everywhere) is alike too.
    for z in (12.5, "inf"):
        near = [
            analysis(r, [mover(LAYER, 101, 12.5 * (1 + 5e-4 * r) if z != "inf" else z, r)])
            for r in range(min(world, 2))
        ] + [analysis(r, [mover(LAYER, 101, z, r)]) for r in range(2, world)]
        assert layer_movers(merge(110, near)) == [(LAYER, None)]


@pytest.mark.parametrize("world", WORLDS)
def test_blame_is_the_first_loss_then_the_farthest_then_the_lowest_rank(world: int) -> None:
    rng = random.Random(world)
    last = world - 1
    cases: list[tuple[dict[int, tuple[int, float]], Optional[int]]] = [
        ({}, None),  # no rank's loss departed
        (dict.fromkeys(range(world), (101, 9.0)), 0),  # every rank alike: rank 0
        ({1: (101, 9.0), last: (101, 9.0)}, 1),  # a tie of two
        ({0: (101, 9.0), last: (101, 30.0)}, last),  # farther at the same onset
        ({0: (102, 90.0), last: (101, 7.0)}, last),  # earlier beats farther
        (dict.fromkeys(range(1, world), (101, 9.0)), 1),
    ]
    for losses, blamed in cases:
        analyses = [
            analysis(r, [mover("loss", *losses[r], r, kind="scalar")] if r in losses else [])
            for r in range(world)
        ]
        for _ in range(3):  # the order the slots arrive in does not matter
            rng.shuffle(analyses)
            merged = merge(110, analyses)
            assert merged["blame"] == blamed, (losses, [a["rank"] for a in analyses])
            assert merged["loss_onset"] == (min(o for o, _ in losses.values()) if losses else None)
            assert merged["ranks"] == list(range(world))
            # Every rank's loss is kept, each with its rank.
            assert sorted(m["rank"] for m in merged["movers"] if m["name"] == "loss") == sorted(
                losses
            )


@pytest.mark.parametrize("world", WORLDS)
def test_ties_between_ranks_own_layers_and_nonfinite_go_to_the_lowest_rank(world: int) -> None:
    rng = random.Random(world)
    a, b = world - 1, world // 2  # two ranks, the higher one listed first
    analyses = [analysis(r, []) for r in range(world)]
    analyses[a] = analysis(a, [mover("fc1.weight", 101, 8.0, a)])
    analyses[b] = analysis(b, [mover("fc1.weight", 101, 8.0, b)])
    for r in (a, b, 0):
        bad = {"step": 105 if r == 0 else 104, "parameter": "fc2.bias", "parameters": 1, "of": 4}
        analyses[r] = {**analyses[r], "nonfinite": bad}
    for _ in range(3):
        rng.shuffle(analyses)
        merged = merge(110, analyses)
        assert layer_movers(merged) == [("fc1.weight", b), ("fc1.weight", a)]
        assert merged["first_mover"]["rank"] == b
        assert merged["first_mover"]["lead_steps"] == 110 - 101  # no loss moved
        assert merged["nonfinite"]["rank"] == b  # step 104 on a and b: the lower
        assert merged["nonfinite"]["step"] == 104


def _job(world: int, loud: dict[int, float], start: int = 101) -> list[FlightRecorder]:
    """One recorder per rank: the same all-reduced layer norms (fc2.weight x30 from
    ``start``) and each rank's own loss, x``loud[rank]`` from ``start``; each rank's
    batch of step 110 has the ids ``1000 * rank + (0..3)``."""
    squares, _ = healthy(120, seed=11)
    squares[start - 1 :, 2] *= 30.0**2
    recorders = []
    for rank in range(world):
        _, loss = healthy(120, seed=100 + rank)
        if rank in loud:
            loss[start - 1 :] *= loud[rank]
        recorder = record(squares, loss)
        recorder.add_sample_ids(110, [1000 * rank + i for i in range(4)])
        recorders.append(recorder)
    return recorders


@pytest.mark.parametrize("world", WORLDS)
def test_slots_from_every_rank_merge_into_one_layer_and_the_loudest_rank(world: int) -> None:
    # Two ranks' losses jump (the last one more); one shared layer moved for everyone.
    loud = {1: 6.0, world - 1: 20.0}
    recorders = _job(world, loud)
    decoded = [
        decode(rank_slot(rec, 110, lookback=20, z=6.0, rank=r), r, NAMES)
        for r, rec in enumerate(recorders)
    ]
    assert all(d is not None for d in decoded)
    merged = merge(110, [d for d in decoded if d is not None])
    assert layer_movers(merged) == [(LAYER, None)]
    losses = [(m["rank"], m["onset"]) for m in merged["movers"] if m["name"] == "loss"]
    assert losses == [(world - 1, 101), (1, 101)]  # the farther first
    assert merged["blame"] == world - 1
    assert merged["first_mover"]["name"] == LAYER
    assert merged["first_mover"]["lead_steps"] == 0


def _alert(step: int, rank: int, rule: str = "spike") -> Alert:
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


@pytest.mark.parametrize("world", [3, 5, 8])
def test_every_ranks_batch_of_one_step_reaches_the_skip_list(tmp_path: Path, world: int) -> None:
    # Ranks 1 and the last both jumped at the alert's step (their batches are to blame);
    # an alert names each.
    recorders = _job(world, {1: 8.0, world - 1: 8.0}, start=110)
    slots = np.stack(
        [rank_slot(rec, 110, lookback=20, z=6.0, rank=r) for r, rec in enumerate(recorders)]
    )
    inv = Investigator(ForensicsSettings(lookback=20), recorders[0], tmp_path, 0)
    for named in (1, world - 1, 1):  # the last: the same batch reported again
        alert = _alert(110, named)
        inv.finish(alert, inv.analyse(110, 3), slots)
        assert alert.extra["forensics"]["blame"] == named
        assert alert.extra["sample_ids"] == [1000 * named + i for i in range(4)]
    # The resume lines: the file, and MindFormers resuming past the bad step.
    skip = alert.extra["forensics"]["skip"]
    assert skip["file"] == str(tmp_path / "skip.json")
    assert skip["yaml"] == ["resume_training: True", "data_skip_steps: 110"]
    skips = SkipList.load(tmp_path)
    assert [(s["step"], s["rank"]) for s in skips.steps] == [(110, 1), (110, world - 1)]
    expected = {1000 * r + i for r in (1, world - 1) for i in range(4)}
    assert skips.samples == expected


def test_the_skip_list_keeps_each_ranks_batch_once(tmp_path: Path) -> None:
    skips = SkipList()
    for rank in range(8):
        assert skips.add({"step": 7, "rank": rank, "sample_ids": [10 * rank, 10 * rank + 1]})
    assert not skips.add({"step": 7, "rank": 3, "sample_ids": [30, 31]})  # re-reported
    assert skips.add({"step": 8, "rank": 3, "sample_ids": [32]})  # the next step: its own
    assert [(s["step"], s["rank"]) for s in skips.steps] == [(7, r) for r in range(8)] + [(8, 3)]
    body = skips.to_json()
    assert body["samples"] == sorted({10 * r + k for r in range(8) for k in (0, 1)} | {32})
    # ids as the id column gives them, each once, sorted: numbers first, then strings
    mixed = SkipList([np.float32(2.0), np.int64(3), 3.0, "b", b"a", 7.5])
    mixed.add({"step": 9, "rank": 0, "sample_ids": [np.float64(11.0), b"c"]})
    mixed.write(tmp_path / "skip.json")
    # As JSON writes them: 2, not 2.0 (a float column's whole ids are ids, not measures).
    text = (tmp_path / "skip.json").read_text()
    assert json.loads(text)["samples"] == [2, 3, 7.5, 11, "a", "b", "c"]
    assert '"samples": [\n  2,\n  3,\n  7.5,\n  11,' in text
    assert '"sample_ids": [\n    11,\n    "c"\n   ]' in text


def test_a_slot_tells_ids_not_sent_from_ids_not_recorded() -> None:
    squares, loss = healthy(120, seed=3)
    recorder = record(squares, loss)
    recorder.add_sample_ids(110, ["a", "b"])  # a string id column: not sent
    got = decode(rank_slot(recorder, 110, lookback=20, z=6.0, rank=2), 2, NAMES)
    assert got is not None
    assert got["batch"] == {"rank": 2, "sample_ids": [], "nonfinite_samples": None}
    bare = decode(rank_slot(record(squares, loss), 110, lookback=20, z=6.0, rank=2), 2, NAMES)
    assert bare is not None
    assert bare["batch"] == {"rank": 2, "sample_ids": None, "nonfinite_samples": None}
