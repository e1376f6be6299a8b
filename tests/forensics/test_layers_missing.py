"""Without per-parameter norms no layer can depart: the recorder knows why, the analysis
says so (``layer_norms``), and every reader words it with the fix instead of "no layer
departed"; with them, none of it appears. Framework-free: a real ``Monitor``, a real
recorder and analysis, the real readers (explain, notifier text, Markdown line)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mindwatch
from mindwatch.alerts.movers import first_mover_line, layers_missing, no_layers_note
from mindwatch.common.i18n import set_language
from mindwatch.forensics import FlightRecorder, analyse
from mindwatch.tools.explain import Incident, render, story

LAYERS = ["embed.weight", "block.norm.gamma", "block.mix.weight", "head.weight"]
ONSET, ALERT, FAULTY = 80, 82, 1

FIXES = {
    "opt_out": "the train cell was built with layer_norms=False; leave layer_norms at its "
    "default to record them",
    "cell": "the train cell (MyCell) returns none; train with mindwatch.mindspore.build_model("
    "net, loss_fn, optimizer) or TrainOneStepWithGradNormCell(loss_net, optimizer), which "
    "return them by default",
    "mindformers": "MindFormers' train cell returns them only with runner_wrapper: "
    "{local_norm: True} in the training YAML",
    "loop": "nothing handed them to the flight recorder; in a loop of your own, call "
    "monitor.flight_recorder.set_layers(names) once and "
    "monitor.flight_recorder.add_layers(step, squared_norms) every step",
}


def _fed(recorder: FlightRecorder, layers: bool) -> FlightRecorder:
    """Steps 1..ALERT: one layer's norm x300 from ONSET, the grad norm with it."""
    rng = np.random.default_rng(3)
    for step in range(1, ALERT + 1):
        norms = np.array([1.0, 0.2, 0.8, 0.5]) * rng.lognormal(0.0, 0.05, len(LAYERS))
        if step >= ONSET:
            norms[FAULTY] *= 300.0
        if layers:
            recorder.add_layers(step, norms**2)
        total = float(np.sqrt((norms**2).sum()))
        recorder.add_scalars(step, {"train/loss": 1.0, "train/grad_norm": total})
    return recorder


def test_the_recorder_knows_why_it_has_no_layers() -> None:
    recorder = FlightRecorder(16)
    assert recorder.layers_missing == {"why": "loop"}  # nothing handed it any yet
    assert recorder.window(5).layers_missing == {"why": "loop"}
    recorder.set_layers([])
    assert recorder.layers_missing == {"why": "loop"}  # no names: still none
    recorder.no_layers("opt_out", "TrainOneStepWithGradNormCell")
    assert recorder.layers_missing == {"why": "opt_out", "cell": "TrainOneStepWithGradNormCell"}
    assert recorder.layer_names == []
    recorder.set_layers(LAYERS)
    assert recorder.layers_missing is None
    assert recorder.window(5).layers_missing is None


@pytest.mark.parametrize("why", sorted(FIXES))
def test_the_analysis_says_no_layer_was_recorded_and_why(why: str) -> None:
    recorder = _fed(FlightRecorder(256), layers=False)
    recorder.no_layers(why, "MyCell")
    out = analyse(recorder.window(ALERT), ALERT, lookback=32, z=6.0, rank=0)
    assert out["layer_norms"] == {"recorded": False, "why": why, "cell": "MyCell"}
    assert out["layers"] == 0
    assert "first_mover" not in out
    assert [m["name"] for m in out["movers"]] == ["grad_norm"]
    assert layers_missing(out) is out["layer_norms"]
    note = no_layers_note(out["layer_norms"])
    assert note == (
        "Per-layer gradient norms were not recorded, so no layer can be named: "
        f"{FIXES[why]} (docs/forensics.md)."
    )
    assert first_mover_line(out) == note


def test_with_layers_the_faulty_one_is_named_and_nothing_is_said_missing() -> None:
    recorder = FlightRecorder(256)
    recorder.set_layers(LAYERS)
    out = analyse(_fed(recorder, layers=True).window(ALERT), ALERT, lookback=32, z=6.0, rank=0)
    assert "layer_norms" not in out
    assert layers_missing(out) is None
    assert (out["first_mover"]["name"], out["first_mover"]["onset"]) == (LAYERS[FAULTY], ONSET)
    line = first_mover_line(out)
    assert line is not None
    assert line.startswith(f"first mover: layer {LAYERS[FAULTY]} on rank 0")
    assert "not recorded" not in line


