"""The metrics a Prometheus server scrapes from mindwatch, one registry for many runs.

:class:`PrometheusMetrics` owns a ``prometheus_client`` ``CollectorRegistry`` and is
itself its collector: the in-job exporter (:mod:`mindwatch.sinks.prometheus`) and
``mindwatch watch --prometheus`` both feed it through one :class:`RunSeries` per run
(and rank), and every scrape builds the families from what was fed last. Every series
carries the ``run`` label (the run folder's name), ``rank`` for a rank's own values, and
the user's constant labels (``job``, ``team``, ...). The series of one process's own
values (a rank's, or those of an unreduced run) also carry ``node`` (its host name) and
``device_id`` (its logical device, ``DEVICE_ID``; empty when unknown), so a query can
join them with the node's NPU-Exporter series (``docs/prometheus.md``); the job's
reduced series have neither: they are no one device's.

================================================  ======================================
metric (default prefix ``mindwatch``)             from
================================================  ======================================
``mindwatch_step``                                the last training step
``mindwatch_loss``                                ``train/loss``
``mindwatch_learning_rate``                       ``train/lr``
``mindwatch_grad_norm``                           ``train/grad_norm``
``mindwatch_samples_per_second``                  ``perf/samples_per_s``
``mindwatch_tokens_per_second``                   ``perf/tokens_per_s``
``mindwatch_step_seconds``                        ``perf/step_time_ms`` / 1000
``mindwatch_mfu_ratio``                           ``perf/mfu`` (0..1), when known
``mindwatch_eval{metric}``                        ``eval/<metric>``
``mindwatch_last_step_timestamp_seconds``         the wall time of the last step
``mindwatch_seconds_since_last_step``             now minus that, at scrape time
``mindwatch_alerts_total{rule,severity}``         alerts raised (a counter)
``mindwatch_run_status{status}``                  1 for the run's status, 0 for the others
``mindwatch_rank_spread{metric,stat}``            ``ranks/<metric>_{min,max,mean,std}``
``mindwatch_rank_argmax{metric}``                 ``ranks/<metric>_argmax`` (a rank)
``mindwatch_hardware{metric}``                    ``hw/<metric>`` (hardware telemetry)
``mindwatch_straggler{metric}``                   ``straggler/<metric>`` (input wait, step)
``mindwatch_nonfinite_total``                     NaN/Inf values seen (a counter)
``mindwatch_info{version,world_size}``            1
================================================  ======================================

Tags that map to none of these are ignored. A NaN or an infinity is served as it is
(Prometheus stores both) and counted in ``mindwatch_nonfinite_total``, except the
``ranks/`` spread, which repeats values already counted.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from mindwatch._version import __version__

__all__ = [
    "DEFAULT_PREFIX",
    "METRIC_NAMES",
    "RUN_STATUSES",
    "SPREAD_STATS",
    "PrometheusMetrics",
    "RunSeries",
    "metric_names",
]

DEFAULT_PREFIX = "mindwatch"
RUN_STATUSES = ("running", "finished", "failed", "terminated", "crashed")
SPREAD_STATS = ("min", "max", "mean", "std")
# Labels mindwatch sets itself: a constant label may not take one of these names.
OWN_LABELS = (
    "run", "rank", "metric", "stat", "rule", "severity", "status", "version", "world_size",
    "node", "device_id",
)  # fmt: skip

# (name, tag, scale, help) of the gauges read straight from a step's values.
_STEP_GAUGES: tuple[tuple[str, str, float, str], ...] = (
    ("loss", "train/loss", 1.0, "Training loss (train/loss) at the last step."),
    ("learning_rate", "train/lr", 1.0, "Learning rate (train/lr) at the last step."),
    ("grad_norm", "train/grad_norm", 1.0, "Global gradient norm (train/grad_norm)."),
    ("samples_per_second", "perf/samples_per_s", 1.0, "Samples per second, the whole job."),
    ("tokens_per_second", "perf/tokens_per_s", 1.0, "Tokens per second, the whole job."),
    ("step_seconds", "perf/step_time_ms", 0.001, "Seconds per training step."),
    ("mfu_ratio", "perf/mfu", 1.0, "Model FLOPs utilisation, 0 to 1 (when known)."),
)
_BY_TAG = {tag: (name, scale) for name, tag, scale, _ in _STEP_GAUGES}


def metric_names(prefix: str = DEFAULT_PREFIX) -> tuple[str, ...]:
    """The names of the series served, as PromQL sees them (counters end in ``_total``)."""
    names = ["step", *(name for name, *_ in _STEP_GAUGES), "eval"]
    names += ["last_step_timestamp_seconds", "seconds_since_last_step", "alerts_total"]
    names += ["run_status", "rank_spread", "rank_argmax", "hardware", "straggler"]
    names += ["nonfinite_total", "info"]
    return tuple(f"{prefix}_{name}" for name in names)


#: The names served with the default prefix (dashboards and rules use these).
METRIC_NAMES = metric_names()


@dataclass
class _State:
    """What one run (or one rank of it) last reported."""

    step: Optional[int] = None
    wall: Optional[float] = None
    values: dict[str, float] = field(default_factory=dict)  # gauge name -> value
    evals: dict[str, float] = field(default_factory=dict)  # metric -> value
    spread: dict[tuple[str, str], float] = field(default_factory=dict)  # (metric, stat)
    argmax: dict[str, float] = field(default_factory=dict)
    hardware: dict[str, float] = field(default_factory=dict)  # hw/<metric> -> value
    straggler: dict[str, float] = field(default_factory=dict)  # straggler/<metric>
    alerts: dict[tuple[str, str], int] = field(default_factory=dict)  # (rule, severity)
    nonfinite: int = 0
    status: Optional[str] = None
    world_size: Optional[int] = None
    place: Optional[tuple[str, str]] = None  # (node, device_id) of one process's values


def _count_nonfinite(values: Sequence[tuple[str, float]]) -> int:
    return sum(
        1 for tag, value in values if not tag.startswith("ranks/") and not math.isfinite(value)
    )


class RunSeries:
    """One run's (or one rank's) series in a :class:`PrometheusMetrics`; every method is
    cheap and thread-safe (the pipeline or the watcher writes, a scrape reads)."""

    def __init__(self, owner: PrometheusMetrics, state: _State) -> None:
        self._lock = owner._lock
        self._state = state

    def observe_step(self, step: int, values: Sequence[tuple[str, float]], wall: float) -> None:
        """A training step's ``(tag, value)`` pairs (derived, reduced under ``msrun``)."""
        with self._lock:
            state = self._state
            state.step, state.wall = int(step), float(wall)
            state.nonfinite += _count_nonfinite(values)
            for tag, value in values:
                known = _BY_TAG.get(tag)
                if known is not None:
                    name, scale = known
                    state.values[name] = float(value) * scale
                elif tag.startswith("ranks/"):
                    _note_spread(state, tag[len("ranks/") :], float(value))
                elif tag.startswith("hw/"):
                    state.hardware[tag[len("hw/") :]] = float(value)
                elif tag.startswith("straggler/"):
                    state.straggler[tag[len("straggler/") :]] = float(value)

    def observe_eval(self, values: Sequence[tuple[str, float]]) -> None:
        """Evaluation results (``eval/<metric>`` tags; others are ignored)."""
        with self._lock:
            state = self._state
            state.nonfinite += _count_nonfinite(values)
            for tag, value in values:
                if tag.startswith("eval/"):
                    state.evals[tag[len("eval/") :]] = float(value)

    def count_alert(self, rule: str, severity: str) -> None:
        """One alert raised by ``rule``."""
        with self._lock:
            key = (rule, severity)
            self._state.alerts[key] = self._state.alerts.get(key, 0) + 1

    def set_status(self, status: str) -> None:
        """The run's status: one of :data:`RUN_STATUSES`."""
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}; one of {', '.join(RUN_STATUSES)}")
        with self._lock:
            self._state.status = status

    def set_world_size(self, world_size: Optional[int]) -> None:
        with self._lock:
            self._state.world_size = world_size

    def set_place(self, node: str, device_id: Optional[int]) -> None:
        """The host and logical device whose values these are: every series gets the
        ``node`` and ``device_id`` labels (``""`` for an unknown device). Only for one
        process's own values, never for a job's reduced ones."""
        with self._lock:
            self._state.place = (node, "" if device_id is None else str(device_id))

    @property
    def step(self) -> Optional[int]:
        return self._state.step


