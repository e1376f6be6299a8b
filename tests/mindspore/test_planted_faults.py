"""Planted faults in real MindSpore training: each found by the right rule, at its step.

A small regression network trains with ``Model.train`` and ``TrainingMonitor``; the data
source plants one fault at a known step. The alerts come from ``<run>/alerts.jsonl``.
Each batch takes 5 ms to load, as real input pipelines take time: a bare 1 ms CPU step
on this shared machine flips between two speeds (a CPU-frequency or scheduling effect
of +-100 %), which no real training step of tens of milliseconds shows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell

BATCH = 16
W_TRUE = np.linspace(-1, 1, 8).astype(np.float32)[:, None]

Plant = Callable[[int, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


class Source:
    """Random-access regression data; ``plant(step, x, y)`` may spoil a sample."""

    def __init__(
        self,
        steps: int,
        plant: Optional[Plant] = None,
        seed: int = 0,
        delay: Optional[Callable[[int], float]] = None,
    ) -> None:
        self.steps, self.plant, self.seed, self.delay = steps, plant, seed, delay

    def __len__(self) -> int:
        return self.steps * BATCH

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed * 1_000_003 + index)
        x = rng.normal(size=8).astype(np.float32)
        y = (x @ W_TRUE + rng.normal(scale=0.1, size=1)).astype(np.float32)
        step = index // BATCH + 1
        if self.delay is not None and index % BATCH == 0:
            time.sleep(self.delay(step))
        if self.plant is not None:
            x, y = self.plant(step, x, y)
        return x, y


class SlowStep(nn.Cell):  # type: ignore[misc]
    """An identity op inside the compiled step that takes ``seconds(step)`` to run: a
    step made slower by its own compute (MindSpore's ``pyfunc`` custom op runs Python
    within the graph), not by its input pipeline."""

    def __init__(self, seconds: Callable[[int], float]) -> None:
        super().__init__()
        self.calls = 0

        def identity(x: np.ndarray) -> np.ndarray:
            self.calls += 1
            time.sleep(seconds(self.calls))
            return x

        self.op = ms.ops.Custom(
            identity, out_shape=lambda x: x, out_dtype=lambda x: x, func_type="pyfunc"
        )

    def construct(self, x: Any) -> Any:
        return self.op(x)


def train(
    tmp_path: Path,
    steps: int,
    *,
    plant: Optional[Plant] = None,
    lr: Any = 0.02,
    config: Optional[dict[str, Any]] = None,
    seed: int = 0,
    bias: bool = True,
    delay: Optional[Callable[[int], float]] = lambda step: 0.005,
    callbacks: tuple[Any, ...] | list[Any] = (),
    slow_step: Optional[Callable[[int], float]] = None,
) -> list[dict[str, Any]]:
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(seed)
    layers = [nn.Dense(8, 16, has_bias=bias), nn.ReLU(), nn.Dense(16, 1, has_bias=bias)]
    if slow_step is not None:
        layers.insert(0, SlowStep(slow_step))
    net = nn.SequentialCell(layers)
    opt = nn.SGD(net.trainable_params(), learning_rate=lr)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    data = ms.dataset.GeneratorDataset(
        Source(steps, plant, seed, delay), ["x", "y"], shuffle=False
    ).batch(BATCH)
    monitor = TrainingMonitor(logdir=tmp_path, config={"print_every": 0, **(config or {})})
    # Callbacks after the monitor run inside its step (begin to end).
    Model(cell).train(1, data, callbacks=[monitor, *callbacks], dataset_sink_mode=False)
    path = tmp_path / "alerts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def rules_at(alerts: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [(a["rule"], a["severity"], a["step"]) for a in alerts]


def test_nan_in_an_input_batch(tmp_path: Path) -> None:
    def plant(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if step == 60:
            x = x.copy()
            x[3] = np.nan
        return x, y

    alerts = train(tmp_path, 120, plant=plant)
    first = alerts[0]
    assert (first["rule"], first["severity"], first["step"]) == ("nonfinite", "critical", 60)
    assert first["metric"] in ("train/loss", "train/grad_norm")
    assert first["batch"] == 59  # index within the epoch: the batch to look at
    assert first["epoch"] == 1
    assert first["causes"][0].startswith("a NaN or Inf in the input batch")


def test_a_burst_of_corrupted_labels(tmp_path: Path) -> None:
    def plant(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x, (y * 50 if step in (150, 151, 152) else y)

    alerts = train(tmp_path, 200, plant=plant)
    assert ("spike", "critical", 150) in rules_at(alerts) or ("spike", "warning", 150) in rules_at(
        alerts
    )
    assert all(a["step"] >= 150 for a in alerts if a["severity"] != "info")


def test_a_learning_rate_blow_up(tmp_path: Path) -> None:
    lrs = [0.02] * 100 + [20.0] * 60  # the schedule is wrong from step 101 on
    alerts = train(tmp_path, 160, lr=lrs)
    bad = [a for a in alerts if a["severity"] != "info"]
    assert bad
    assert {a["rule"] for a in bad} & {"grad_explosion", "spike", "nonfinite"}
    assert 101 <= min(a["step"] for a in bad) <= 104


def test_vanishing_gradients_when_inputs_are_masked(tmp_path: Path) -> None:
    def plant(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.zeros_like(x) if step >= 80 else x), y

    alerts = train(tmp_path, 120, plant=plant, bias=False)
    assert ("grad_vanishing", "warning", 84) in rules_at(alerts)  # 5 steps below 1e-3


def slowed_from(onset: int, before: float = 0.0) -> Callable[[int], float]:
    """Seconds to wait at each step: ``before`` until ``onset``; from there on 3 times
    the median step time measured here over the 100 steps before it (the gaps between
    calls, one a step: the rule's baseline), so the step becomes ~4 times slower on any
    machine, however loaded, and not by a number tuned to one."""
    seen: list[float] = []
    slow: list[float] = []

    def delay(step: int) -> float:
        if step < onset:
            seen.append(time.perf_counter())
            return before
        if not slow:
            gaps = sorted(b - a for a, b in zip(seen[-101:], seen[-100:]))
            slow.append(3 * gaps[len(gaps) // 2])
        return slow[0]

    return delay


# Each batch of these runs takes 30 ms to load: a 5 ms sleep on a loaded 2-core machine
# takes 1 to 25 ms, in stretches of tens of steps, so the run's own speed swings by 5x
# and no drop of 4x stands out of it (the rule is right to say nothing); 30 ms steps
# keep that jitter a small part of the step. The slow part is long enough for any
# speed: training stops at the alert (stop_on), which must come once the drop has lasted
# throughput_drop.min_seconds (2 s). The baseline is the 100 steps before the onset,
# after the first 200 (compile, the pipeline's prefetch filling).
BASE_DELAY, ONSET, SLOW_STEPS = 0.03, 301, 400
DROP_CONFIG = {
    "alerts": {
        "throughput_drop": {"window": 100, "recent": 20, "skip": 200},
        "stop_on": ["throughput_drop"],
    }
}


def test_a_data_source_that_slows_down(tmp_path: Path) -> None:
    delay = slowed_from(ONSET, before=BASE_DELAY)
    alerts = train(tmp_path, ONSET + SLOW_STEPS, delay=delay, config=DROP_CONFIG)
    (drop,) = [a for a in alerts if a["rule"] == "throughput_drop"]
    assert drop["severity"] == "warning"
    assert ONSET < drop["step"] < ONSET + SLOW_STEPS  # caught, and training stopped there
    assert json.loads((tmp_path / "run.json").read_text())["last_step"] == drop["step"]
    assert drop["seconds"] >= 2.0  # it waited out min_seconds of the slow steps
    assert drop["value"] < 0.7 * drop["baseline"]
    assert drop["part"] == "input pipeline"  # perf/data_wait_ms grew
    assert "the input pipeline is slower (perf/data_wait_ms" in drop["message"]


def test_a_step_that_slows_down_is_named_compute(tmp_path: Path) -> None:
    slow = slowed_from(ONSET)
    alerts = train(
        tmp_path,
        ONSET + SLOW_STEPS,
        delay=lambda step: BASE_DELAY,
        slow_step=slow,
        config=DROP_CONFIG,
    )
    (drop,) = [a for a in alerts if a["rule"] == "throughput_drop"]
    assert ONSET < drop["step"] < ONSET + SLOW_STEPS
    assert json.loads((tmp_path / "run.json").read_text())["last_step"] == drop["step"]
    assert drop["seconds"] >= 2.0
    assert drop["part"] == "compute"  # perf/compute_ms grew, not perf/data_wait_ms
    assert "compute is slower (perf/compute_ms" in drop["message"]


def test_a_plateau(tmp_path: Path) -> None:
    config = {"alerts": {"plateau": {"steps": 60, "min_delta": 0.05}}}
    alerts = train(tmp_path, 300, lr=[0.02] * 40 + [0.0] * 260, config=config)
    plateaus = [a for a in alerts if a["rule"] == "plateau"]
    assert len(plateaus) == 1
    assert plateaus[0]["severity"] == "info"
    # The lr is 0 from step 41: the smoothed loss settles within ~100 points, then 60 more
    assert 100 < plateaus[0]["step"] <= 300


def test_a_validation_rebound(tmp_path: Path) -> None:
    """The validation data drifts further from the training data at each evaluation."""
    calls = {"n": 0}

    class Drifting(Source):
        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
            x, y = super().__getitem__(index)
            if index == 0:
                calls["n"] += 1
            return x, y + 0.3 * max(calls["n"] - 2, 0)

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
    cell = TrainOneStepWithGradNormCell(
        nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.02)
    )
    source = Source(300, delay=lambda step: 0.005)
    data = ms.dataset.GeneratorDataset(source, ["x", "y"], shuffle=False).batch(BATCH)
    evals = ms.dataset.GeneratorDataset(Drifting(4, seed=9), ["x", "y"], shuffle=False).batch(BATCH)
    monitor = TrainingMonitor(
        logdir=tmp_path, config={"print_every": 0}, eval_dataset=evals, eval_every=50
    )
    Model(cell).train(1, data, callbacks=[monitor], dataset_sink_mode=False)
    alerts = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    rebound = [a for a in alerts if a["rule"] == "eval_rebound"]
    assert [(a["step"], a["metric"]) for a in rebound] == [(250, "eval/loss")]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_healthy_runs_raise_nothing_above_info(tmp_path: Path, seed: int) -> None:
    alerts = train(tmp_path, 400, seed=seed)
    assert [a for a in alerts if a["severity"] != "info"] == []


def test_stop_on_ends_model_train_at_the_alert_step(tmp_path: Path) -> None:
    def plant(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.full_like(x, np.nan) if step == 60 else x), y

    alerts = train(tmp_path, 200, plant=plant, config={"alerts": {"stop_on": ["nonfinite"]}})
    assert [(a["rule"], a["step"], a.get("action")) for a in alerts] == [
        ("nonfinite", 60, "stop training")
    ]
    info = json.loads((tmp_path / "run.json").read_text())
    assert (info["status"], info["last_step"]) == ("finished", 60)  # stopped cleanly there


class Keep(NamedTuple):
    steps: int  # of training
    nan_at: int
    every: int  # checkpoint every this many steps
    keep: int  # keep_checkpoint_max
    collect: int  # collect_freq
    kept_step: int  # the checkpoint expected as last stable
    rotated: bool  # its original was rotated away by the end


@pytest.mark.parametrize(
    "case",
    [
        # NaN at 55, checkpoints every 10 steps, 2 kept: step 50's outlives rotation.
        pytest.param(Keep(120, 55, 10, 2, 1, 50, True), id="rotation"),
        # Values read every 10th step only; checkpoints every 7 steps, 1 kept: step 56
        # saves (and removes step 49's) on a step nothing is read on.
        pytest.param(Keep(70, 50, 7, 1, 10, 49, True), id="collect_freq"),
        # NaN on the very last step: judged at train end, before ModelCheckpoint's.
        pytest.param(Keep(58, 58, 10, 2, 1, 50, False), id="last step"),
    ],
)
def test_the_last_stable_checkpoint_survives_rotation(tmp_path: Path, case: Keep) -> None:
    """The newest checkpoint saved before a NaN is linked as last stable and outlives
    the rotation that removes the original."""
    from mindspore.train import CheckpointConfig, ModelCheckpoint

    def plant(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.full_like(x, np.nan) if step == case.nan_at else x), y

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
    cell = TrainOneStepWithGradNormCell(
        nn.WithLossCell(net, nn.MSELoss()), nn.SGD(net.trainable_params(), 0.02)
    )
    source = Source(case.steps, plant, delay=lambda step: 0.0)
    data = ms.dataset.GeneratorDataset(source, ["x", "y"], shuffle=False).batch(BATCH)
    ckpt_dir = tmp_path / "ckpt"
    checkpoints = ModelCheckpoint(
        prefix="net",
        directory=str(ckpt_dir),
        config=CheckpointConfig(save_checkpoint_steps=case.every, keep_checkpoint_max=case.keep),
    )
    config = {"print_every": 0, "collect_freq": case.collect}
    monitor = TrainingMonitor(logdir=tmp_path / "run", config=config)
    Model(cell).train(1, data, callbacks=[monitor, checkpoints], dataset_sink_mode=False)
    kept = ckpt_dir / f"last_stable-net-1_{case.kept_step}.ckpt"
    assert kept.exists(), sorted(p.name for p in ckpt_dir.iterdir())
    assert (ckpt_dir / f"net-1_{case.kept_step}.ckpt").exists() is not case.rotated
    assert ms.load_checkpoint(str(kept))  # a loadable checkpoint
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    expected = {"path": str(kept), "step": case.kept_step, "alert": "nonfinite", "at": case.nan_at}
    assert info["last_stable"] == expected
    first = json.loads((tmp_path / "run" / "alerts.jsonl").read_text().splitlines()[0])
    assert first["last_stable"] == str(kept)
    assert first["action"] == f"kept last_stable-net-1_{case.kept_step}.ckpt as last stable"


@pytest.mark.parametrize("form", ["parameter", "schedule"])
def test_dynamic_lr_changes_the_optimizers_lr_at_the_right_step(tmp_path: Path, form: str) -> None:
    """The seeds' rule: the gradient norm below 0.01 for 5 steps -> lr x1.5. Inputs masked
    to zero from step 30 stop the gradient of a bias-free network."""
    from mindwatch.mindspore.demo import WarmupCosineLR, warmup_cosine
    from tests.tbread import scalars

    def plant(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.zeros_like(x) if step >= 30 else x), y

    lr: Any = 0.01 if form == "parameter" else WarmupCosineLR(0.01, warmup=5, total=60)
    config = {"alerts": {"dynamic_lr": {"enabled": True}, "grad_vanishing": {"enabled": False}}}
    alerts = train(tmp_path, 45, plant=plant, lr=lr, config=config, bias=False)
    changes = [(a["step"], a["action"]) for a in alerts if a["rule"] == "dynamic_lr"]
    assert changes == [
        (34, "lr x1.5 from step 35"),
        (39, "lr x1.5 from step 40"),
        (44, "lr x1.5 from step 45"),
    ]
    used = dict(scalars(tmp_path)["train/lr"])
    base = (
        dict.fromkeys(used, 0.01)
        if form == "parameter"
        else {s: float(warmup_cosine(np.array(s - 1), 0.01, 5, 60)) for s in used}
    )
    for step, scale in ((34, 1.0), (35, 1.5), (39, 1.5), (40, 2.25), (45, 3.375)):
        assert used[step] == pytest.approx(base[step] * scale, rel=1e-5), step


def test_alerts_name_the_sample_ids_of_the_bad_batch(tmp_path: Path) -> None:
    """A dataset with an id column (position 2) and a loss cell that accepts it."""

    class WithIds:
        def __init__(self, steps: int) -> None:
            self.source = Source(steps, delay=lambda step: 0.0)

        def __len__(self) -> int:
            return len(self.source)

        def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            x, y = self.source[index]
            if index // BATCH + 1 == 25:
                x = np.full_like(x, np.inf)
            return x, y, np.array(10_000 + index, dtype=np.int64)

    class LossWithIds(nn.Cell):  # type: ignore[misc]
        def __init__(self, net: nn.Cell) -> None:
            super().__init__()
            self.net, self.loss = net, nn.MSELoss()

        def construct(self, x: Any, y: Any, ids: Any) -> Any:  # ids: for the monitor only
            return self.loss(self.net(x), y)

    ms.set_context(mode=ms.GRAPH_MODE)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
    cell = TrainOneStepWithGradNormCell(LossWithIds(net), nn.SGD(net.trainable_params(), 0.02))
    data = ms.dataset.GeneratorDataset(WithIds(40), ["x", "y", "id"], shuffle=False).batch(BATCH)
    config = {"print_every": 0, "alerts": {"sample_ids": 2}}
    monitor = TrainingMonitor(logdir=tmp_path, config=config)
    Model(cell).train(1, data, callbacks=[monitor], dataset_sink_mode=False)
    first = json.loads((tmp_path / "alerts.jsonl").read_text().splitlines()[0])
    assert (first["rule"], first["step"]) == ("nonfinite", 25)
    assert first["sample_ids"] == list(range(10_000 + 24 * BATCH, 10_000 + 25 * BATCH))