def _story(forensics: dict[str, Any], tmp_path: Path, analysis: Any = None) -> str:
    alert = {"rule": "grad_explosion", "severity": "warning", "metric": "train/grad_norm",
             "step": ALERT, "message": "x"}  # fmt: skip
    incident = Incident(1, alert, forensics, tmp_path)
    incident.read()
    if analysis is not None:
        incident.analysis = analysis
    return " ".join(" ".join(render(story(incident))).split())


def test_the_story_says_no_layer_was_recorded_with_the_fix(tmp_path: Path) -> None:
    recorder = _fed(FlightRecorder(256), layers=False)
    recorder.no_layers("mindformers", "MFTrainOneStepCell")
    out = analyse(recorder.window(ALERT), ALERT, lookback=32, z=6.0, rank=0)
    text = _story(out, tmp_path)
    assert f"No layer was recorded; grad_norm moved first, from step {ONSET} (z " in text
    assert no_layers_note(out["layer_norms"]) in text
    assert "runner_wrapper: {local_norm: True}" in text
    assert "No layer departed" not in text
    # nothing departed at all: still no claim about layers
    quiet = {**out, "movers": []}
    told = _story(quiet, tmp_path)
    assert "No layer was recorded, and nothing else departed" in told
    assert no_layers_note(out["layer_norms"]) in told
    # per rank, under msrun
    slot = {"rank": 1, "loss_onset": 81, "movers": []}
    ranks = _story({**out, "ranks": [0, 1]}, tmp_path, {**out, "per_rank": [slot]})
    assert "Rank 1: no layer recorded; its loss departed at step 81." in ranks
    assert "no layer departed" not in ranks


def test_the_story_with_layers_says_nothing_of_missing_ones(tmp_path: Path) -> None:
    recorder = FlightRecorder(256)
    recorder.set_layers(LAYERS)
    out = analyse(_fed(recorder, layers=True).window(ALERT), ALERT, lookback=32, z=6.0, rank=0)
    text = _story(out, tmp_path)
    assert f"layer {LAYERS[FAULTY]} on rank 0 moved" in text
    assert "not recorded" not in text
    assert "No layer was recorded" not in text


def test_in_chinese() -> None:
    info = {"recorded": False, "why": "opt_out", "cell": "TrainOneStepWithGradNormCell"}
    set_language("zh")
    try:
        note = no_layers_note(info)
        line = first_mover_line({"layer_norms": info, "movers": []})
    finally:
        set_language(None)
    assert note == (
        "没有记录逐层梯度范数，因此无法指出是哪一层：训练单元构建时设置了 layer_norms=False；"
        "保留 layer_norms 的默认值即可记录（docs/forensics.md）。"
    )
    assert line == note


def test_a_monitor_in_a_loop_of_ones_own_writes_the_note_into_alerts_jsonl(
    tmp_path: Path,
) -> None:
    """No adapter, nothing handed over: the alert's forensics say so, with the loop's fix;
    handed over through ``flight_recorder``, the faulty layer is named instead."""
    for handed in (False, True):
        folder = tmp_path / ("handed" if handed else "plain")
        with mindwatch.Monitor(folder, {"print_every": 0}) as mon:
            recorder = mon.flight_recorder
            assert recorder is not None
            if handed:
                recorder.set_layers(LAYERS)
            rng = np.random.default_rng(5)
            for step in range(1, 120):
                norms = np.array([1.0, 0.2, 0.8, 0.5]) * rng.lognormal(0.0, 0.05, 4)
                if step >= ONSET:
                    norms[FAULTY] *= 300.0
                if handed:
                    recorder.add_layers(step, norms**2)
                mon.log_step(step, loss=1.0, grad_norm=math.sqrt(float((norms**2).sum())))
        lines = (next(folder.rglob("alerts.jsonl"))).read_text().splitlines()
        explained = [json.loads(x) for x in lines if '"forensics"' in x]
        assert explained, lines
        forensics = explained[0]["forensics"]
        if handed:
            assert "layer_norms" not in forensics
            assert forensics["first_mover"]["name"] == LAYERS[FAULTY]
        else:
            assert forensics["layer_norms"] == {
                "recorded": False,
                "why": "loop",
                "note": "Per-layer gradient norms were not recorded, so no layer can be "
                f"named: {FIXES['loop']} (docs/forensics.md).",
            }
