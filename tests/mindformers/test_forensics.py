"""Spike forensics on MindFormers' real Trainer: a bad batch planted in the data, with
``runner_wrapper: {local_norm: True}``, is explained in MindFormers' parameter names.

The tiny LLaMA of ``examples/mindformers/`` learns a rule (each token the one before
plus 1, one token per sample random, so the loss levels off near 0.8 instead of going to
0) for 250 steps; the batch of step 240 is random tokens (``mf_llama.py --spike``). The
flight recorder keeps MindFormers' ``local_norm`` output (each gradient's square sum, in
the order of the train cell's ``weights``, which is the optimizer's: MindFormers groups
the weights with weight decay before the norms' scales, so it is not the model's
``trainable_params()`` order).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.mindformers.test_trainer import assert_no_error_lines, run_job

STEPS, SPIKE = 250, 240


def _alerts(run_folder: Path) -> list[dict[str, Any]]:
    lines = (run_folder / "alerts.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_bad_batch_is_explained_in_mindformers_parameter_names(
    tmp_path: Path, mindformers_python: Path
) -> None:
    job = run_job(
        tmp_path,
        mindformers_python,
        local_norm=True,
        mindformers_tensorboard=False,
        steps=STEPS,
        spike=SPIKE,
        learning_rate=1e-2,  # learns the rule in about 60 steps
    )
    assert_no_error_lines(job)
    spy = {row["step"]: row for row in job.spy}
    assert sorted(spy) == list(range(1, STEPS + 1))
    # What the cell returned: the same parameters as the model's, in another order, and
    # local_norm's own element counts (its `size` output) are the weights' in order.
    assert sorted(job.weights) == sorted(job.trainable)
    assert job.weights != job.trainable
    assert all(row["size"] == job.sizes for row in job.spy)
    assert len(set(job.sizes)) > 2  # the counts tell the parameters apart
    losses = [spy[s]["loss"] for s in range(SPIKE - 40, SPIKE)]
    assert spy[SPIKE]["loss"] > 5 * statistics.median(losses)  # the planted spike

    run_folder = job.out / "output" / "mindwatch"
    explained = [a for a in _alerts(run_folder) if "forensics" in a]
    assert [(a["rule"], a["step"]) for a in explained][:1] == [("spike", SPIKE)], explained
    forensics = explained[0]["forensics"]
    first, movers = forensics["first_mover"], forensics["movers"]
    assert first["kind"] == "layer", forensics
    assert (first["onset"], first["lead_steps"]) == (SPIKE, 0), forensics
    layers = [m for m in movers if m["kind"] == "layer"]
    assert layers, movers
    assert all(m["name"] in job.trainable for m in layers), movers
    assert all(m["name"].startswith(("model.", "lm_head.")) for m in layers)
    # The first mover is the first-ranked layer. The loss moves at the same step (lead 0)
    # and may rank ahead of it or behind it by its z (9-12 for both in recorded runs; a
    # CI run had the loss first), so the order of the two is not what is pinned here.
    assert layers[0]["name"] == first["name"], movers

    # The names are bound to the right values: each layer mover's value is the square
    # root of the local_norm entry of that name at the alert's step, and its baseline
    # the median of those norms over the steps before the judged ones.
    record = json.loads((run_folder / forensics["file"]).read_text())
    assert record["layers"] == len(job.weights)
    assert set(record["heat"]["layers"]) <= set(job.weights)
    judged = record["lookback"]
    for mover in (m for m in record["movers"] if m["kind"] == "layer"):
        j = job.weights.index(mover["name"])
        norm = math.sqrt(spy[SPIKE]["local_norm"][j])
        assert mover["value"] == pytest.approx(norm, rel=1e-5), mover
        base = [math.sqrt(spy[s]["local_norm"][j]) for s in range(1, SPIKE - judged + 1)]
        assert mover["baseline"] == pytest.approx(statistics.median(base), rel=1e-5), mover


def test_without_local_norm_the_alert_says_no_layer_was_recorded_and_how(
    tmp_path: Path, mindformers_python: Path
) -> None:
    """The same bad batch with MindFormers' default ``local_norm: False``: mindwatch does
    not switch it on behind the YAML's back (docs/forensics.md, "With MindFormers"), so
    the alert's forensics and ``mindwatch explain`` say that no layer was recorded and
    which YAML line records them, instead of "no layer departed"."""
    job = run_job(
        tmp_path,
        mindformers_python,
        local_norm=False,
        mindformers_tensorboard=False,
        steps=STEPS,
        spike=SPIKE,
        learning_rate=1e-2,
    )
    assert_no_error_lines(job)
    assert all("local_norm" not in row for row in job.spy)  # the cell returned 5 outputs
    run_folder = job.out / "output" / "mindwatch"
    explained = [(n, a) for n, a in enumerate(_alerts(run_folder), start=1) if "forensics" in a]
    assert [(a["rule"], a["step"]) for _, a in explained][:1] == [("spike", SPIKE)], explained
    number, alert = explained[0]
    forensics = alert["forensics"]
    note = (
        "Per-layer gradient norms were not recorded, so no layer can be named: MindFormers' "
        "train cell returns them only with runner_wrapper: {local_norm: True} in the "
        "training YAML (docs/forensics.md)."
    )
    info = forensics["layer_norms"]
    assert (info["recorded"], info["why"], info["note"]) == (False, "mindformers", note)
    assert info["cell"] in ("MFTrainOneStepCell", "CPUTrainOneStepCell"), info
    assert "first_mover" not in forensics
    assert all(m["kind"] == "scalar" for m in forensics["movers"]), forensics
    assert forensics["loss_onset"] == SPIKE
    command = [str(mindformers_python), "-m", "mindwatch", "explain", str(run_folder)]
    done = subprocess.run(
        [*command, "--alert", str(number)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "LANGUAGE": "en"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = " ".join(done.stdout.split())
    assert "No layer was recorded; " in text, text
    assert note in text, text
    assert "No layer departed" not in text
