"""Runs with forensics written as the pipeline writes them (alerts.jsonl lines with a
``forensics`` summary, ``forensics/<alert>.json`` with the whole analysis), from a
real :class:`FlightRecorder` fed planted series and a real :func:`analyse`.

The planted fault: from ``ONSET`` one layer's gradient grows 40x, the other layers
(and the loss) follow three steps later; the alert fires at ``ALERT_STEP``. A second
alert is a non-finite one: NaN in two layers' gradients and one sample's input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

import mindwatch
from mindwatch.alerts.model import Alert
from mindwatch.forensics import FlightRecorder, analyse

LONG = "model.layers.11.attention.wq.weight"
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
NAMES = (
    ["model.tok_embeddings.embedding_weight"]
    + [f"model.layers.{i}.{m}" for i in range(12) for m in MODULES]
    + ["model.norm_out.weight", "lm_head.weight"]
)
ONSET = 296
ALERT_STEP = 300
NAN_STEP = 420
SAMPLES = list(range(4800, 4808))
LOOKBACK, Z = 32, 6.0
SKIP = {
    "file": "skip.json",
    "python": [
        "from mindwatch.forensics import skip_batches",
        "dataset = skip_batches(dataset, 'skip.json')  # before Model.train",
        "dataset = dataset.filter(lambda i: i not in [4800, 4801, 4802, 4803, 4804, 4805, "
        "4806, 4807], input_columns=['sample_id'])",
    ],
    "yaml": ["mindwatch:", "  skip_batches: skip.json"],
}


def _record(rank: int, planted: Optional[str], steps: int, seed: int) -> FlightRecorder:
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.05, 3.0, len(NAMES))
    recorder = FlightRecorder(256)
    recorder.set_layers(NAMES)
    for step in range(1, steps + 1):
        norms = scale * rng.lognormal(0.0, 0.1, len(NAMES))
        loss = 2.0 * rng.lognormal(0.0, 0.05)
        if planted is not None and step >= ONSET:
            norms[NAMES.index(planted)] *= 40.0
        if planted is not None and step >= ONSET + 3:
            norms *= 3.0
            loss *= 4.0
        squares = norms**2
        if planted is not None and step >= NAN_STEP:
            squares[NAMES.index("model.layers.3.feed_forward.w2.weight")] = np.nan
            squares[NAMES.index("model.layers.7.attention.wv.weight")] = np.nan
            loss = float("nan")
        recorder.add_layers(step, squares)
        recorder.add_scalars(step, {"train/loss": loss, "lr": 1e-4, "train/grad_norm": 5.0})
        recorder.add_sample_ids(
            step, [step * 16 + k for k in range(8)] if step != NAN_STEP else SAMPLES
        )
        if step == NAN_STEP:
            recorder.add_nonfinite_samples(step, [4803])
    return recorder


def _alert(rule: str, severity: str, step: int, message: str, **fields: Any) -> Alert:
    return Alert(
        rule=rule,
        severity=severity,
        metric="train/grad_norm",
        value=102.0,  # type: ignore[arg-type]
        step=step,
        message=message,
        rank=1,
        run="planted",
        **fields,
    )


def write_run(
    folder: Path,
    *,
    planted: str = LONG,
    files: bool = True,
    ranks: bool = True,
) -> Path:
    """A run folder with event files, two analysed alerts and an info one without."""
    with mindwatch.Monitor(folder, {"print_every": 0, "alerts": {"enabled": False}}) as mon:
        for step in range(1, NAN_STEP + 1):
            mon.log_scalars(step, {"train/loss": 2.0 if step < ONSET + 3 else 8.0})
    recorders = {0: _record(0, None, NAN_STEP, 10), 1: _record(1, planted, NAN_STEP, 11)}
    lines = [_alert("loss_plateau", "info", 200, "loss has not improved for 100 steps")]
    alerts = [
        (_alert("grad_explosion", "critical", ALERT_STEP,
                "gradient norm 102 is 11x its running median 9.5", batch=4), ALERT_STEP, 4),
        (_alert("nonfinite", "critical", NAN_STEP, "loss is NaN", batch=6), NAN_STEP, 6),
    ]  # fmt: skip
    (folder / "forensics").mkdir(exist_ok=True)
    for alert, step, batch in alerts:
        per_rank = [
            analyse(r.window(step), step, lookback=LOOKBACK, z=Z, rank=k, batch=batch)
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
        alert.extra = {"forensics": summary, "sample_ids": full["batch"]["sample_ids"]}
        if files:
            document = {**full, "alert": {**alert.to_dict(), "forensics": None}}
            del document["alert"]["forensics"]
            if ranks:
                document["per_rank"] = per_rank
            (folder / name).write_text(json.dumps(document), encoding="utf-8")
        lines.append(alert)
    (folder / "alerts.jsonl").write_text(
        "".join(a.to_json() + "\n" for a in lines), encoding="utf-8"
    )
    return folder
