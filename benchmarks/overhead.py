"""Step-time overhead of monitoring a real MindSpore training run (CPU, GRAPH mode).

For each model size, the same compiled network is trained with:

* no callbacks (bare);
* MindSpore's ``LossMonitor()`` (prints the loss every step; stdout goes to /dev/null,
  as to a log file);
* mindwatch's ``TrainingMonitor()`` with its defaults (loss, lr, epoch, step time,
  throughput every step; a progress line every 10 steps);
* a naive callback that writes loss, lr and throughput with tensorboardX's
  ``SummaryWriter`` every step (what MindFormers' ``MFLossMonitor`` does);
* for information, ``TrainOneStepWithGradNormCell`` + ``TrainingMonitor`` (a
  different graph: the in-graph gradient norm costs graph time, not callback time);
* with ``--prometheus``: ``TrainingMonitor`` with the Prometheus exporter on (its HTTP
  server on loopback, scraped by a thread of this script every ``--scrape-every``
  seconds, 0.01 by default: a hundred times as often as the tests' Prometheus, so that
  scrapes land inside rounds of a few hundred milliseconds), and a line comparing it
  with the row without the exporter, paired round by round;
* with ``--hardware``: ``TrainingMonitor()`` (hardware telemetry on, its default
  period of 5 s) and the same with ``hardware.enabled: false``, in rounds of
  ``--hardware-round-s`` seconds (12 by default; at least ``--steps`` steps), so that
  every round holds samples (the first is published one period after the start), with
  a bare run in rounds of the same duration to compare them with (on this machine steps
  are slower in rounds of thousands of steps than in rounds of 60, bare included); a line
  compares the two, paired round by round, by the mean step interval (a cost that hits
  one step per period counts in full) and by the median, and a last line times the
  sampler thread's own work per sample (the most the training thread can lose to it);
* with ``--forensics``: ``TrainOneStepWithGradNormCell(layer_norms=True)`` (the cell
  returns every parameter's squared gradient norm each step, so the flight recorder
  really gets them) + ``TrainingMonitor()`` (the flight recorder on, its default), and
  the same with ``alerts: {forensics: {enabled: false}}``; a line compares the two,
  paired round by round, and a last one times the recorder's own calls in one more
  round (its appends on the training thread, its share of the pipeline's thread);
* ``TrainOneStepWithGradNormCell(layer_norms=True)`` + ``TrainingMonitor`` recording
  per-layer norms, the parameter norm and histograms every 10 steps: its row shows the
  steps that record nothing extra (they must cost what the row above costs); a line
  below the table gives the cost of a recording step.

Two measurements, because this shared 2-core machine drifts by +-15 % between runs of
the very same configuration:

* **in-callback time**: median CPU time spent inside the callbacks per step (measured around
  them, after waiting for the step's outputs, so the step's own device time is not
  charged to the first callback that reads the loss), as a share of the bare step:
  precise, but it misses the writer's background thread;
* **end to end**: the interval between consecutive steps, including data loading, the
  step, the callbacks and any background thread. Configurations alternate in short
  rounds and each is compared with the bare run of the same round; the median of these
  paired ratios cancels the slow drift, and the spread (25th-75th percentile) is shown.

    python benchmarks/overhead.py [--rounds 12] [--steps 60] [--sizes small,medium,large]
                                  [--prometheus [--scrape-every 0.1]]
                                  [--hardware [--hardware-round-s 12]] [--forensics]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn
from mindspore.train import Callback, LossMonitor, Model

from mindwatch.config.hardware import HardwareSettings
from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.mindspore.demo import CLASSES, FEATURES, make_network

SIZES = {  # name: (hidden width, batch size)
    "small": (128, 32),
    "medium": (768, 64),
    "large": (1536, 128),
}


class StepTimer(Callback):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def on_train_step_begin(self, run_context: Any) -> None:
        self.times.append(_now())

    def intervals(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:])]


def _now() -> float:
    import time

    return time.perf_counter()


class StopAfter(Callback):  # type: ignore[misc]
    """Ends the training after ``seconds`` of wall time and at least ``steps`` steps (a
    round of a fixed duration that still has steps to measure on a loaded machine)."""

    def __init__(self, seconds: float, steps: int) -> None:
        super().__init__()
        self.seconds = seconds
        self.steps = steps
        self.done = 0
        self.start = 0.0

    def on_train_step_end(self, run_context: Any) -> None:
        self.done += 1
        if self.done == 1:  # from the first step: not the data pipeline's start-up
            self.start = _now()
        if self.done >= self.steps and _now() - self.start >= self.seconds:
            run_context.request_stop()


class SampledSteps(Callback):  # type: ignore[misc]
    """The steps during which ``monitor``'s hardware sampler published a sample (its
    count changed between this step's end and the previous one's)."""

    def __init__(self, monitor: Any) -> None:
        super().__init__()
        self.monitor = monitor
        self.steps: list[int] = []  # 1-based, as the step timer's
        self._done = 0
        self._seen = 0

    def on_train_step_end(self, run_context: Any) -> None:
        self._done += 1
        telemetry = self.monitor.monitor.telemetry
        published = telemetry.published if telemetry is not None else 0
        if published != self._seen:
            self._seen = published
            self.steps.append(self._done)


class NaiveTensorBoardX(Callback):  # type: ignore[misc]
    """Writes scalars with tensorboardX every step, on the training thread's terms."""

    def __init__(self, logdir: str, batch_size: int) -> None:
        super().__init__()
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir)
        self.batch_size = batch_size
        self.last = _now()

    def on_train_step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        step = cb.cur_step_num
        now = _now()
        self.writer.add_scalar("loss", float(cb.net_outputs.asnumpy()), step)
        self.writer.add_scalar("learning-rate", float(cb.optimizer.learning_rate.asnumpy()), step)
        self.writer.add_scalar("throughput", self.batch_size / (now - self.last), step)
        self.last = now

    def on_train_end(self, run_context: Any) -> None:
        self.writer.close()


