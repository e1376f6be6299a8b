"""What returning every parameter's squared gradient norm costs the train step.

:class:`~mindwatch.mindspore.TrainOneStepWithGradNormCell` computes one square sum per
gradient for the global norm in any case; ``layer_norms`` decides whether the cell also
returns them, stacked into one vector (``(loss, grad_norm, squared_norms)``), for the
flight recorder and ``layers/grad_norm/<param>``. This script trains the same network
through the cell with ``layer_norms=False`` (off), with the norms returned (on, the
default) and through MindSpore's own ``nn.TrainOneStepCell`` (plain: what
``Model(net, loss_fn, optimizer)`` trains, no gradient norm at all), CPU, no callbacks,
and prints the three side by side, in GRAPH and in PyNative mode, for

* ``mlp``: the demo's MLP (64-128-128-10, 6 parameter tensors, batch 32);
* ``deep``: 75 blocks of Dense(64, 64) + LayerNorm(64) + ReLU and a head (302 parameter
  tensors, batch 32): many small gradients, where one more output per parameter would
  show most.

Three measurements, each as wall time and as the process's CPU time (all its threads:
what the work costs the machine; on this shared 2-core machine, where other jobs push
the load average to 5-20, wall times swing by tens of percent between runs of the very
same configuration, CPU times much less):

* **step**: the median step of rounds that alternate plain, off and on in one process
  (all three cells built and compiled before timing; the order reversed every other
  round), each step waited for (the loss is copied to the host, as a callback does),
  rounds of about ``--round-s`` seconds (at least 5, at most ``--steps`` steps); the
  ratios on/off and on/plain paired by round, their median and 25th-75th percentile,
  which cancel the machine's slow drift;
* **first step**: the first call of a cell in a fresh process (GRAPH mode: the graph's
  compilation; PyNative: the first run of each op), median of ``--processes`` fresh
  processes per setting, the settings' order rotating;
* **peak RSS**: the peak resident memory of those processes after the first step and
  ``--steps`` more (on CPU, MindSpore's device memory is host memory), median.

    python benchmarks/layer_norms.py [--rounds 8] [--steps 40] [--round-s 3] [--processes 3]
                                     [--models mlp,deep] [--modes graph,pynative]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("GLOG_v", "3")

BATCH, WIDTH, BLOCKS = 32, 64, 75
MODELS = {
    "mlp": "mlp: 64-128-128-10",
    "deep": f"deep: {BLOCKS} x (Dense+LayerNorm)",
}


def _network(model: str) -> Any:
    from mindspore import nn

    from mindwatch.mindspore.demo import make_network

    if model == "mlp":
        return make_network(128)
    layers: list[Any] = []
    for _ in range(BLOCKS):
        layers += [nn.Dense(WIDTH, WIDTH), nn.LayerNorm((WIDTH,)), nn.ReLU()]
    return nn.SequentialCell([*layers, nn.Dense(WIDTH, 10)])


# The settings compared, and how many outputs each cell must return (checked: a cell
# that silently returned something else would make the comparison meaningless).
SETTINGS = ("plain", "off", "on")
OUTPUTS = {"plain": 1, "off": 2, "on": 3}


def _cell(model: str, setting: str) -> Any:
    """``plain``: MindSpore's ``nn.TrainOneStepCell``; ``off``/``on``: mindwatch's cell
    with ``layer_norms=False`` / as it comes (the norms returned)."""
    import mindspore as ms
    from mindspore import nn

    from mindwatch.mindspore import TrainOneStepWithGradNormCell

    ms.set_seed(0)
    net = _network(model)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    loss_net = nn.WithLossCell(net, loss)
    if setting == "plain":
        cell = nn.TrainOneStepCell(loss_net, opt)
    elif setting == "off":
        cell = TrainOneStepWithGradNormCell(loss_net, opt, layer_norms=False)
    else:
        cell = TrainOneStepWithGradNormCell(loss_net, opt)  # the default: returned
    cell.set_train()
    return cell


def _inputs() -> tuple[Any, Any]:
    import numpy as np
    from mindspore import Tensor

    rng = np.random.default_rng(0)
    x = Tensor(rng.normal(size=(BATCH, WIDTH)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, size=BATCH).astype(np.int32))
    return x, y


def _step(cell: Any, x: Any, y: Any) -> Any:
    out = cell(x, y)
    # wait for the step, as a callback reading the loss does
    (out[0] if isinstance(out, tuple) else out).asnumpy()
    return out


def _set_mode(mode: str) -> None:
    import mindspore as ms

    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)


def _median_step(cell: Any, x: Any, y: Any, steps: int) -> tuple[float, float]:
    """The median wall time of a step, and the process's CPU time per step (all its
    threads: what the step costs the machine, less sensitive to other jobs' load)."""
    ends = []
    cpu = time.process_time()
    for _ in range(steps):
        _step(cell, x, y)
        ends.append(time.perf_counter())
    cpu = (time.process_time() - cpu) / steps
    return statistics.median(b - a for a, b in zip(ends, ends[1:])), cpu


