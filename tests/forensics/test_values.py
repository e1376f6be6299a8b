"""Values the forensics hand on that other tests only saw exist: the heatmap's rows and
their order, a window built by hand, a gradient that fell to exactly zero, the shortest
window judged, the analysis's header, what a slot carries back (the first parameter's
name, the peak, whole ids as ints, the loss's kind and value, no non-finite gradient
where there was none), the recorder's bound on non-finite samples, and skip lists with
ids a dataset's bytes or non-ASCII strings give (found by ``make mutation``:
docs/dev/mutation/forensics.md)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from mindwatch.forensics import FlightRecorder, SkipList, analyse, movers
from mindwatch.forensics.exchange import decode, merge, rank_slot
from mindwatch.forensics.recorder import Window
from tests.forensics.test_analysis import NAMES, healthy, record


def _flat(names: list[str], factors: dict[int, float], steps: int = 60, at: int = 46):
    """A recorder of ``steps`` steps whose every norm is 1.0 (a flat baseline, judged
    against the 1 % floor) and whose parameter ``j`` is x``factors[j]`` from step ``at``
    on; the loss is flat."""
    recorder = FlightRecorder(256)
    recorder.set_layers(names)
    for step in range(1, steps + 1):
        row = np.ones(len(names))
        if step >= at:
            for j, f in factors.items():
                row[j] = f
        recorder.add_layers(step, row**2)
        recorder.add_scalars(step, {"loss": 1.0})
    return recorder


def test_the_heatmap_shows_the_movers_then_the_largest_others_up_to_twelve() -> None:
    # 16 parameters whose cell order, name order and size order all differ: two depart
    # (z 18 and 9.5), the others rise by less than z (0.3 x k each, k all different).
    names = [f"layers.{j}.w" for j in range(16)]
    small = [7, 2, 13, 0, 11, 5, 19, 3, 17, 9, 1, 15, 4, 8]  # k of the 14 others
    others = [j for j in range(16) if j not in (5, 9)]
    factors = {5: 1.2, 9: 1.1}
    factors.update({j: 1.0 + 0.003 * k for j, k in zip(others, small)})
    out = analyse(_flat(names, factors).window(60), 60, lookback=20, z=6.0)
    assert [m["name"] for m in out["movers"]] == ["layers.5.w", "layers.9.w"]
    by_size = sorted(zip(others, small), key=lambda jk: -jk[1])
    expected = ["layers.5.w", "layers.9.w", *[names[j] for j, _ in by_size][:10]]
    assert out["heat"]["layers"] == expected
    assert out["heat"]["steps"] == list(range(41, 61))
    # Each row is that parameter's score per judged step: 0 before step 46, then ln f / 1 %.
    for name, row in zip(out["heat"]["layers"], out["heat"]["z"]):
        f = factors[names.index(name)]
        assert row == [0.0] * 5 + [round(math.log(f) / 0.01, 2)] * 15


def test_a_window_built_by_hand_counts_every_value_as_logged() -> None:
    # Window's promise: no scalars_logged entry, or layers_logged None, is "logged at
    # every step" (not an error).
    steps = list(range(1, 41))
    loss = np.ones(40)
    loss[35:] = 5.0
    layers = np.ones((40, len(NAMES)))
    layers[32:, 1] = 40.0
    window = Window(steps, {"loss": loss}, layers, list(NAMES))
    ranked = movers(window, 40, lookback=10, z=6.0)
    assert [(m.name, m.kind, m.onset) for m in ranked] == [
        ("fc1.bias", "layer", 33),
        ("loss", "scalar", 36),
    ]
    out = analyse(window, 40, lookback=10, z=6.0)
    assert out["first_mover"]["lead_steps"] == 3


def test_a_gradient_that_falls_to_zero_is_not_finite_in_log_and_warns_nothing() -> None:
    squares, loss = healthy(60, seed=2)
    squares[55, 3] = 0.0  # fc2.bias's gradient exactly 0 at step 56 (log: -inf)
    window = record(squares, loss).window(60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "divide by zero in log" is noise
        out = analyse(window, 60, lookback=16, z=6.0)
        down = movers(window, 60, lookback=16, z=6.0, direction="down")
    assert [(m["name"], m["onset"], m["z"]) for m in out["movers"]] == [("fc2.bias", 56, "inf")]
    assert [(m.name, m.onset, m.z) for m in down] == [("fc2.bias", 56, math.inf)]


@pytest.mark.parametrize(("steps", "judged"), [(3, False), (4, True), (5, True)])
def test_the_shortest_window_judged_has_two_baseline_steps(steps: int, judged: bool) -> None:
    # An alert at step 4 (2 steps of baseline, 2 judged) names what moved; at step 3 the
    # baseline would be one step: no analysis.
    recorder = _flat(NAMES, {2: 100.0}, steps=steps, at=steps)
    out = analyse(recorder.window(steps), steps, lookback=32, z=6.0)
    if judged:
        assert [(m["name"], m["onset"]) for m in out["movers"]] == [("fc2.weight", steps)]
        assert out["heat"]["steps"] == list(range(steps // 2 + 1, steps + 1))
    else:
        assert out["movers"] == []
        assert "heat" not in out


def test_the_analysis_names_its_step_rank_window_and_settings() -> None:
    squares, loss = healthy(80, seed=1)
    out = analyse(record(squares, loss).window(70), 70, lookback=24, z=5.5, rank=3)
    head = {k: out[k] for k in ("step", "rank", "recorded", "lookback", "z", "layers")}
    assert head == {
        "step": 70,
        "rank": 3,
        "recorded": [1, 70],
        "lookback": 24,
        "z": 5.5,
        "layers": 4,
    }


def _slotted(rank: int, layer: int, *, broken: bool = False, world_loss: float = 8.0):
    """One rank's recorder: ``layer``'s gradient x30 and the loss x``world_loss`` from
    step 101, ids 1000 * rank + (0..3) at step 110; with ``broken`` that layer's
    gradient is NaN at step 108."""
    squares, loss = healthy(120, seed=20 + rank)
    squares[100:, layer] *= 30.0**2
    loss[100:] *= world_loss
    if broken:
        squares[107, layer] = math.nan
    recorder = record(squares, loss)
    recorder.add_sample_ids(110, [1000 * rank + i for i in range(4)])
    return recorder, loss


@pytest.mark.parametrize("layer", range(len(NAMES)))
def test_a_slot_names_every_parameter_including_the_first(layer: int) -> None:
    recorder, _ = _slotted(1, layer, broken=True)
    full = analyse(recorder.window(110), 110, lookback=20, z=6.0, rank=1)
    got = decode(rank_slot(recorder, 110, lookback=20, z=6.0, rank=1), 1, NAMES)
    assert got is not None
    assert [m["name"] for m in got["movers"] if m["kind"] == "layer"] == [NAMES[layer]]
    assert got["nonfinite"] == {"step": 108, "parameter": NAMES[layer], "parameters": 1, "of": 4}
    # The peak travels too (NaN at 108 scores +inf: its peak is no number, None).
    sent = next(m for m in full["movers"] if m["kind"] == "layer")
    back = next(m for m in got["movers"] if m["kind"] == "layer")
    assert sent["peak_z"] is None
    assert back["peak_z"] is None
    # Indices beyond the receiver's names (or none at all) are shown as indices.
    short = decode(rank_slot(recorder, 110, lookback=20, z=6.0, rank=1), 1, NAMES[:layer])
    assert short is not None
    assert [m["name"] for m in short["movers"] if m["kind"] == "layer"] == [f"#{layer}"]
    assert short["nonfinite"]["parameter"] == f"#{layer}"


def test_a_slot_carries_the_peak_the_loss_and_whole_ids_as_ints() -> None:
    recorder, loss = _slotted(2, 0)
    full = analyse(recorder.window(110), 110, lookback=20, z=6.0, rank=2)
    got = decode(rank_slot(recorder, 110, lookback=20, z=6.0, rank=2), 2, NAMES)
    assert got is not None
    sent = next(m for m in full["movers"] if m["kind"] == "layer")
    back = next(m for m in got["movers"] if m["kind"] == "layer")
    assert sent["peak_z"] > sent["z"] > 6.0  # the noise after the onset peaks higher
    assert back["peak_z"] == pytest.approx(sent["peak_z"], rel=1e-5)
    lost = got["movers"][0]
    assert (lost["name"], lost["kind"], lost["rank"]) == ("loss", "scalar", 2)
    assert lost["value"] == pytest.approx(float(loss[109]))  # the loss at step 110
    ids = got["batch"]["sample_ids"]
    assert ids == [2000, 2001, 2002, 2003]
    assert [type(v) for v in ids] == [int] * 4
    assert json.dumps(ids) == "[2000, 2001, 2002, 2003]"  # as the forensics file shows them


def test_fractional_ids_stay_fractional_through_a_slot() -> None:
    recorder, _ = _slotted(0, 2)
    recorder.add_sample_ids(110, [7, 7.5, 2**40])
    got = decode(rank_slot(recorder, 110, lookback=20, z=6.0, rank=0), 0, NAMES)
    assert got is not None
    assert got["batch"]["sample_ids"] == [7, 7.5, 2**40]
    assert [type(v) for v in got["batch"]["sample_ids"]] == [int, float, int]


@pytest.mark.parametrize("world", [3, 5, 8])
def test_only_the_rank_with_a_non_finite_gradient_reports_one(world: int) -> None:
    # Every rank moved (the same layer) but only one rank's gradient was ever NaN: the
    # others' slots say "none", and the merge names that rank.
    broken = world - 2
    decoded = []
    for r in range(world):
        recorder, _ = _slotted(r, 1, broken=r == broken)
        got = decode(rank_slot(recorder, 110, lookback=20, z=6.0, rank=r), r, NAMES)
        assert got is not None
        assert ("nonfinite" in got) == (r == broken)
        decoded.append(got)
    merged = merge(110, decoded)
    assert merged["nonfinite"] == {
        "step": 108,
        "parameter": "fc1.bias",
        "parameters": 1,
        "of": 4,
        "rank": broken,
    }


def test_the_recorder_keeps_non_finite_samples_of_its_window_only() -> None:
    recorder = FlightRecorder(8)
    recorder.set_layers(NAMES)
    for step in range(1, 51):
        recorder.add_layers(step, np.ones(len(NAMES)))
        recorder.add_sample_ids(step, [step])
        recorder.add_nonfinite_samples(step, [step, -step])
    window = recorder.window(50)
    assert window.steps == list(range(43, 51))
    assert sorted(window.nonfinite_samples) == list(range(43, 51))
    assert sorted(window.sample_ids) == list(range(43, 51))


def test_ids_of_bytes_that_are_not_utf8_are_kept_readable(tmp_path: Path) -> None:
    skips = SkipList([b"img-\xff\xfe.jpg", b"ok.jpg"])
    assert skips.samples == {"img-\ufffd\ufffd.jpg", "ok.jpg"}
    assert not skips.keep(np.array([b"img-\xff\xfe.jpg"]))
    assert skips.keep(np.array([b"other.jpg"]))
    skips.write(tmp_path / "skip.json")
    assert SkipList.load(tmp_path).samples == skips.samples


def test_the_skip_list_writes_non_ascii_ids_as_they_are(tmp_path: Path) -> None:
    # A user greps skip.json for the id their dataset shows: written as text, not \\u escapes.
    skips = SkipList()
    skips.add({"step": 5, "rank": 0, "sample_ids": ["样本-7", "échantillon-3"]})
    skips.write(tmp_path / "skip.json")
    text = (tmp_path / "skip.json").read_text(encoding="utf-8")
    assert '"样本-7"' in text
    assert '"échantillon-3"' in text
    assert SkipList.load(tmp_path).samples == {"样本-7", "échantillon-3"}
    assert [p.name for p in tmp_path.iterdir()] == ["skip.json"]  # no part file left
