"""A labelled corpus of real MindSpore runs for the alert scorecard (issue 14).

Healthy runs vary the model (MLP, small CNN, a tiny attention model), the optimizer
(SGD, Momentum, Adam, AdamW), the schedule (constant, warmup + cosine, step decay), the
batch size (down to noisy batches of 2), the seed and the step time (sleep jitter in the
input pipeline; a background CPU hog during some runs). Two families are there to catch
defaults that cry wolf: regression with heavy-tailed (Student-t, 2 degrees of freedom)
label noise in batches of 2, and 2,000 steps of ~1 ms beside a process that burns a core
at the same priority. Faulted runs plant one fault at
a known step, the way ``tests/mindspore/test_planted_faults.py`` does: each run's
``label.json`` says which rule(s) should catch it and from which step.

Every run trains on CPU in GRAPH mode with ``TrainingMonitor`` (alerts off: the
scorecard replays the event files through the rules offline, so rule changes are scored
without training again). At most two runs at a time (a shared 2-core machine).

    python benchmarks/alerts_corpus.py [--quick] [--out benchmarks/.corpus] [--only NAME]
    python benchmarks/alerts_scorecard.py [--quick]

A run already complete in the folder (its ``label.json`` written) is not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = HERE / ".corpus"
DP_TRAIN = ROOT / "tests" / "mindspore" / "scripts" / "dp_train.py"
RUN_CONFIG = {"print_every": 0, "flush_secs": 1.0, "alerts": {"enabled": False}}


@dataclass
class Spec:
    """One run of the corpus. ``rules``: the rules that should catch the fault (empty:
    healthy); ``onset``: the first step of the fault."""

    name: str
    model: str = "mlp"  # mlp | mlp_nobias | cnn | attn
    optimizer: str = "sgd"  # sgd | momentum | adam | adamw
    schedule: str = "constant"  # constant | cosine | step
    lr: float = 0.02
    batch: int = 16
    seed: int = 0
    steps: int = 400
    delay_ms: float = 5.0  # input pipeline time per batch
    jitter: float = 0.0  # lognormal sigma of that time
    hog: bool = False  # a CPU hog runs beside the job (niced)
    busy: int = 0  # CPU-burning processes at normal priority beside the job (runs alone)
    label_tail: float = 0.0  # Student-t degrees of freedom of the label noise (0: normal)
    eval_every: int = 0
    fault: str = ""
    onset: int = 0
    rules: list[str] = field(default_factory=list)
    rank: Optional[int] = None  # the rank the alert must name (msrun)
    part: str = ""  # throughput_drop: the part that must be named
    within: int = 10  # the fault must be caught this many steps after its onset ...
    within_s: float = 0.0  # ... or, when set, this many seconds of training after it
    growth: float = 1.0  # layer_grad / attn_logit: the factor's growth per step

    @property
    def healthy(self) -> bool:
        return not self.fault


def healthy_specs() -> list[Spec]:
    h = []
    models = [
        ("mlp", "sgd", "constant", 0.02, 16),
        ("mlp", "sgd", "constant", 0.01, 2),  # small noisy batches
        ("mlp", "momentum", "cosine", 0.01, 8),
        ("mlp", "adam", "step", 0.003, 32),
        ("mlp", "adamw", "cosine", 0.003, 4),
        ("cnn", "sgd", "constant", 0.05, 16),
        ("cnn", "momentum", "step", 0.02, 4),
        ("cnn", "adam", "cosine", 0.002, 32),
        ("cnn", "adamw", "constant", 0.001, 2),
        ("attn", "adam", "cosine", 0.003, 16),
        ("attn", "adamw", "step", 0.002, 4),
        ("attn", "momentum", "constant", 0.02, 8),
    ]
    for i, (model, opt, sched, lr, batch) in enumerate(models):
        for seed in (0, 1):
            h.append(
                Spec(
                    f"healthy-{model}-{opt}-{sched}-b{batch}-s{seed}",
                    model=model,
                    optimizer=opt,
                    schedule=sched,
                    lr=lr,
                    batch=batch,
                    seed=seed,
                    steps=300 + 100 * ((i + seed) % 4),
                    delay_ms=(2.0, 5.0, 10.0)[(i + seed) % 3],
                    jitter=(0.0, 0.3, 0.8)[(i + 2 * seed) % 3],
                    hog=(i + seed) % 5 == 0,
                    eval_every=50 if (i + seed) % 3 == 0 else 0,
                )
            )
    return h + heavy_tailed_specs() + busy_specs()


# Draws of the Student-t label noise beyond this many scale units are drawn again. A
# label 50 units (5.0) off, 2.6 times the labels' own spread, is still noise of the
# run; one 300 units off (p ~ 1e-5 a draw with 2 degrees of freedom) is a corrupted
# label: its loss is 10^4 times the median, as large as fault-corrupt-labels' x50
# labels, and the spike rule must catch it.
TAIL_BOUND = 50.0


def heavy_tailed_specs() -> list[Spec]:
    """Regression with Student-t label noise (2 degrees of freedom: infinite variance,
    truncated at ``TAIL_BOUND``), in batches of 2 at ~1 ms steps: among 4,000 draws a
    few fall 20 to 50 times the median draw out, so single steps have gradient norms 10
    to 20 times the running median and losses hundreds of times theirs, and the norm is
    back the next step. Healthy: a one-step outlier is no explosion."""
    runs = [("sgd", 0.01, 0), ("sgd", 0.01, 1), ("sgd", 0.01, 2), ("momentum", 0.005, 0)]
    runs += [("adam", 0.003, 1), ("adamw", 0.003, 2)]
    return [
        Spec(
            f"healthy-heavytail-mlp-{opt}-b2-s{seed}",
            optimizer=opt,
            lr=lr,
            batch=2,
            seed=seed,
            steps=2000,
            delay_ms=0.0,
            label_tail=2.0,
        )
        for opt, lr, seed in runs
    ]


def busy_specs() -> list[Spec]:
    """2,000 steps of ~1 ms beside a process that burns a core at the same priority (on
    a 2-core machine the scheduler takes the job's threads off the CPU for milliseconds
    to tens of milliseconds at a time): healthy, whatever the hiccups."""
    runs = [("mlp", "sgd", 0.02, 16), ("mlp", "adam", 0.003, 8), ("mlp", "sgd", 0.01, 2)]
    return [
        Spec(
            f"healthy-busy-{model}-{opt}-b{batch}-s{seed}",
            model=model,
            optimizer=opt,
            lr=lr,
            batch=batch,
            seed=seed,
            steps=2000,
            delay_ms=0.0,
            busy=1,
        )
        for model, opt, lr, batch in runs
        for seed in (0, 1)
    ]


def faulted_specs() -> list[Spec]:
    return [
        Spec("fault-spike-then-nan", fault="spike_then_nan", onset=150, rules=["spike"]),
        Spec("fault-nan-input", steps=200, fault="nan_input", onset=120, rules=["nonfinite"]),
        Spec(
            "fault-nan-input-cnn",
            model="cnn",
            optimizer="momentum",
            steps=200,
            fault="nan_input",
            onset=90,
            rules=["nonfinite"],
        ),
        Spec("fault-corrupt-labels", steps=250, fault="labels", onset=150, rules=["spike"]),
        Spec(
            "fault-corrupt-labels-noisy",
            batch=4,
            seed=3,
            steps=250,
            fault="labels",
            onset=160,
            rules=["spike"],
        ),
        Spec(
            "fault-lr-blowup",
            steps=200,
            fault="lr_blowup",
            onset=101,
            rules=["grad_explosion", "spike", "nonfinite"],
        ),
        Spec(
            "fault-grad-explosion",
            model="cnn",
            optimizer="sgd",
            lr=0.05,
            steps=200,
            fault="big_inputs",
            onset=120,
            rules=["grad_explosion"],
        ),
        Spec(
            "fault-zero-inputs",
            model="mlp_nobias",
            steps=200,
            fault="zero_inputs",
            onset=100,
            rules=["grad_vanishing"],
        ),
        Spec(
            "fault-slow-data",
            steps=300,
            fault="slow_data",
            onset=200,
            rules=["throughput_drop"],
            part="input pipeline",
            within_s=3.0,  # min_seconds (2 s) + 1 s, + 'recent' steps (the scorecard)
        ),
        Spec(
            "fault-slow-compute",
            model="cnn",
            steps=300,
            fault="slow_compute",
            onset=200,
            rules=["throughput_drop"],
            part="compute",
            within_s=3.0,  # min_seconds (2 s) + 1 s, + 'recent' steps (the scorecard)
        ),
        Spec("fault-stall", steps=300, fault="stall", onset=150, rules=["stall"]),
        Spec(
            "fault-plateau",
            steps=600,
            fault="plateau",
            onset=150,
            rules=["plateau"],
            within=200,  # half as long as it improved, at least 100 steps
        ),
        Spec(
            "fault-divergence",
            steps=600,
            fault="drift",
            onset=300,
            rules=["divergence"],
            within=100,  # stays above its minimum for a tenth of the points seen
        ),
        Spec(
            "fault-eval-rebound",
            steps=300,
            eval_every=50,
            fault="eval_drift",
            onset=150,
            rules=["eval_rebound"],
            within=150,  # 3 rising evaluations, 50 steps apart
        ),
        Spec(
            "fault-bad-rank",
            model="msrun",
            batch=8,
            steps=100,
            fault="bad_rank",
            onset=60,
            rules=["spike"],
            rank=1,
        ),
    ]


def leading_specs() -> list[Spec]:
    """Faults that a leading indicator should see before the loss does (issue 23): from
    the onset one layer's gradient is multiplied by a factor growing ``growth``-fold per
    step (forward unchanged: the weight enters as ``w g + stop_gradient(w (1 - g))``),
    so SGD's and Momentum's update of that layer grows until the loss diverges; or the
    attention scores are multiplied by a growing factor (what q/k weights growing
    without bound do), until the softmax saturates. Their labels name the leading rule;
    the scorecard's ``--leading`` table says how many steps before the loss rules
    (``spike``, ``divergence``, ``nonfinite``) it fired."""
    layer = "layer_grad"
    # The leading rule first; the loss rules (and grad_explosion) catch it later.
    late = ["grad_explosion", "spike", "divergence", "nonfinite"]
    return [
        Spec(
            "fault-layer-grad-mlp",
            steps=500,
            fault=layer,
            onset=250,
            growth=1.03,
            rules=["layer_grad_outlier", *late],
        ),
        Spec(
            "fault-layer-grad-cnn",
            model="cnn",
            optimizer="momentum",
            lr=0.01,
            batch=8,
            seed=1,
            steps=500,
            fault=layer,
            onset=250,
            growth=1.03,
            rules=["layer_grad_outlier", *late],
        ),
        Spec(
            "fault-layer-grad-attn",
            model="attn",
            optimizer="momentum",
            lr=0.02,
            batch=8,
            seed=2,
            steps=700,
            fault=layer,
            onset=250,
            growth=1.03,
            rules=["layer_grad_outlier", *late],
        ),
        Spec(
            "fault-attn-logit-growth",
            model="attn",
            optimizer="adam",
            lr=0.003,
            schedule="cosine",
            steps=500,
            fault="attn_logit",
            onset=250,
            growth=1.03,
            rules=["attention_logit_growth", "attention_logit", *late],
        ),
    ]


QUICK = {
    "healthy-mlp-sgd-constant-b16-s0",
    "healthy-mlp-sgd-constant-b2-s1",
    "healthy-cnn-adam-cosine-b32-s0",
    "healthy-attn-adam-cosine-b16-s1",
    "healthy-heavytail-mlp-sgd-b2-s0",
    "healthy-busy-mlp-adam-b8-s1",
    "fault-nan-input",
    "fault-corrupt-labels",
    "fault-lr-blowup",
    "fault-slow-data",
    "fault-slow-compute",
}


def specs(quick: bool = False) -> list[Spec]:
    every = healthy_specs() + faulted_specs() + leading_specs()
    return [s for s in every if s.name in QUICK] if quick else every


# ---------------------------------------------------------------- one run (a subprocess)


def worker(spec: Spec, folder: Path) -> None:
    """Train ``spec`` into ``folder/run`` (runs in its own process)."""
    import mindspore as ms
    import numpy as np
    from mindspore import nn

    from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
    from mindwatch.mindspore.demo import WarmupCosineLR

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(spec.seed)
    classify = spec.model in ("cnn", "attn")
    shape = {"mlp": (8,), "mlp_nobias": (8,), "cnn": (1, 8, 8), "attn": (8, 16)}[spec.model]
    teacher = np.random.default_rng(1234).normal(size=(int(np.prod(shape)), 4))
    w_true = np.linspace(-1, 1, 8).astype(np.float32)[:, None]
    jitter_rng = np.random.default_rng(spec.seed + 77)
    state = {"evals": 0}

    def sample(index: int, seed: int) -> tuple[Any, Any]:
        rng = np.random.default_rng(seed * 1_000_003 + index)
        x = rng.normal(size=shape).astype(np.float32)
        if classify:
            y = np.int32(np.argmax(x.reshape(-1) @ teacher + rng.normal(scale=0.5, size=4)))
            return x, y
        if spec.label_tail:
            draw = rng.standard_t(spec.label_tail)
            while abs(draw) > TAIL_BOUND:
                draw = rng.standard_t(spec.label_tail)
            noise = np.array([0.1 * draw])
        else:
            noise = rng.normal(scale=0.1, size=1)
        return x, (x @ w_true + noise).astype(np.float32)

    class Source:
        def __init__(self, steps: int, seed: int, train: bool = True) -> None:
            self.steps, self.seed, self.train = steps, seed, train

        def __len__(self) -> int:
            return self.steps * spec.batch

        def __getitem__(self, index: int) -> tuple[Any, Any]:
            x, y = sample(index, self.seed)
            step = index // spec.batch + 1
            if not self.train:
                if index == 0:
                    state["evals"] += 1
                if spec.fault == "eval_drift" and not classify:
                    y = y + 0.3 * max(state["evals"] - 3, 0)
                return x, y
            if index % spec.batch == 0:
                wait = spec.delay_ms / 1000.0
                if spec.jitter:
                    wait *= float(jitter_rng.lognormal(0.0, spec.jitter))
                if spec.fault == "slow_data" and step >= spec.onset:
                    wait = 0.06
                if spec.fault == "stall" and step == spec.onset:
                    wait = 3600.0  # the job hangs here; the runner kills it
                time.sleep(wait)
            return plant(step, x, y)

    def plant(step: int, x: Any, y: Any) -> tuple[Any, Any]:
        f, on = spec.fault, step >= spec.onset
        if f == "nan_input" and step == spec.onset:
            x = x.copy()
            x.reshape(-1)[3] = np.nan
        elif f == "labels" and step in (spec.onset, spec.onset + 1, spec.onset + 2):
            y = y * 50
        elif f == "spike_then_nan" and on:
            y = y * 50 if step < spec.onset + 5 else y * np.float32(np.nan)
        elif f == "zero_inputs" and on:
            x = np.zeros_like(x)
        elif f == "big_inputs" and spec.onset <= step < spec.onset + 3:
            x = x * 30
        elif f == "drift" and on:
            y = y + np.float32(0.02 * (step - spec.onset)) * np.sign(x[:1])
        return x, y

    # The layer a layer_grad fault plants its growing gradient factor in (the first).
    dense, conv = _grad_scaled_layers(nn, ms) if spec.fault == "layer_grad" else (nn.Dense, None)
    if spec.model in ("mlp", "mlp_nobias"):
        bias = spec.model == "mlp"
        net = nn.SequentialCell(
            [dense(8, 32, has_bias=bias), nn.ReLU(), nn.Dense(32, 1, has_bias=bias)]
        )
        loss_fn: Any = nn.MSELoss()
    elif spec.model == "cnn":
        net = nn.SequentialCell(
            [
                (conv or nn.Conv2d)(1, 4, 3, pad_mode="same"),
                nn.ReLU(),
                nn.Flatten(),
                nn.Dense(256, 4),
            ]
        )
        loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    else:
        net = _attention(nn, ms, query=dense)
        loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")

    total = spec.steps
    lr: Any
    if spec.fault == "lr_blowup":
        lr = [spec.lr] * (spec.onset - 1) + [spec.lr * 1000] * (total - spec.onset + 1)
    elif spec.fault == "plateau":
        lr = [spec.lr] * (spec.onset - 1) + [0.0] * (total - spec.onset + 1)
    elif spec.schedule == "cosine":
        lr = WarmupCosineLR(spec.lr, warmup=max(total // 20, 1), total=total)
    elif spec.schedule == "step":
        lr = [spec.lr * (0.3 ** (s * 3 // total)) for s in range(total)]
    else:
        lr = spec.lr
    params = net.trainable_params()
    opt = {
        "sgd": lambda: nn.SGD(params, learning_rate=lr),
        "momentum": lambda: nn.Momentum(params, learning_rate=lr, momentum=0.9),
        "adam": lambda: nn.Adam(params, learning_rate=lr),
        "adamw": lambda: nn.AdamWeightDecay(params, learning_rate=lr, weight_decay=0.01),
    }[spec.optimizer]()
    # layer_norms: layers/grad_norm/<param> every step, what the leading rules judge.
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss_fn), opt, layer_norms=True)
    data = ms.dataset.GeneratorDataset(Source(total, spec.seed), ["x", "y"], shuffle=False).batch(
        spec.batch
    )
    extra: dict[str, Any] = {}
    if spec.eval_every:
        evals = ms.dataset.GeneratorDataset(
            Source(4, spec.seed + 100, train=False), ["x", "y"], shuffle=False
        ).batch(spec.batch)
        extra = {"eval_dataset": evals, "eval_every": spec.eval_every}
    monitor = TrainingMonitor(logdir=folder / "run", config=RUN_CONFIG, **extra)
    callbacks = [monitor]
    if spec.fault == "slow_compute":
        callbacks.append(_SlowStep(spec.onset))  # after the monitor: inside its step
    callbacks += _leading_callbacks(spec, net, monitor)
    ms.train.Model(cell).train(1, data, callbacks=callbacks, dataset_sink_mode=False)


def _attention(nn: Any, ms: Any, query: Any = None) -> Any:
    """A tiny transformer-ish classifier: one self-attention block, mean pooled. It
    keeps the batch's largest attention score in ``max_logit`` (what MindFormers logs as
    ``max_attention_logit``); ``temperature`` multiplies the scores (1 unless an
    ``attn_logit`` fault grows it)."""
    from mindspore import ops

    class Block(nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.q = (query or nn.Dense)(16, 16)
            self.k, self.v = nn.Dense(16, 16), nn.Dense(16, 16)
            self.norm = nn.LayerNorm((16,))
            self.ff = nn.SequentialCell([nn.Dense(16, 32), nn.GELU(), nn.Dense(32, 16)])
            self.head = nn.Dense(16, 4)
            self.softmax = nn.Softmax(axis=-1)
            one = ms.Tensor(1.0, ms.float32)
            self.temperature = ms.Parameter(one, name="temperature", requires_grad=False)
            self.max_logit = ms.Parameter(one, name="max_logit", requires_grad=False)

        def construct(self, x: Any) -> Any:
            q, k, v = self.q(x), self.k(x), self.v(x)
            scores = ops.matmul(q, k.transpose(0, 2, 1)) / 4.0 * self.temperature
            ops.assign(self.max_logit, ops.stop_gradient(scores.max()))
            att = self.softmax(scores)
            h = self.norm(x + ops.matmul(att, v))
            h = h + self.ff(h)
            return self.head(h.mean(axis=1))

    return Block()


def _grad_scaled_layers(nn: Any, ms: Any) -> tuple[Any, Any]:
    """``Dense`` and ``Conv2d`` whose weight's gradient is multiplied by their
    ``grad_scale`` parameter, the forward pass unchanged (``w g + stop_gradient(w (1 -
    g))`` is ``w``; its gradient is ``g`` times ``w``'s): a fault in one layer only."""
    from mindspore import ops

    def scaled(cell: Any) -> Any:
        g = cell.grad_scale
        return cell.weight * g + ops.stop_gradient(cell.weight * (1.0 - g))

    def scale() -> Any:
        one = ms.Tensor(1.0, ms.float32)
        return ms.Parameter(one, name="grad_scale", requires_grad=False)

    class Dense(nn.Dense):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.grad_scale = scale()

        def construct(self, x: Any) -> Any:
            out = ops.matmul(x, scaled(self).transpose(1, 0))
            return out + self.bias if self.has_bias else out

    class Conv2d(nn.Conv2d):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.grad_scale = scale()

        def construct(self, x: Any) -> Any:
            out = ops.conv2d(x, scaled(self), pad_mode="same")
            return out + self.bias.reshape(1, -1, 1, 1) if self.has_bias else out

    return Dense, Conv2d


def _leading_callbacks(spec: Spec, net: Any, monitor: Any) -> list[Any]:
    """What the leading faults need: the growing factor set before each step from the
    onset, and (the attention model) its largest attention score logged at each step,
    under the tag MindFormers uses (``max_attention_logit/...``)."""
    import mindspore as ms

    grown = {"layer_grad": "grad_scale", "attn_logit": "temperature"}.get(spec.fault)
    factors = [p for p in net.get_parameters() if grown and p.name.endswith(grown)]
    logits = [p for p in net.get_parameters() if p.name.endswith("max_logit")]

    class Leading(ms.train.Callback):  # type: ignore[misc]
        def on_train_step_begin(self, run_context: Any) -> None:
            step = int(run_context.original_args().cur_step_num)
            if factors and step >= spec.onset:
                factor = ms.Tensor(spec.growth ** (step - spec.onset + 1), ms.float32)
                for p in factors:
                    p.set_data(factor)

        def on_train_step_end(self, run_context: Any) -> None:
            if logits:
                step = int(run_context.original_args().cur_step_num)
                value = float(logits[0].asnumpy())
                monitor.monitor.log_scalars(step, {"max_attention_logit/max": value})

    return [Leading()] if factors or logits else []


class _SlowStep:
    """From ``onset`` on, each step does 40 ms more work inside the step (a callback
    that runs between the monitor's step begin and end)."""

    def __new__(cls, onset: int) -> Any:
        import mindspore as ms

        class SlowStep(ms.train.Callback):  # type: ignore[misc]
            def on_train_step_begin(self, run_context: Any) -> None:
                if int(run_context.original_args().cur_step_num) >= onset:
                    end = time.perf_counter() + 0.04
                    while time.perf_counter() < end:  # busy: compute, not a wait
                        pass

        return SlowStep()


# ---------------------------------------------------------------- the runner


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    path = os.environ.get("PYTHONPATH", "")
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PYTHONPATH": f"{src}{os.pathsep}{path}" if path else src,
        "GLOG_v": "3",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def run_one(spec: Spec, out: Path) -> str:
    folder = out / spec.name
    label_path = folder / "label.json"
    if label_path.exists():
        return f"{spec.name}: cached"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    started = time.time()
    burners = []
    if spec.hog:
        burners.append(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])
    burners += [[sys.executable, "-c", "while True: pass"]] * spec.busy
    hogs = [subprocess.Popen(cmd, start_new_session=True) for cmd in burners]
    killed_at: Optional[float] = None
    try:
        if spec.fault == "bad_rank":
            command = _msrun(spec, folder)
        else:
            command = [sys.executable, __file__, "--worker", json.dumps(asdict(spec)), str(folder)]
        with open(folder / "log.txt", "w") as log:
            proc = subprocess.Popen(
                command, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            if spec.fault == "stall":
                # Hung at the onset: wait until the steps before it are on disk, then kill.
                _wait_for_step(folder / "run", spec.onset - 1, proc, timeout=300)
                time.sleep(5)
                killed_at = time.time()
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            else:
                code = proc.wait(timeout=900)
                if code != 0:
                    return f"{spec.name}: FAILED ({code}), see {folder / 'log.txt'}"
    finally:
        for hog in hogs:
            os.killpg(hog.pid, signal.SIGKILL)
            hog.wait()
    label = {**asdict(spec), "killed_at": killed_at, "seconds": time.time() - started}
    label_path.write_text(json.dumps(label, indent=1))
    return f"{spec.name}: {time.time() - started:.0f} s"


def _msrun(spec: Spec, folder: Path) -> list[str]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    corrupt = ",".join(str(s) for s in range(spec.onset, spec.onset + 2))
    return [
        str(Path(sys.executable).parent / "msrun"),
        "--worker_num=2",
        "--local_worker_num=2",
        f"--master_port={port}",
        f"--log_dir={folder / 'msrun-log'}",
        "--join=True",
        str(DP_TRAIN),
        str(folder),
        "model",
        f"--steps={spec.steps}",
        f"--corrupt={corrupt}",
        f"--config={json.dumps(RUN_CONFIG)}",
    ]


def _wait_for_step(run: Path, step: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from mindwatch.events.reader import RunReader, Scalar

    reader: Optional[RunReader] = None
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        time.sleep(1)
        if reader is None and run.exists():
            reader = RunReader(run)
        if reader is not None:
            for item in reader.read():
                if isinstance(item, Scalar) and item.step >= step:
                    return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--quick", action="store_true", help="the reduced corpus (CI)")
    parser.add_argument("--only", action="append", default=[], help="run only these names")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--worker", nargs=2, metavar=("SPEC", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Spec(**json.loads(args.worker[0])), Path(args.worker[1]))
        return
    chosen = [s for s in specs(args.quick) if not args.only or s.name in args.only]
    build(chosen, args.out, jobs=args.jobs, echo=True)


def build(chosen: list[Spec], out: Path, *, jobs: int = 2, echo: bool = False) -> list[str]:
    """Run every spec not already in ``out``; msrun jobs (two workers), runs beside a
    busy process (which would slow a run beside them) and the heavy-tailed runs of ~1
    ms steps (another run beside them is a busy process too: they are there for their
    gradient norms) run alone."""
    out.mkdir(parents=True, exist_ok=True)
    results: list[str] = []
    alone = [s for s in chosen if s.fault == "bad_rank" or s.busy or s.label_tail]
    single = [s for s in chosen if s not in alone]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for line in pool.map(lambda s: run_one(s, out), single):
            results.append(line)
            if echo:
                print(line, flush=True)
    for spec in alone:
        line = run_one(spec, out)
        results.append(line)
        if echo:
            print(line, flush=True)
    return results


if __name__ == "__main__":
    main()
