"""MindFormers' real Trainer and train cells, with MindWatchMonitor beside MFLossMonitor.

Each job trains the tiny LLaMA of ``examples/mindformers/`` for 30 steps (about 10 s
on CPU) in the MindFormers venv, through ``python -m mindwatch.mindspore.mindformers``,
with MindWatchMonitor built by MindFormers' registry from the YAML's ``callbacks:``.
Three independent records are compared: mindwatch's event files, MindFormers' own
TensorBoard files (both read with TensorBoard's EventAccumulator) and what the train
cell returned (a plain MindSpore callback, the "spy").
"""

from __future__ import annotations

import json
import math
import os
import shlex
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from tests.tbread import same_float32, scalars

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "mindformers" / "tiny_llama.yaml"
JOB = Path(__file__).with_name("mf_llama.py")
PEAK_TFLOPS = 0.05  # any peak: MFU must be TFLOPS / peak

Series = dict[str, list[tuple[int, float]]]


@dataclass
class Job:
    out: Path
    output: str
    spy: list[dict[str, Any]]
    weights: list[str]
    sizes: list[int]
    trainable: list[str]
    mindwatch: Series
    mindformers: Optional[Series]
    run: dict[str, Any]
    config: dict[str, Any]


def run_job(
    tmp_path: Path,
    python: Path,
    *,
    route: str = "trainer",
    clip: bool = True,
    local_norm: bool = False,
    mindformers_tensorboard: bool = True,
    mindwatch: Optional[dict[str, Any]] = None,
    steps: int = 30,
    spike: int = 0,
    learning_rate: Optional[float] = None,
) -> Job:
    """Train the example's tiny LLaMA for ``steps`` steps (its random tokens; with
    ``spike``, ``mf_llama.py``'s learnable ones and a bad batch at that step)."""
    config = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    config["runner_wrapper"]["use_clip_grad"] = clip
    config["lr_schedule"]["total_steps"] = steps
    if learning_rate is not None:
        config["lr_schedule"]["learning_rate"] = learning_rate
    if local_norm:
        config["runner_wrapper"]["local_norm"] = True
    if not mindformers_tensorboard:
        del config["tensorboard"]
    (entry,) = [c for c in config["callbacks"] if c["type"] == "MindWatchMonitor"]
    entry.update(peak_tflops=PEAK_TFLOPS, **(mindwatch or {}))
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run(
        [
            *(str(python), "-m", "mindwatch.mindspore.mindformers", str(JOB)),
            *("--config", "job.yaml", "--route", route, "--spy", "spy.json"),
            *("--steps", str(steps), "--spike", str(spike)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # MindFormers writes ./output (logs, checkpoints) below it
        env={**os.environ, "GLOG_v": "3"},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    spy = json.loads((tmp_path / "spy.json").read_text())
    tensorboard = tmp_path / "output" / "tensorboard"
    if route == "trainer":
        tensorboard /= "rank_0"  # MindFormers' Trainer writes one folder per rank
    run_folder = tmp_path / "output" / "mindwatch"
    return Job(
        out=tmp_path,
        output=output,
        spy=spy["steps"],
        weights=spy["weights"],
        sizes=spy["sizes"],
        trainable=spy["trainable"],
        mindwatch=scalars(run_folder),
        mindformers=scalars(tensorboard) if mindformers_tensorboard else None,
        run=json.loads((run_folder / "run.json").read_text()),
        config=config,
    )


def values(series: Series, tag: str) -> dict[int, float]:
    return dict(series[tag])


def tiny_llama_flops_per_step(config: dict[str, Any]) -> float:
    """By hand: 6 x N + 12 x L x s x h FLOPs per token (forward and backward), N the
    weights of the matrix multiplications (attention 4 h^2 with as many KV heads as
    heads, the SwiGLU MLP 3 h i, the LM head h V), times the tokens of a step."""
    model = config["model"]["model_config"]
    h, layers, s = model["hidden_size"], model["num_layers"], model["seq_length"]
    vocab, inner = model["vocab_size"], model["intermediate_size"]
    weights = layers * (4 * h * h + 3 * h * inner) + h * vocab
    per_token = 6 * weights + 12 * layers * s * h
    return float(per_token * config["runner_config"]["batch_size"] * s)


def assert_no_error_lines(job: Job) -> None:
    errors = [line for line in job.output.splitlines() if "[ERROR]" in line]
    assert not errors, errors[:5]
    assert not list(job.out.rglob("analyze_fail*.ir"))  # no failed graph compile either


def assert_same_as_mindformers(job: Job) -> None:
    """Every step: mindwatch's loss, lr, grad norm and loss scale equal what the cell
    returned and what MindFormers' own writer recorded; timing and throughput agree."""
    mw, mf = job.mindwatch, job.mindformers
    assert mf is not None
    steps = list(range(1, 31))
    spy = {row["step"]: row for row in job.spy}
    assert sorted(spy) == steps
    for ours, theirs, key in (
        ("train/loss", "loss", "loss"),
        ("train/lr", "learning-rate", "lr"),
        ("train/grad_norm", "grad-norm", "global_norm"),
        ("train/loss_scale", "loss-scale", "loss_scale"),
    ):
        mine, mindformers = values(mw, ours), values(mf, theirs)
        assert sorted(mine) == sorted(mindformers) == steps, ours
        for step in steps:
            assert same_float32(mine[step], mindformers[step]), (ours, step)
            assert same_float32(mine[step], spy[step][key]), (ours, step)
        # tag_style mindformers: MindFormers' own names hold the same values
        assert values(mw, theirs) == mine
        twin = {x // 2: v for x, v in mw[f"{theirs}_vs_samples"]}  # global batch 2
        assert twin == {x // 2: v for x, v in mf[f"{theirs}_vs_samples"]}
    assert values(mw, "batch-size") == values(mf, "batch-size")

    # Timing: both measure from a step-begin hook to a step-end hook. MindFormers'
    # callback runs first, so mindwatch's window holds it and adds MindFormers' own
    # step-end work (its two log lines and its TensorBoard points); MindFormers
    # truncates to whole milliseconds.
    compute, theirs = values(mw, "perf/compute_ms"), values(mf, "iteration-time")
    assert values(mw, "iteration-time") == compute
    # (How much longer ours is depends on the machine's load: no bound on wall time.)
    assert all(compute[s] >= theirs[s] - 0.5 for s in steps), (compute, theirs)
    throughput = values(mw, "throughput")
    for step in steps:
        assert throughput[step] == pytest.approx(2 / (compute[step] / 1000), rel=1e-5)
    # and MindFormers' throughput is the same function of its own time
    mf_throughput = statistics.median(values(mf, "throughput")[s] for s in steps[1:])
    assert statistics.median(throughput[s] for s in steps[1:]) <= mf_throughput * 1.01
    assert statistics.median(throughput[s] for s in steps[1:]) >= mf_throughput * 0.3
    samples_per_day = values(mw, "B-samples-per-day")
    for step in steps:
        assert samples_per_day[step] == pytest.approx(throughput[step] * 86400 / 1e9, rel=1e-5)


def assert_flops(job: Job) -> None:
    """FLOPs per step = the hand count; TFLOPS and MFU follow from the step times."""
    expected = tiny_llama_flops_per_step(job.config)
    assert job.run["flops"]["per_step"] == expected == 4_718_592
    assert "flops_collection" in job.run["flops"]["source"]
    mw = job.mindwatch
    step_ms = values(mw, "perf/step_time_ms")
    achieved = values(mw, "perf/tflops_per_device")
    mfu = values(mw, "perf/mfu")
    assert sorted(achieved) == sorted(mfu) == list(range(1, 31))
    for step, tflops in achieved.items():
        assert tflops == pytest.approx(expected / (step_ms[step] / 1000) / 1e12, rel=1e-5)
        assert mfu[step] == pytest.approx(tflops / PEAK_TFLOPS, rel=1e-6)
    per_npu = values(mw, "model-flops-throughput-per-npu")  # MindFormers' definition
    compute = values(mw, "perf/compute_ms")
    for step, value in per_npu.items():
        assert value == pytest.approx(expected / compute[step] / 1e9, rel=1e-5)
    assert job.mindformers is not None
    assert "Full model flops is 4718592" in job.output  # MindFormers' own count agrees


def test_trainer_from_yaml_writes_what_mindformers_shows(
    tmp_path: Path, mindformers_python: Path
) -> None:
    job = run_job(tmp_path, mindformers_python)
    assert_no_error_lines(job)
    assert_same_as_mindformers(job)
    assert_flops(job)
    assert job.run["status"] == "finished"
    assert job.run["hparams"]["train_cell"] == "CPUTrainOneStepCell"


def test_model_train_with_a_subclass_of_mftrainonestepcell(
    tmp_path: Path, mindformers_python: Path
) -> None:
    job = run_job(tmp_path, mindformers_python, route="model")
    assert_no_error_lines(job)
    assert_same_as_mindformers(job)
    assert_flops(job)


def test_without_gradient_clipping_there_is_no_grad_norm_and_training_completes(
    tmp_path: Path, mindformers_python: Path
) -> None:
    # MindFormers' own writer would crash on the None grad norm: it stays off here.
    job = run_job(tmp_path, mindformers_python, clip=False, mindformers_tensorboard=False)
    assert_no_error_lines(job)
    assert all(row["global_norm"] is None for row in job.spy)
    assert "train/grad_norm" not in job.mindwatch
    assert "grad-norm" not in job.mindwatch
    losses = values(job.mindwatch, "train/loss")
    assert sorted(losses) == list(range(1, 31))
    assert all(same_float32(losses[row["step"]], row["loss"]) for row in job.spy)
    assert job.run["status"] == "finished"


def test_local_norm_becomes_per_layer_gradient_norms(
    tmp_path: Path, mindformers_python: Path
) -> None:
    # with the config's parameter selection, as MindFormers' monitor_config.target
    chosen = {"target": ["attention"]}
    job = run_job(tmp_path, mindformers_python, local_norm=True, mindwatch=chosen)
    assert_no_error_lines(job)
    assert_same_as_mindformers(job)
    mw = job.mindwatch
    written = {tag.removeprefix("layers/grad_norm/") for tag in mw if tag.startswith("layers/")}
    assert written == {name for name in job.weights if "attention" in name}
    assert len(written) >= 8  # wq, wk, wv, wo of two layers
    for row in job.spy:
        squares = row["local_norm"]  # MindFormers' local_norm: squared L2 norms
        assert len(squares) == len(job.weights)
        for name, square in zip(job.weights, squares):
            if name in written:
                norm = values(mw, f"layers/grad_norm/{name}")[row["step"]]
                assert norm == pytest.approx(math.sqrt(square), rel=1e-6), (name, row["step"])


def test_the_readme_yaml_and_command_train(tmp_path: Path, mindformers_python: Path) -> None:
    """The README's "In a MindFormers YAML", as shown: its ``callbacks:`` in the example's
    YAML, and its command, with this job script in place of MindFormers'
    ``run_mindformer.py`` (a script of MindFormers' repository, not of its wheel)."""
    from tests.test_docs import blocks

    readme = blocks(ROOT / "README.md")
    (callbacks,) = [text for lang, text in readme if lang == "yaml" and "MindWatchMonitor" in text]
    (command,) = [text for lang, text in readme if "mindwatch.mindspore.mindformers" in text]
    config = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    config["callbacks"] = yaml.safe_load(callbacks)["callbacks"]
    config["lr_schedule"]["total_steps"] = 10
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "mindwatch.mindspore.mindformers"], command
    (tmp_path / argv[argv.index("--config") + 1]).write_text(yaml.safe_dump(config))
    argv[0], argv[argv.index("run_mindformer.py")] = str(mindformers_python), str(JOB)
    done = subprocess.run(
        [*argv, "--spy", "spy.json", "--steps", "10"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "GLOG_v": "3"},
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    (entry,) = [c for c in config["callbacks"] if c["type"] == "MindWatchMonitor"]
    run = tmp_path / entry["logdir"]
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    series = scalars(run)
    assert [step for step, _ in series["train/loss"]] == list(range(1, 11))
    assert series["train/grad_norm"]
