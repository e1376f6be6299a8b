"""Memory of the flight recorder over a long run: flat after its first K steps.

Feeds a :class:`~mindwatch.forensics.FlightRecorder` what a training step gives it
(the values the pipeline hands it, the per-parameter squared gradient norms as a fresh
float32 vector per step, the batch's sample ids) for ``--steps`` steps and reports the
memory it holds at each checkpoint, measured two ways:

* **traced**: the Python heap as ``tracemalloc`` counts it (NumPy reports its arrays to
  it), the number that must be flat: everything the recorder keeps is in it;
* **RSS**: the process's resident set in a second pass without ``tracemalloc`` (whose
  own bookkeeping would be counted), from the first checkpoint on (the pass reuses the
  memory the one before it freed, so its start says little): what the allocator keeps
  must be flat too.

``--monitor``: the same steps through a real :class:`~mindwatch.Monitor` (its
pipeline thread, rules and event files; the default config, the recorder on) as the
MindSpore callback feeds it: ``log_step`` for the scalars, ``flight_recorder.add_layers``
for the norms and ``log_sample_ids`` for the ids. The loop lets the pipeline settle
every 1,000 steps and before each checkpoint: a loop of microsecond steps outruns the
pipeline's thread, and its queued backlog (training never builds one) is not the
recorder's.

``--tensors``: the norms as MindSpore tensors, as the MindSpore callback hands them over
(a fresh ``Tensor`` per step, whose data lives outside the Python heap: RSS is then the
measure that counts it).

Every measurement is also taken with ``--window`` doubled, so the line "per step kept"
gives the bytes one recorded step costs (the difference, divided by the extra K).

    python benchmarks/recorder_memory.py [--steps 1000000] [--params 200] [--ids 32]
                                         [--window 256] [--monitor]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from mindwatch.forensics import FlightRecorder
from mindwatch.forensics import recorder as recorder_module

CHECKPOINTS = (1_000, 10_000, 100_000, 1_000_000)


@dataclass(frozen=True)
class Sample:
    """The memory at one checkpoint: traced heap and RSS, bytes above the start."""

    step: int
    traced: int
    rss: int


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def steps_data(
    params: int, ids: int, tensors: bool = False
) -> Iterator[tuple[int, dict[str, float], Any, list[int]]]:
    """Step by step: (step, the step's values as the pipeline passes them, a fresh
    squared-norm vector, a MindSpore tensor with ``tensors``, the batch's sample ids)."""
    base = np.random.default_rng(0).random(params, dtype=np.float32) + 0.1
    wrap: Callable[[Any], Any] = lambda a: a  # noqa: E731
    if tensors:
        import mindspore as ms

        wrap = ms.Tensor
    step = 0
    while True:
        step += 1
        wobble = np.float32(1.0 + 0.01 * (step % 7))
        values = {
            "train/loss": 2.0 + 0.001 * (step % 13),
            "train/lr": 1e-3,
            "train/grad_norm": 1.5 + 0.01 * (step % 5),
            "train/loss_scale": 1024.0,
            "train/epoch": float(step // 1000),
            "perf/step_time_ms": 10.0 + (step % 3),
            "perf/samples_per_s": 3200.0,
            "perf/compute_ms": 9.5,
        }
        first = step * ids
        yield step, values, wrap(base * wobble), list(range(first, first + ids))


class UnboundedError(AssertionError):
    """The traced memory passed the limit given to a soak (it stops there)."""


def soak_recorder(
    steps: int,
    *,
    tensors: bool = False,
    params: int = 200,
    ids: int = 32,
    window: int = 256,
    checkpoints: tuple[int, ...] = CHECKPOINTS,
    limit: Optional[int] = None,
    tracing: bool = True,
) -> list[Sample]:
    """A bare FlightRecorder fed ``steps`` steps; memory above the start at each
    checkpoint (``tracing``: tracemalloc must not be tracing yet, this starts it; else
    the traced column is 0 and RSS is measured without its overhead). With ``limit``
    (bytes), raises :class:`UnboundedError` as soon as the traced memory passes it (checked
    every 10,000 steps), so a recorder that kept everything fails fast."""
    recorder = FlightRecorder(window)
    recorder.set_layers([f"model.layers.{i // 8}.w{i % 8}" for i in range(params)])
    return _soak(
        steps,
        params=params,
        ids=ids,
        checkpoints=checkpoints,
        recorder=recorder,
        limit=limit,
        tracing=tracing,
        tensors=tensors,
    )


def soak_monitor(
    steps: int,
    *,
    tensors: bool = False,
    params: int = 200,
    ids: int = 32,
    window: int = 256,
    checkpoints: tuple[int, ...] = CHECKPOINTS,
    limit: Optional[int] = None,
    tracing: bool = True,
) -> list[Sample]:
    """The same steps through a real Monitor (see the module docs)."""
    from mindwatch import Monitor

    with tempfile.TemporaryDirectory() as folder:
        config = {"print_every": 0, "alerts": {"forensics": {"window": window}}}
        monitor = Monitor(folder, config, total_steps=steps)
        recorder = monitor.flight_recorder
        assert recorder is not None, "the recorder is on by default"
        recorder.set_layers([f"model.layers.{i // 8}.w{i % 8}" for i in range(params)])
        try:
            return _soak(
                steps,
                params=params,
                ids=ids,
                checkpoints=checkpoints,
                recorder=recorder,
                limit=limit,
                tracing=tracing,
                tensors=tensors,
                monitor=monitor,
            )
        finally:
            monitor.close()


def _soak(
    steps: int,
    *,
    tensors: bool = False,
    params: int,
    ids: int,
    checkpoints: tuple[int, ...],
    recorder: FlightRecorder,
    limit: Optional[int],
    tracing: bool,
    monitor: Optional[Any] = None,
) -> list[Sample]:
    marks = sorted(c for c in checkpoints if c <= steps)
    settle: Callable[[], None] = (
        (lambda: None) if monitor is None else (lambda: _settled(monitor.settle(60.0)))
    )
    data = steps_data(params, ids, tensors)
    if tensors:  # MindSpore's import and first tensor, before the start is measured
        import mindspore as ms

        ms.Tensor(np.zeros(params, np.float32)).asnumpy()
    gc.collect()
    if tracing:
        tracemalloc.start()
    # The bare recorder's memory is what was allocated in the recorder's module and in
    # this loop (a snapshot filtered to the two files): threads another test left
    # running in the same process do not move it. Through a Monitor it is the whole heap.
    measure = _traced if monitor is not None else _own
    try:
        start_traced, start_rss = measure(), _rss()
        samples = []
        for step, values, squares, batch in data:
            if monitor is None:
                recorder.add_scalars(step, values)
                recorder.add_sample_ids(step, batch)
            else:
                monitor.log_step(step, **_log_args(values))
                monitor.log_sample_ids(step, batch)
                if step % 1_000 == 0:
                    settle()
            recorder.add_layers(step, squares)
            if limit is not None and step % 10_000 == 0:
                held = _traced() - start_traced
                if held > limit:
                    raise UnboundedError(f"{held:,} bytes traced at step {step:,}")
            if step == marks[len(samples)]:
                settle()
                gc.collect()
                samples.append(Sample(step, measure() - start_traced, _rss() - start_rss))
                if len(samples) == len(marks):
                    return samples
    finally:
        if tracing:
            tracemalloc.stop()
    return samples


def _traced() -> int:
    return tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0


def _own() -> int:
    """Bytes traced to allocations made in the recorder's module or in this file."""
    if not tracemalloc.is_tracing():
        return 0
    files = [tracemalloc.Filter(True, recorder_module.__file__), tracemalloc.Filter(True, __file__)]
    snapshot = tracemalloc.take_snapshot().filter_traces(files)
    return sum(stat.size for stat in snapshot.statistics("filename"))


def _settled(done: bool) -> None:
    if not done:
        raise RuntimeError("the pipeline did not settle within 60 s")


def _log_args(values: dict[str, float]) -> dict[str, float]:
    """The step's values as ``log_step`` takes them (the pipeline derives the step time).
    No ``samples``: a loop of microsecond steps has no steady throughput, and the alerts
    the throughput rule would raise on it (kept by the Monitor) are not the recorder's."""
    return {
        "loss": values["train/loss"],
        "lr": values["train/lr"],
        "grad_norm": values["train/grad_norm"],
        "loss_scale": values["train/loss_scale"],
    }


def render(title: str, runs: dict[int, list[Sample]]) -> str:
    """A table: one row per checkpoint, traced memory and RSS growth per window size."""
    windows = sorted(runs)
    head = "".join(f"  {f'K={k}: traced':>15} {'RSS since row 1':>15}" for k in windows)
    lines = [title, f"{'step':>10}{head}"]
    for i, sample in enumerate(runs[windows[0]]):
        row = "".join(
            f"  {_mib(runs[k][i].traced):>15} {_mib(runs[k][i].rss - runs[k][0].rss):>15}"
            for k in windows
        )
        lines.append(f"{sample.step:>10,}{row}")
    if len(windows) == 2:
        small, large = (runs[k][-1].traced for k in windows)
        per_step = (large - small) / (windows[1] - windows[0])
        lines.append(f"per step kept (traced, K={windows[0]} vs K={windows[1]}): {per_step:,.0f} B")
    return "\n".join(lines)


def _mib(n: int) -> str:
    return f"{n / 2**20:+.3f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--params", type=int, default=200, help="parameters (norms per step)")
    parser.add_argument("--ids", type=int, default=32, help="sample ids per step")
    parser.add_argument("--window", type=int, default=256, help="K, alerts.forensics.window")
    parser.add_argument("--monitor", action="store_true", help="through a real Monitor")
    parser.add_argument("--tensors", action="store_true", help="the norms as MindSpore tensors")
    args = parser.parse_args()
    soak = soak_monitor if args.monitor else soak_recorder
    runs = {}
    for k in (args.window, 2 * args.window):
        given = {"params": args.params, "ids": args.ids, "window": k, "tensors": args.tensors}
        traced = soak(args.steps, **given)  # type: ignore[arg-type]
        rss = soak(args.steps, tracing=False, **given)  # type: ignore[arg-type]
        runs[k] = [Sample(a.step, a.traced, b.rss) for a, b in zip(traced, rss)]
    what = "a Monitor (pipeline, rules, event files)" if args.monitor else "a FlightRecorder"
    title = (
        f"{args.steps:,} steps into {what}: {args.params} squared norms (float32"
        f"{', MindSpore tensors' if args.tensors else ''}), "
        f"{args.ids} sample ids, 8 scalars per step; memory above the start"
    )
    print(render(title, runs))


if __name__ == "__main__":
    main()
