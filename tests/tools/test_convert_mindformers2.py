"""``mindwatch convert`` on MindFormers 2.x PyNative logs.

The lines are written here with 2.1's own format strings (``LossCallback._print_log``,
``TrainStateMonitor``'s JSON and norm lines, ``MaxLogitsMonitor._dump``; read from the
2.1.0 wheel: ``docs/dev/mindformers-2.1-source.md``, sections 5 and 7) behind its
logger's prefix, from seeded random values of every magnitude the formats print: the
fixture is the format, not a recorded run (2.1's PyNative trainer cannot be imported
here without ``hyper_parallel``). Every value must come back as printed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest
from click.testing import CliRunner

from mindwatch.cli import main
from mindwatch.tools.convert.log_lines import LogParser
from tests.tbread import scalars

PREFIX = "2026-10-20 10:00:00,123 - mindformers[{}:{}] - INFO - "
LOSS_CALLBACK = PREFIX.format("mindformers/pynative/callback/loss_callback.py", 337)
MONITOR = PREFIX.format("mindformers/pynative/tools/monitor.py", 110)
LOGITS = PREFIX.format("mindformers/pynative/callback/max_logits_monitor.py", 90)
PARAMS = ["model.layers.0.attention.wq.weight", "model.layers.1.feed_forward.w1.weight"]
STEPS = 120
MTP = 2


def loss_line(row: dict[str, Any], max_steps: int) -> str:
    """``LossCallback._print_log``'s line, part by part as 2.1 builds it."""
    parts = [f"step:[{row['step']:5d}/{max_steps:5d}]"]
    if row["loss"] is None:  # a non-last pipeline stage
        parts += ["consumed_samples: None", "global_batch_size: None"]
        parts.append("loss: N/A (non-last PP stage, refer to last stage for real loss)")
        parts.append(f"per_step_time: {row['step_time']:6d}ms")
        parts.append("grad_norm: NaN")
        return LOSS_CALLBACK + f"{{ {', '.join(parts)} }}"
    parts.append(f"consumed_samples: {row['consumed_samples']}")
    parts.append(f"global_batch_size: {row['global_batch_size']}")
    parts.append(f"loss: {row['loss']:10.6f}")
    parts.append(f"per_step_time: {row['step_time']:6d}ms")
    parts.append(f"load_balancing_loss: {row['load_balancing_loss']:10.6f}")
    parts.append(f"indexer_loss: {row['indexer_loss']:10.6f}")
    parts.append(", ".join(f"mtp_{i + 1}_loss: {v:10.6f}" for i, v in enumerate(row["mtp"])))
    parts.append(f"lr: {row['lr']:10.6e}")
    norm = row["grad_norm"]
    parts.append(f"grad_norm: {norm:10.6f}" if norm is not None else "grad_norm: NaN")
    parts.append(f"throughput: {row['throughput']:6.2f}T")
    return LOSS_CALLBACK + f"{{ {', '.join(parts)} }}"


def monitor_lines(step: int, rng: np.random.Generator, micro_steps: int) -> list[str]:
    """``TrainStateMonitor``'s records of one step: local losses (one per micro-step),
    the device loss, the local norms of each micro-step and the device norms."""
    lines = []
    for micro in range(1, micro_steps + 1):
        record = {"step": step, "micro_step": micro, "local_loss": float(rng.uniform(0, 3))}
        lines.append(MONITOR + json.dumps(record))
    lines.append(MONITOR + json.dumps({"step": step, "device_loss": float(rng.uniform(0, 3))}))
    for micro in range(1, micro_steps + 1):
        lines.append(MONITOR + json.dumps({"step": step, "micro_step": micro}))
        for name in PARAMS:
            norm = float(10 ** rng.uniform(-4, 3))
            lines.append(MONITOR + f'{{ "local_norm": {f"{name}: {norm:10.6f}"} }}')
    lines.append(MONITOR + json.dumps({"step": step}))
    for name in PARAMS:
        norm = float(10 ** rng.uniform(-4, 3))
        lines.append(MONITOR + f'{{ "device_norm": {f"{name}: {norm:10.6f}"} }}')
    return lines