def dataset(steps: int, batch: int) -> Any:
    import mindspore.dataset as ds

    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch * 8, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=(batch * 8,)).astype(np.int32)

    class Source:
        def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
            j = i % len(x)
            return x[j], y[j : j + 1].reshape(())

        def __len__(self) -> int:
            return steps * batch

    return ds.GeneratorDataset(Source(), ["x", "y"], shuffle=False).batch(
        batch, drop_remainder=True
    )


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        yield


def make_model(hidden: int, cell: str) -> Model:
    """``cell``: 'plain' (Model's own TrainOneStepCell), 'gradnorm', or 'layers'
    (TrainOneStepWithGradNormCell with layer_norms=True)."""
    net = make_network(hidden)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    if cell == "plain":
        return Model(net, loss, opt)
    layer_norms = cell == "layers"
    return Model(
        TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss), opt, layer_norms=layer_norms)
    )


class Timed(Callback):  # type: ignore[misc]
    """Runs the wrapped callbacks and adds up the time spent in their step hooks."""

    def __init__(self, callbacks: list[Any]) -> None:
        super().__init__()
        self.callbacks = callbacks
        self.seconds = 0.0
        self.steps = 0
        self.per_step: list[tuple[int, float]] = []  # (step, seconds in the callbacks)

    def _each(self, hook: str, run_context: Any) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(run_context)

    def on_train_begin(self, run_context: Any) -> None:
        self._each("on_train_begin", run_context)

    def on_train_epoch_begin(self, run_context: Any) -> None:
        self._each("on_train_epoch_begin", run_context)

    def on_train_step_begin(self, run_context: Any) -> None:
        t0 = _now()
        self._each("on_train_step_begin", run_context)
        self.seconds += _now() - t0

    def on_train_step_end(self, run_context: Any) -> None:
        # Wait for the step to finish first (untimed, in every configuration, bare
        # included): otherwise the first callback that reads the loss would be charged
        # with the device time of the step itself.
        outputs = run_context.original_args().net_outputs
        (outputs[0] if isinstance(outputs, (tuple, list)) else outputs).asnumpy()
        t0 = _now()
        self._each("on_train_step_end", run_context)
        spent = _now() - t0
        self.seconds += spent
        self.steps += 1
        self.per_step.append((run_context.original_args().cur_step_num, spent))

    def on_train_epoch_end(self, run_context: Any) -> None:
        self._each("on_train_epoch_end", run_context)

    def on_train_end(self, run_context: Any) -> None:
        self._each("on_train_end", run_context)


