"""Runs with forensics written as the pipeline writes them (alerts.jsonl lines with a
``forensics`` summary, ``forensics/<alert>.json`` with the whole analysis), from a
real :class:`FlightRecorder` fed planted series and a real :func:`analyse`.

The planted fault: on rank 1, from ``ONSET`` one layer's gradient grows 40x; the other
layers and the loss follow three steps later; the alert fires at ``ALERT_STEP``; all is
back to normal from ``RECOVERED``. Rank 0 stays healthy. A second alert, at
``NAN_STEP``, is a non-finite one: NaN in two layers' gradients and in one sample's
input. A first alert (info) has no forensics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

import mindwatch
from mindwatch.alerts.model import Alert
from mindwatch.forensics import SKIP_FILE, FlightRecorder, SkipList, analyse, resume_hint

MODULES = (
    "attention.wq.weight",
    "attention.wk.weight",
    "attention.wv.weight",
    "attention.wo.weight",
    "feed_forward.w1.weight",
    "feed_forward.w2.weight",
    "feed_forward.w3.weight",
    "attention_norm.weight",
    "ffn_norm.weight",
)
LONG = "model.layers.11.attention.wq.weight"  # MindFormers' LLaMA names
NAN_FIRST = "model.layers.7.attention.wv.weight"  # the later of the two NaN layers
NAN_OTHER = "model.layers.3.feed_forward.w2.weight"
ONSET = 296
ALERT_STEP = 300
RECOVERED = 330
NAN_STEP = 420
SAMPLES = list(range(4800, 4808))
BAD_SAMPLE = 4803
LOOKBACK, Z = 32, 6.0
# The skip lines as the pipeline writes them (mindwatch.forensics.skiplist), for a file
# named relative to the run folder and an id column called sample_id.
SKIP = resume_hint(Path("skip.json"), column="sample_id", step=NAN_STEP)


def names(prefix: str = "") -> list[str]:
    """A tiny LLaMA's parameters in the cell's (forward) order, each after ``prefix``."""
    body = (
        ["model.tok_embeddings.embedding_weight"]
        + [f"model.layers.{i}.{m}" for i in range(12) for m in MODULES]
        + ["model.norm_out.weight", "lm_head.weight"]
    )
    return [prefix + name for name in body]


def _record(layers: list[str], planted: str, healthy: bool, seed: int) -> FlightRecorder:
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.05, 3.0, len(layers))
    recorder = FlightRecorder(256)
    recorder.set_layers(layers)
    for step in range(1, NAN_STEP + 1):
        norms = scale * rng.lognormal(0.0, 0.1, len(layers))
        loss = 2.0 * rng.lognormal(0.0, 0.05)
        if not healthy and ONSET <= step < RECOVERED:
            norms[layers.index(planted)] *= 40.0
        if not healthy and ONSET + 3 <= step < RECOVERED:
            norms *= 3.0
            loss *= 4.0
        squares = norms**2
        if not healthy and step >= NAN_STEP:
            squares[_index(layers, NAN_OTHER)] = np.nan
            squares[_index(layers, NAN_FIRST)] = np.nan
            loss = float("nan")
        recorder.add_layers(step, squares)
        recorder.add_scalars(step, {"train/loss": loss, "lr": 1e-4, "train/grad_norm": 5.0})
        ids = SAMPLES if step == NAN_STEP else [step * 16 + k for k in range(8)]
        recorder.add_sample_ids(step, ids)
        if step == NAN_STEP and not healthy:
            recorder.add_nonfinite_samples(step, [BAD_SAMPLE])
    return recorder


def _index(layers: list[str], name: str) -> int:
    return next(i for i, n in enumerate(layers) if n.endswith(name))


def _alert(rule: str, severity: str, step: int, message: str, batch: int = 0) -> Alert:
    return Alert(
        rule=rule,
        severity=severity,  # type: ignore[arg-type]
        metric="train/grad_norm",
        value=102.0,
        step=step,
        message=message,
        rank=1,
        batch=batch or None,
        run="planted",
    )


def write_run(
    folder: Path,
    *,
    planted: str = LONG,
    prefix: str = "",
    files: bool = True,
    ranks: bool = True,
) -> Path:
    """A run folder with event files, an info alert without forensics and two analysed
    alerts (``files``: with their forensics files; ``ranks``: analysed on both ranks)."""
    with mindwatch.Monitor(folder, {"print_every": 0, "alerts": {"enabled": False}}) as mon:
        for step in range(1, NAN_STEP + 1):
            mon.log_scalars(step, {"train/loss": 2.0 if step < ONSET + 3 else 8.0})
    layers = names(prefix)
    recorders = {
        0: _record(layers, prefix + planted, True, 10),
        1: _record(layers, prefix + planted, False, 11),
    }
    written = [_alert("loss_plateau", "info", 200, "loss has not improved for 100 steps")]
    analysed = [
        _alert("grad_explosion", "critical", ALERT_STEP, "gradient norm 102 is 11x its running "
               "median 9.5", batch=4),
        _alert("nonfinite", "critical", NAN_STEP, "loss is NaN", batch=6),
    ]  # fmt: skip
    (folder / "forensics").mkdir(exist_ok=True)
    for alert in analysed:
        step = alert.step
        per_rank = [
            analyse(r.window(step), step, lookback=LOOKBACK, z=Z, rank=k, batch=alert.batch)
            for k, r in recorders.items()
        ]
        full = per_rank[1]
        name = f"forensics/step-{step}-{alert.rule}.json"
        summary: dict[str, Any] = {
            "file": name,
            "movers": full["movers"][:5],
            "loss_onset": full["loss_onset"],
        }
        for key in ("first_mover", "nonfinite", "batch"):
            if key in full:
                summary[key] = full[key]
        if ranks:
            summary["ranks"] = [0, 1]
        if step == NAN_STEP:
            summary["skip"] = SKIP
            skips = SkipList()
            skips.add({"step": step, "rank": 1, "sample_ids": [BAD_SAMPLE]})
            skips.write(folder / SKIP_FILE)
        document: dict[str, Any] = {**full, "alert": alert.to_dict()}
        if ranks:
            document["per_rank"] = per_rank
        if files:
            (folder / name).write_text(json.dumps(document), encoding="utf-8")
        alert.extra = {"forensics": summary, "sample_ids": full["batch"]["sample_ids"]}
        written.append(alert)
    lines = "".join(a.to_json() + "\n" for a in written)
    (folder / "alerts.jsonl").write_text(lines, encoding="utf-8")
    return folder