def logit_lines(step: int, rng: np.random.Generator) -> list[str]:
    """``MaxLogitsMonitor._dump``'s ``"step:[%5d/%5d] %s: %s"``: a list per parameter
    (one value a head, ``.4g``), then the largest of all."""
    heads = {name: [float(v) for v in rng.uniform(0, 200, size=4)] for name in PARAMS}
    out = []
    for name, values in heads.items():
        text = "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
        out.append(LOGITS + f"step:[{step:5d}/{STEPS:5d}] max_attention_logit/{name}: {text}")
    largest = max(max(v) for v in heads.values())
    out.append(LOGITS + f"step:[{step:5d}/{STEPS:5d}] max_attention_logit/max: {largest:.4g}")
    return out


def rows(seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for step in range(1, STEPS + 1):
        out.append(
            {
                "step": step,
                "consumed_samples": 8 * step,
                "global_batch_size": 8,
                "loss": float(10 ** rng.uniform(-3, 2)),
                "step_time": int(rng.integers(1, 999_999)),
                "load_balancing_loss": float(rng.uniform(0, 1)),
                "indexer_loss": float(rng.uniform(0, 1)),
                "mtp": [float(rng.uniform(0, 10)) for _ in range(MTP)],
                "lr": float(10 ** rng.uniform(-8, -1)),
                "grad_norm": float(10 ** rng.uniform(-2, 4)),
                "throughput": float(rng.uniform(0, 999)),
            }
        )
    out[40]["loss"] = out[40]["grad_norm"] = math.nan  # non-finite: printed as nan
    out[41]["loss"] = None  # a non-last pipeline stage's line
    out[42]["grad_norm"] = None  # no norm: the literal NaN
    return out


def write_log(path: Path, seed: int, micro_steps: int = 2) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed + 1000)
    table = rows(seed)
    lines = ["2026-10-20 09:59:59,000 - mindformers[trainer.py:964] - INFO - training starts"]
    for row in table:
        lines.append(loss_line(row, STEPS))
        lines += monitor_lines(row["step"], rng, micro_steps)
        lines += logit_lines(row["step"], rng)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return table


def printed(value: float, spec: str) -> float:
    return float(format(value, spec))


def f32(value: float) -> float:
    return float(np.float32(value))


def _series(folder: Path) -> dict[str, dict[int, float]]:
    return {tag: dict(points) for tag, points in scalars(folder).items()}


def _same(got: Optional[float], want: float) -> bool:
    if got is None:
        return False
    if math.isnan(want):
        return math.isnan(got)
    return got == f32(want)