class Scraper:
    """Reads the exporter's /metrics every ``every`` seconds, as Prometheus would."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.url = ""  # the exporter being trained now
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def config(self) -> dict[str, Any]:
        """A config with the exporter on a fresh free port, which this scraper reads."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{port}/metrics"
        return {"prometheus": {"port": port}}

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if not self.url:
                continue
            try:
                with urllib.request.urlopen(self.url, timeout=1) as answer:
                    answer.read()
                self.scrapes += 1
            except OSError:
                pass  # between two runs: no server

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def sampler_work(period_s: float, window_s: float) -> str:
    """What one sample costs the sampler thread, timed directly: the host probe (psutil)
    and the growth statistics over a full window. The training thread can lose at most
    this (the sampler holds the GIL while it computes) once per period."""
    import time

    from mindwatch.hardware.growth import growth_stats
    from mindwatch.hardware.host import HostProbe

    probe = HostProbe(tempfile.gettempdir())
    probe()  # primes the rates
    reads = []
    for _ in range(50):
        start = time.thread_time()
        probe()
        reads.append(time.thread_time() - start)
    n = int(window_s / period_s)
    times = [i * period_s for i in range(n)]
    rss = [1000.0 + 0.1 * i for i in range(n)]
    stats = []
    for _ in range(50):
        start = time.thread_time()
        growth_stats(times, rss)
        stats.append(time.thread_time() - start)
    read, stat = statistics.median(reads), statistics.median(stats)
    work = read + stat
    return (
        f"hardware sampler thread, CPU time per sample: host probe {read * 1e6:.0f} us, "
        f"growth statistics over {n} samples {stat * 1e6:.0f} us; "
        f"every {period_s:g} s: {100 * work / period_s:.4f} % of one core"
    )


class RecorderClock:
    """Times the flight recorder's per-step calls while it is installed (a context
    manager): its appends on the training thread (``add_layers``, wall time) and its
    work on the pipeline's thread (``add_scalars``, that thread's CPU time)."""

    def __init__(self) -> None:
        self.layers: list[float] = []
        self.scalars: list[float] = []

    def __enter__(self) -> RecorderClock:
        import time

        from mindwatch.forensics import FlightRecorder

        self._saved = FlightRecorder.add_layers, FlightRecorder.add_scalars
        add_layers, add_scalars = self._saved

        def timed_layers(recorder: FlightRecorder, step: int, squares: Any) -> None:
            start = time.perf_counter()
            add_layers(recorder, step, squares)
            self.layers.append(time.perf_counter() - start)

        def timed_scalars(recorder: FlightRecorder, step: int, values: Any) -> None:
            start = time.thread_time()
            add_scalars(recorder, step, values)
            self.scalars.append(time.thread_time() - start)

        FlightRecorder.add_layers = timed_layers  # type: ignore[method-assign]
        FlightRecorder.add_scalars = timed_scalars  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from mindwatch.forensics import FlightRecorder

        FlightRecorder.add_layers, FlightRecorder.add_scalars = self._saved  # type: ignore[method-assign]


def _quantile(values: list[float], q: float) -> float:
    return float(np.quantile(np.asarray(values), q))