def child_fresh(mode: str, model: str, setting: str, steps: int) -> dict[str, Any]:
    """One fresh process: its first step, and its peak RSS after ``steps`` more."""
    _set_mode(mode)
    x, y = _inputs()
    cell = _cell(model, setting)
    start, cpu = time.perf_counter(), time.process_time()
    out = _step(cell, x, y)
    first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
    for _ in range(steps):
        out = _step(cell, x, y)
    outputs = len(out) if isinstance(out, tuple) else 1
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"first_s": first, "first_cpu_s": first_cpu, "peak_mib": peak_kib / 1024,
            "outputs": outputs}  # fmt: skip


def child_paired(mode: str, model: str, rounds: int, steps: int, round_s: float) -> dict[str, Any]:
    """The three cells in one process, in alternating rounds: median step of each round."""
    _set_mode(mode)
    x, y = _inputs()
    cells = {setting: _cell(model, setting) for setting in SETTINGS}
    params = len(cells["off"].weights)
    for cell in cells.values():
        for _ in range(3):
            _step(cell, x, y)  # compiled, warm
    # Rounds of about ``round_s`` seconds (at least 5 steps, at most ``steps``): a PyNative
    # step of the deep model takes seconds on this machine, the MLP's GRAPH step 1 ms.
    start = time.perf_counter()
    _step(cells["on"], x, y)
    steps = max(5, min(steps, int(round_s / max(time.perf_counter() - start, 1e-6))))
    got: dict[str, list[tuple[float, float]]] = {setting: [] for setting in SETTINGS}
    for r in range(rounds):
        for name in SETTINGS[:: 1 if r % 2 else -1]:
            got[name].append(_median_step(cells[name], x, y, steps))
    return {"params": params, "steps": steps, **got}


def _run_child(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GLOG_v": "3"},
    )
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}"
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f} ({q[0]:.3f}-{q[2]:.3f})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 10 else f"{seconds:.1f} s"


def measure(mode: str, model: str, args: argparse.Namespace) -> dict[str, Any]:
    """One row: the paired rounds and the fresh processes of ``mode`` and ``model``."""
    spec = {"kind": "paired", "mode": mode, "model": model, "rounds": args.rounds,
            "steps": args.steps, "round_s": args.round_s}  # fmt: skip
    paired = _run_child(["--child", json.dumps(spec)])
    fresh: dict[str, list[dict[str, Any]]] = {setting: [] for setting in SETTINGS}
    for p in range(args.processes):
        for i in range(len(SETTINGS)):
            setting = SETTINGS[(i + p) % len(SETTINGS)]  # rotate who goes first
            spec = {"kind": "fresh", "mode": mode, "model": model, "setting": setting,
                    "steps": args.steps}  # fmt: skip
            fresh[setting].append(_run_child(["--child", json.dumps(spec)]))
    # Each cell really returned what its setting says: loss, (loss, norm), (loss, norm,
    # squares); otherwise exit non-zero rather than print a meaningless comparison.
    for setting, want in OUTPUTS.items():
        got = {r["outputs"] for r in fresh[setting]}
        if got != {want}:
            raise SystemExit(f"{setting}: the cell returned {got} outputs, not {want}")
    return {"paired": paired, "fresh": fresh}


def _ratios(p: dict[str, Any], a: str, b: str, which: int) -> list[float]:
    """Round by round, ``a``'s step over ``b``'s (``which``: 0 wall, 1 CPU)."""
    return [x[which] / y[which] for x, y in zip(p[a], p[b])]