def test_every_value_of_a_2x_log_comes_back_as_printed(tmp_path: Path) -> None:
    log = tmp_path / "worker_0.log"
    table = write_log(log, seed=0)
    done = CliRunner().invoke(main, ["convert", str(log), str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert "0 monitor-like lines not understood" in done.output, done.output
    ours = _series(tmp_path / "out")
    fields = {
        "train/loss": ("loss", "10.6f"),
        "train/load_balancing_loss": ("load_balancing_loss", "10.6f"),
        "train/indexer_loss": ("indexer_loss", "10.6f"),
        "train/lr": ("lr", "10.6e"),
        "train/grad_norm": ("grad_norm", "10.6f"),
        "perf/tflops_per_device": ("throughput", "6.2f"),  # 2.x's TFLOPS, not samples/s
        "perf/step_time_ms": ("step_time", "d"),
        "train/consumed_samples": ("consumed_samples", "d"),
        "train/batch_size": ("global_batch_size", "d"),
    }
    for tag, (key, spec) in fields.items():
        expected = {
            r["step"]: printed(r[key], spec)
            for r in table
            if r[key] is not None and (r["loss"] is not None or key == "step_time")
        }
        got = ours[tag]
        assert sorted(got) == sorted(expected), tag
        assert all(_same(got[s], v) for s, v in expected.items()), tag
    for i in range(MTP):
        got = ours[f"train/mtp_{i + 1}_loss"]
        expected = {
            r["step"]: printed(r["mtp"][i], "10.6f") for r in table if r["loss"] is not None
        }
        assert got == {s: f32(v) for s, v in expected.items()}
    assert "perf/samples_per_s" not in ours
    assert math.isnan(ours["train/loss"][41])  # printed nan: kept
    assert math.isnan(ours["train/grad_norm"][41])
    assert 42 not in ours["train/loss"]  # N/A: a non-last stage's line
    assert 42 in ours["perf/step_time_ms"]
    assert 43 not in ours["train/grad_norm"]  # the literal NaN: no norm
    assert 43 in ours["train/loss"]


def test_monitor_records_become_layer_norms_losses_and_logits(tmp_path: Path) -> None:
    log = tmp_path / "worker_0.log"
    write_log(log, seed=1)
    parser, expected = LogParser(), {}
    step = 0
    micro = 1
    for line in log.read_text().splitlines():
        parser.feed(line)
        body = line.split(" - INFO - ", 1)[-1]
        if body.startswith('{"step"'):
            record = json.loads(body)
            step, micro = record["step"], record.get("micro_step", 1)
            for key in ("local_loss", "device_loss"):
                if key in record:
                    suffix = "" if micro == 1 else f"/micro_{micro}"
                    expected[(f"train/{key}{suffix}", step)] = record[key]
        elif body.startswith('{ "step"'):
            record = json.loads(body)
            step, micro = record["step"], record.get("micro_step", 1)
        elif body.startswith(('{ "local_norm"', '{ "device_norm"')):
            kind, rest = body[3:].split('": ', 1)
            name, value = rest.rstrip(" }").rsplit(": ", 1)
            folder = {"device_norm": "layers/device_norm"}.get(kind)
            folder = folder or (
                "layers/grad_norm" if micro == 1 else f"layers/local_norm_micro_{micro}"
            )
            expected[(f"{folder}/{name}", step)] = float(value)
        elif "max_attention_logit/" in body:
            head, value = body.split("] ", 1)[1].split(": ", 1)
            values = [float(v) for v in value.strip("[]").split(",")]
            expected[(head, int(body[6:].split("/")[0]))] = max(values)
    assert parser.skipped == 0
    out = tmp_path / "out"
    done = CliRunner().invoke(main, ["convert", str(log), str(out)])
    assert done.exit_code == 0, done.output
    ours = _series(out)
    got = {(tag, s): v for tag, points in ours.items() for s, v in points.items()}
    wanted_tags = {tag for tag, _ in expected}
    assert {tag for tag, _ in got} >= wanted_tags
    for key, value in expected.items():
        assert got[key] == f32(value), key
    assert {t for t in wanted_tags if t.startswith("layers/grad_norm/")} == {
        f"layers/grad_norm/{name}" for name in PARAMS
    }
    assert "train/local_loss/micro_2" in wanted_tags


@pytest.mark.parametrize("world", [3, 4])
def test_several_2x_workers_give_rank_runs_and_a_reduced_run(tmp_path: Path, world: int) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    tables = [
        write_log(logs / f"worker_{rank}.log", seed=rank, micro_steps=1) for rank in range(world)
    ]
    done = CliRunner().invoke(main, ["convert", str(logs), str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    reduced = _series(tmp_path / "out")
    step = 10
    losses = [printed(t[step - 1]["loss"], "10.6f") for t in tables]
    assert reduced["train/loss"][step] == pytest.approx(sum(losses) / world, rel=1e-6)
    for rank in range(world):
        mine = _series(tmp_path / "out" / f"rank_{rank}")
        assert mine["train/loss"][step] == f32(losses[rank])