def recorder_lines(
    steps: int,
    bare: float,
    *,
    medians: dict[str, list[float]],
    means: dict[str, list[float]],
    inside: dict[str, list[float]],
    on: str,
    off: str,
) -> str:
    """The flight recorder on vs off, paired by round: end to end (median and mean step)
    and in the callbacks, as shares of the bare step."""
    by_median = [a / b for a, b in zip(medians[on], medians[off])]
    by_mean = [a / b for a, b in zip(means[on], means[off])]
    on_us, off_us = (statistics.median(inside[name]) * 1e6 for name in (on, off))
    return (
        f"  flight recorder on vs off, paired by round ({len(by_median)} x {steps} steps): "
        f"median step {statistics.median(by_median):.3f} ({_quantile(by_median, 0.25):.3f}-"
        f"{_quantile(by_median, 0.75):.3f}), mean step {statistics.median(by_mean):.3f} "
        f"({_quantile(by_mean, 0.25):.3f}-{_quantile(by_mean, 0.75):.3f}); in-callback "
        f"{on_us:.1f} vs {off_us:.1f} us ({100 * (on_us - off_us) / (bare * 1e6):+.2f} % of "
        "the bare step)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="steps per round")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument(
        "--prometheus", action="store_true", help="add TrainingMonitor with the exporter on"
    )
    parser.add_argument("--scrape-every", type=float, default=0.01, help="seconds")
    parser.add_argument(
        "--hardware",
        action="store_true",
        help="add TrainingMonitor with hardware telemetry on and off, in rounds of a duration",
    )
    parser.add_argument("--hardware-round-s", type=float, default=12.0, help="seconds")
    parser.add_argument(
        "--forensics",
        action="store_true",
        help="add the layers cell + TrainingMonitor with the flight recorder on and off",
    )
    args = parser.parse_args()
    ms.set_device("CPU")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)

    tmp = tempfile.TemporaryDirectory()
    root = Path(tmp.name)
    counter = iter(range(10**6))

    def folder() -> str:
        return str(root / f"run{next(counter)}")

    bare_name = "bare (no callbacks)"
    every = 10  # the per-layer configuration records norms and histograms every 10 steps
    layers_name = f"layers cell + layer norms, histograms /{every}"
    layer_config = {
        "layer_norms_every": every,
        "param_norm_every": every,
        "histogram_every_steps": every,
    }
    scraper = Scraper(args.scrape_every) if args.prometheus else None
    off_name, on_name = "mindwatch TrainingMonitor()", "  + Prometheus exporter, scraped"
    exporter: dict[str, tuple[str, Callable[[int], list[Any]]]] = {}
    if scraper is not None:
        exporter[on_name] = (
            "plain",
            lambda b: [TrainingMonitor(scraper.config(), logdir=folder())],
        )
    hw_bare_name, hw_on_name, hw_off_name = (
        f"bare, {args.hardware_round_s:g} s rounds",
        f"  TrainingMonitor(), {args.hardware_round_s:g} s rounds",
        "    same, hardware.enabled: false",
    )
    hw_monitors: list[Any] = []  # the telemetry rounds' monitors, to count their samples

    def hw_on(b: int) -> list[Any]:
        hw_monitors.append(TrainingMonitor(logdir=folder()))
        return [hw_monitors[-1]]

    def hw_off(b: int) -> list[Any]:
        hw_monitors.append(TrainingMonitor({"hardware": {"enabled": False}}, logdir=folder()))
        return [hw_monitors[-1]]

    hardware: dict[str, tuple[str, Callable[[int], list[Any]]]] = {}
    if args.hardware:
        hardware[hw_bare_name] = ("plain", lambda b: [])
        hardware[hw_on_name] = ("plain", hw_on)
        hardware[hw_off_name] = ("plain", hw_off)
    rec_on_name, rec_off_name = "layers cell + TrainingMonitor()", "  same, alerts.forensics off"
    no_recorder = {"alerts": {"forensics": {"enabled": False}}}
    recorder: dict[str, tuple[str, Callable[[int], list[Any]]]] = {}
    if args.forensics:
        recorder[rec_on_name] = ("layers", lambda b: [TrainingMonitor(logdir=folder())])
        recorder[rec_off_name] = (
            "layers",
            lambda b: [TrainingMonitor(no_recorder, logdir=folder())],
        )
    configs: dict[str, tuple[str, Callable[[int], list[Any]]]] = {
        bare_name: ("plain", lambda b: []),
        "MindSpore LossMonitor()": ("plain", lambda b: [LossMonitor()]),
        off_name: ("plain", lambda b: [TrainingMonitor(logdir=folder())]),
        **exporter,
        **hardware,
        **recorder,
        "naive tensorboardX callback": ("plain", lambda b: [NaiveTensorBoardX(folder(), b)]),
        "GradNorm cell + TrainingMonitor()": (
            "gradnorm",
            lambda b: [TrainingMonitor(logdir=folder())],
        ),
        layers_name: ("layers", lambda b: [TrainingMonitor(layer_config, logdir=folder())]),
    }
    print(
        f"{args.rounds} rounds x {args.steps} steps per configuration, configurations "
        "alternating; GRAPH mode, CPU\n"
    )
    for size in args.sizes.split(","):
        hidden, batch = SIZES[size]
        built = {kind: make_model(hidden, kind) for kind in ("plain", "gradnorm", "layers")}
        models = {name: built[kind] for name, (kind, _) in configs.items()}
        with quiet_stdout():  # compile every graph before timing
            for model in built.values():
                model.train(1, dataset(20, batch))
        ratios: dict[str, list[float]] = {name: [] for name in configs}
        means: dict[str, list[float]] = {name: [] for name in configs}  # per round
        sampled: list[float] = []  # intervals of the steps that held a sample
        on_steps: list[float] = []  # every interval of the rounds with telemetry on
        hw_monitors.clear()
        medians: dict[str, list[float]] = {name: [] for name in configs}
        inside: dict[str, list[float]] = {name: [] for name in configs}
        recording: list[float] = []  # in-callback time of the layer config's recording steps
        names = list(configs)
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            this_round: dict[str, float] = {}
            for name in order:
                timer, timed = StepTimer(), Timed(configs[name][1](batch))
                steps, extra = args.steps, []
                if name in hardware:  # a round of a duration, ended by StopAfter
                    # enough data for 0.5 ms steps (a dataset of millions of rows
                    # takes seconds to start on a loaded machine)
                    steps = max(args.steps, int(args.hardware_round_s * 2000))
                    extra = [StopAfter(args.hardware_round_s, args.steps)]
                    if name != hw_bare_name:  # on and off alike: the same callbacks
                        extra.append(SampledSteps(hw_monitors[-1]))
                with quiet_stdout():
                    models[name].train(1, dataset(steps, batch), callbacks=[timer, timed, *extra])
                this_round[name] = statistics.median(timer.intervals()[5:])
                means[name].append(statistics.fmean(timer.intervals()[5:]))
                if name == hw_on_name:
                    intervals = timer.intervals()
                    on_steps += intervals[5:]
                    # interval j runs from step j+1's begin to step j+2's: it holds the
                    # end of step j+1
                    sampled += [
                        intervals[s - 1] for s in extra[-1].steps if 5 < s <= len(intervals)
                    ]
                if name == layers_name:
                    recording += [t for step, t in timed.per_step if step % every == 0]
                    plain_steps = [t for step, t in timed.per_step if step % every]
                else:
                    plain_steps = [t for _, t in timed.per_step]
                inside[name] += plain_steps
            for name in names:
                medians[name].append(this_round[name])
                # steps are slower in long rounds, bare ones too: compared with the bare
                # run of rounds of the same duration
                base = hw_bare_name if name in hardware else bare_name
                ratios[name].append(this_round[name] / this_round[base])
        bare = statistics.median(medians[bare_name])
        print(
            f"model {size}: 64-{hidden}-{hidden}-10 MLP, batch {batch}; "
            f"bare step {bare * 1e3:.2f} ms"
        )
        print(
            f"  {'configuration':36} {'in-callback':>11} {'% of bare':>9}  "
            f"{'end-to-end vs bare (median, p25-p75)':>37}"
        )
        for name in names:
            cb_us = statistics.median(inside[name]) * 1e6
            ratio = ratios[name]
            spread = f"{_quantile(ratio, 0.25):.3f}-{_quantile(ratio, 0.75):.3f}"
            print(
                f"  {name:36} {cb_us:8.1f} us {100 * cb_us / (bare * 1e6):8.2f}%  "
                f"{statistics.median(ratio):>22.3f} ({spread})"
            )
        if scraper is not None:
            paired = [on / off for on, off in zip(medians[on_name], medians[off_name])]
            on_us = statistics.median(inside[on_name]) * 1e6
            off_us = statistics.median(inside[off_name]) * 1e6
            print(
                f"  exporter on vs off, paired by round: end-to-end "
                f"{statistics.median(paired):.3f} ({_quantile(paired, 0.25):.3f}-"
                f"{_quantile(paired, 0.75):.3f}); in-callback {on_us:.1f} vs {off_us:.1f} us; "
                f"{scraper.scrapes} scrapes so far"
            )
        if args.hardware:
            by_mean = [on / off for on, off in zip(means[hw_on_name], means[hw_off_name])]
            by_median = [on / off for on, off in zip(medians[hw_on_name], medians[hw_off_name])]
            on_us = statistics.median(inside[hw_on_name]) * 1e6
            off_us = statistics.median(inside[hw_off_name]) * 1e6
            samples = [t.published for m in hw_monitors if (t := m.monitor.telemetry)]
            print(
                f"  hardware telemetry on vs off, paired by round: mean step "
                f"{statistics.median(by_mean):.3f} ({_quantile(by_mean, 0.25):.3f}-"
                f"{_quantile(by_mean, 0.75):.3f}), median step "
                f"{statistics.median(by_median):.3f} ({_quantile(by_median, 0.25):.3f}-"
                f"{_quantile(by_median, 0.75):.3f}); in-callback {on_us:.1f} vs {off_us:.1f} us; "
                f"samples per round {min(samples, default=0)}-{max(samples, default=0)}"
            )
            if sampled:
                held, typical = statistics.median(sampled), statistics.median(on_steps)
                period = HardwareSettings().period_s
                print(
                    f"  the {len(sampled)} steps during which a sample was taken: median "
                    f"{held * 1e3:.2f} ms, all steps of those rounds {typical * 1e3:.2f} ms: "
                    f"{(held - typical) * 1e3:+.2f} ms per sample, "
                    f"{100 * (held - typical) / period:+.4f} % of a {period:g} s period"
                )
        if args.forensics:
            names_of = {"on": rec_on_name, "off": rec_off_name}
            print(
                recorder_lines(
                    args.steps, bare, medians=medians, means=means, inside=inside, **names_of
                )
            )
            with RecorderClock() as clock, quiet_stdout():
                models[rec_on_name].train(
                    1, dataset(args.steps, batch), callbacks=[TrainingMonitor(logdir=folder())]
                )
            layers_us = statistics.median(clock.layers[5:]) * 1e6
            scalars_us = statistics.median(clock.scalars[5:]) * 1e6
            print(
                f"  the recorder's own calls, one more round: add_layers {layers_us:.2f} us "
                f"(training thread), add_scalars {scalars_us:.2f} us (pipeline thread's CPU); "
                f"together {100 * (layers_us + scalars_us) / (bare * 1e6):.3f} % of the bare step"
            )
        if recording:
            rec_ms = statistics.median(recording) * 1e3
            print(
                f"  a recording step of '{layers_name}' (norms of all "
                f"{len(built['layers'].train_network.weights)} parameters, their parameter and "
                f"gradient histograms): {rec_ms:.2f} ms in the callback "
                f"({rec_ms / (bare * 1e3):.1f}x the bare step); the other steps: the row above"
            )
        print()
    if args.hardware:
        defaults = HardwareSettings()
        print(sampler_work(defaults.period_s, defaults.growth_window_s))
    if scraper is not None:
        scraper.stop()
    tmp.cleanup()


if __name__ == "__main__":
    main()