def report(rows: dict[tuple[str, str], dict[str, Any]]) -> None:
    def name(mode: str, model: str, params: int) -> str:
        return f"{mode:8} {MODELS[model]:28} {params:6d}"

    print(
        "\nstep: median of each round (wall); ratios paired by round, median (p25-p75); "
        "plain = nn.TrainOneStepCell"
    )
    print(f"{'mode':8} {'model':28} {'params':>6} {'plain':>9} {'off':>9} {'on':>9} "
          f"{'wall on/off (p25-p75)':>22} {'CPU on/off (p25-p75)':>22} "
          f"{'wall on/plain (p25-p75)':>24} {'wall off/plain':>15}")  # fmt: skip
    for (mode, model), got in rows.items():
        p = got["paired"]
        step = {k: statistics.median(r[0] for r in p[k]) for k in SETTINGS}
        print(f"{name(mode, model, p['params'])} {_ms(step['plain']):>9} {_ms(step['off']):>9} "
              f"{_ms(step['on']):>9} {_spread(_ratios(p, 'on', 'off', 0)):>22} "
              f"{_spread(_ratios(p, 'on', 'off', 1)):>22} "
              f"{_spread(_ratios(p, 'on', 'plain', 0)):>24} "
              f"{statistics.median(_ratios(p, 'off', 'plain', 0)):>15.3f}")  # fmt: skip
    print("\nfirst step of a fresh process (GRAPH: the graph's compilation), median; wall and CPU")
    print(f"{'mode':8} {'model':28} {'params':>6} {'plain':>9} {'off':>9} {'on':>9} "
          f"{'on/off':>7} {'on/plain':>8} {'CPU off':>9} {'CPU on':>9} {'on/off':>7}")  # fmt: skip
    for (mode, model), got in rows.items():
        f = got["fresh"]
        wall = {k: statistics.median(r["first_s"] for r in f[k]) for k in SETTINGS}
        cpu = {k: statistics.median(r["first_cpu_s"] for r in f[k]) for k in SETTINGS}
        print(f"{name(mode, model, got['paired']['params'])} {_ms(wall['plain']):>9} "
              f"{_ms(wall['off']):>9} {_ms(wall['on']):>9} {wall['on'] / wall['off']:7.3f} "
              f"{wall['on'] / wall['plain']:8.3f} {_ms(cpu['off']):>9} {_ms(cpu['on']):>9} "
              f"{cpu['on'] / cpu['off']:7.3f}")  # fmt: skip
    print("\npeak RSS of a fresh process after its first step and --steps more, median")
    print(f"{'mode':8} {'model':28} {'params':>6} {'plain':>11} {'off':>11} {'on':>11} "
          f"{'on-off':>9} {'on-plain':>9}")  # fmt: skip
    for (mode, model), got in rows.items():
        f = got["fresh"]
        peak = {k: statistics.median(r["peak_mib"] for r in f[k]) for k in SETTINGS}
        print(f"{name(mode, model, got['paired']['params'])} {peak['plain']:7.1f} MiB "
              f"{peak['off']:7.1f} MiB {peak['on']:7.1f} MiB {peak['on'] - peak['off']:+5.1f} MiB "
              f"{peak['on'] - peak['plain']:+5.1f} MiB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--round-s", type=float, default=3.0)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--models", default="mlp,deep")
    parser.add_argument("--modes", default="graph,pynative")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        if spec["kind"] == "fresh":
            got = child_fresh(spec["mode"], spec["model"], spec["setting"], spec["steps"])
        else:
            got = child_paired(
                spec["mode"], spec["model"], spec["rounds"], spec["steps"], spec["round_s"]
            )
        print(json.dumps(got))
        return
    print(
        f"TrainOneStepWithGradNormCell, layer_norms=False (off) vs the squared norms "
        f"returned (on, the default) vs MindSpore's nn.TrainOneStepCell (plain); CPU, no "
        f"callbacks, batch {BATCH}; {args.rounds} paired rounds of "
        f"<= {args.steps} steps (~{args.round_s:g} s); {args.processes} fresh processes "
        f"per setting; load average at the start {os.getloadavg()[0]:.1f}"
    )
    rows = {}
    for mode in args.modes.split(","):
        for model in args.models.split(","):
            rows[mode, model] = measure(mode, model, args)
            print(f"  measured {mode} {model}", file=sys.stderr, flush=True)
    report(rows)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