def _note_spread(state: _State, rest: str, value: float) -> None:
    """``<metric>_<stat>`` of a ``ranks/`` tag into the spread or the argmax rank."""
    metric, _, stat = rest.rpartition("_")
    if not metric:
        return
    if stat == "argmax":
        state.argmax[metric] = value
    elif stat in SPREAD_STATS:
        state.spread[(metric, stat)] = value


class PrometheusMetrics:
    """A ``prometheus_client`` registry serving the runs fed to it (see the module).

    Args:
        prefix: the metric names' prefix (``mindwatch`` -> ``mindwatch_loss``).
        labels: constant labels on every series (``{"job": "llama", "team": "nlp"}``);
            validated by the config (``prometheus.labels``).
        clock: wall time, for ``seconds_since_last_step``.
    """

    def __init__(
        self,
        *,
        prefix: str = DEFAULT_PREFIX,
        labels: Optional[Mapping[str, str]] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from prometheus_client import CollectorRegistry  # only when an exporter is wanted

        self.prefix = prefix
        self.labels = dict(labels or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, Optional[int]], _State] = {}
        self.collections = 0  # how often the values were read (scrapes, pushes, text())
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    @property
    def names(self) -> tuple[str, ...]:
        """The names this registry serves (with its prefix)."""
        return metric_names(self.prefix)

    def run(self, run: str, *, rank: Optional[int] = None) -> RunSeries:
        """The series of ``run`` (with ``rank``: that rank's own values); made once."""
        with self._lock:
            state = self._runs.setdefault((run, rank), _State())
        return RunSeries(self, state)

    def forget(self, run: str, *, rank: Optional[int] = None) -> None:
        """Stop serving ``run`` (a run folder that went away)."""
        with self._lock:
            self._runs.pop((run, rank), None)

    def text(self) -> str:
        """The Prometheus text exposition of everything served now."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode("utf-8")

    # ------------------------------------------------------------ the collector

    def collect(self) -> Iterator[Any]:
        """The metric families, built from the runs' last values (a scrape calls this)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            runs = [(key, _copy(state)) for key, state in self._runs.items()]
            self.collections += 1
        now = self._clock()
        prefix = self.prefix

        def gauge(name: str, doc: str) -> Any:
            return GaugeMetricFamily(f"{prefix}_{name}", doc)

        def counter(name: str, doc: str) -> Any:
            return CounterMetricFamily(f"{prefix}_{name}", doc)

        step = gauge("step", "The last training step logged.")
        gauges = {name: gauge(name, doc) for name, _, _, doc in _STEP_GAUGES}
        evals = gauge("eval", "The last evaluation's metrics (eval/<metric>).")
        stamp = gauge("last_step_timestamp_seconds", "Unix time of the last training step.")
        since = gauge("seconds_since_last_step", "Seconds since the last training step.")
        alerts = counter("alerts", "Alerts raised, by rule and severity.")
        status = gauge("run_status", "1 for the run's status, 0 for the others.")
        spread = gauge("rank_spread", "A metric's spread across ranks (ranks/<metric>_<stat>).")
        argmax = gauge("rank_argmax", "The rank with a metric's largest value.")
        hardware = gauge("hardware", "Hardware telemetry (hw/<metric>), its latest sample.")
        straggler = gauge("straggler", "Input wait and step time per interval (straggler/).")
        nonfinite = counter("nonfinite", "NaN or Inf values logged.")
        info = gauge("info", "1, with mindwatch's version and the job's ranks.")

        for (run, rank), state in runs:
            own = {"run": run, **self.labels}
            if rank is not None:
                own["rank"] = str(rank)
            if state.place is not None:
                own["node"], own["device_id"] = state.place

            def add(family: Any, value: float, own: dict[str, str] = own, **extra: str) -> None:
                suffix = "_total" if family.type == "counter" else ""
                family.add_sample(family.name + suffix, {**own, **extra}, value)

            world = "" if state.world_size is None else str(state.world_size)
            add(info, 1.0, version=__version__, world_size=world)
            if state.status is not None:
                for one in RUN_STATUSES:
                    add(status, 1.0 if one == state.status else 0.0, status=one)
            for (rule, severity), count in sorted(state.alerts.items()):
                add(alerts, float(count), rule=rule, severity=severity)
            add(nonfinite, float(state.nonfinite))
            for metric, value in sorted(state.evals.items()):  # also before a first step
                add(evals, value, metric=metric)  # (an evaluation-only run)
            if state.step is None or state.wall is None:
                continue
            add(step, float(state.step))
            add(stamp, state.wall)
            add(since, max(0.0, now - state.wall))
            for name, value in state.values.items():
                add(gauges[name], value)
            for (metric, stat), value in sorted(state.spread.items()):
                add(spread, value, metric=metric, stat=stat)
            for metric, value in sorted(state.argmax.items()):
                add(argmax, value, metric=metric)
            for metric, value in sorted(state.hardware.items()):
                add(hardware, value, metric=metric)
            for metric, value in sorted(state.straggler.items()):
                add(straggler, value, metric=metric)
        yield step
        yield from gauges.values()
        yield from (evals, stamp, since, alerts, status, spread, argmax, hardware, straggler)
        yield from (nonfinite, info)


def _copy(state: _State) -> _State:
    """A snapshot, so a scrape formats outside the lock."""
    return _State(
        step=state.step,
        wall=state.wall,
        values=dict(state.values),
        evals=dict(state.evals),
        spread=dict(state.spread),
        argmax=dict(state.argmax),
        hardware=dict(state.hardware),
        straggler=dict(state.straggler),
        alerts=dict(state.alerts),
        nonfinite=state.nonfinite,
        status=state.status,
        world_size=state.world_size,
        place=state.place,
    )
