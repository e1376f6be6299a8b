"""``layer_grad_outlier``: one layer's gradient norm far above its own history, for
several steps in a row: a leading indicator of a spike or a divergence (issue 23).

A layer's gradient can grow many times its usual size while the global norm, a root of
the sum over hundreds of layers, hardly moves (per-parameter spikes of up to 1000x,
most often in LayerNorm parameters: SPAM, arXiv 2501.06842). The rule reads the
per-parameter norms the MindSpore callback writes as ``layers/grad_norm/<param>``
(``TrainOneStepWithGradNormCell(..., layer_norms=True)`` every step, or every
``layer_norms_every`` steps from the cell's default; MindFormers' ``local_norm``)
and judges each against its *own* recent values: in log space (a norm's noise is
multiplicative), its median over the last ``window`` points and its noise (the MAD, or
the successive differences when smaller: a drifting norm's window is trend, not
noise). A point above the geometric midpoint between the median and the limit is kept
out of the history, so a layer that grows does not drag its median up behind it; one
held there for ``window`` points in a row has found a new level and is taken again.

A layer counts as outlying at a point when its norm is above ``factor`` times its
median *and* ``zscore`` robust standard deviations above it (both: a steady layer
whose norm barely moves must still grow ``factor``-fold; a noisy one must also clear
its noise). It alerts once it has been outlying at ``steps`` of its last ``within``
points (3 of 5: a growing norm with noise on it dips below the limit now and then),
spanning at least ``seconds`` of training (measured from ``perf/step_time_ms``): a
single heavy-tailed batch makes one large gradient and is the ``spike`` rule's
business. One finding per episode names the layer furthest above its median (message
and ``extra``); the episode ends once no layer has been outlying in its last
``within`` points.

Cost: per layer and point a few comparisons against cached statistics, recomputed every
50 points taken into the history, or at once for a value above a quarter of the limit
(about 1.5 us a layer and point; the tags it reads are found once per set of tags).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from itertools import repeat
from operator import sub
from typing import Any, ClassVar

from pydantic import Field

from mindwatch.common.i18n import N_
from mindwatch.rules.base import MAX_WINDOW, Finding, Rule, RuleSettings, fmt
from mindwatch.rules.sustained import TrainingClock
from mindwatch.rules.tags import MatchingTags

__all__ = ["LayerGradOutlierRule", "LayerGradOutlierSettings"]

# Points taken between two recomputations of a layer's median and noise (three sorts
# of its window: amortised, about 1 us a point). The cached limit is only a first test:
# a value above a quarter of it is judged on fresh statistics, so a limit that fell up
# to 4x since (a layer's norm falling fast in the first steps) is never judged stale.
_REFRESH = 50
_MAD_TO_SIGMA = 1.4826


class LayerGradOutlierSettings(RuleSettings):
    """``layer_grad_outlier``: one layer's gradient norm far above its own median; names it.

    Reads ``layers/grad_norm/<param>``; persistence: ``steps`` of the last ``within``."""

    prefix: str = Field(
        default="layers/grad_norm/",
        description="The tags judged: every tag starting with this (one per parameter).",
    )
    factor: float = Field(
        default=10.0, gt=1, description="Outlying above this many times the layer's median."
    )
    critical_factor: float = Field(
        default=100.0, gt=1, description="Critical above this many times the median."
    )
    zscore: float = Field(
        default=6.0,
        ge=0,
        description="... and this many robust standard deviations above it, in log space "
        "(1.4826 MAD of the layer's window, or the spread of its successive differences "
        "when smaller).",
    )
    window: int = Field(
        default=100,
        ge=5,
        le=MAX_WINDOW,
        description="Points of each layer's history (at most 10000: kept and sorted on "
        "the pipeline's thread, for every layer).",
    )
    warmup: int = Field(
        default=30, ge=1, description="Points of a layer seen before it may be outlying."
    )
    steps: int = Field(
        default=3,
        ge=1,
        le=MAX_WINDOW,
        description="Points a layer must be outlying at (at most 10000) ...",
    )
    within: int = Field(
        default=5,
        ge=1,
        le=MAX_WINDOW,
        description="... among its last this many points (at least steps; equal to it: "
        "in a row). At most 10000.",
    )
    global_metric: str = Field(
        default="train/grad_norm",
        description="The global gradient norm, for min_share (not logged: no share test).",
    )
    min_share: float = Field(
        default=1e-6,
        ge=0,
        lt=1,
        description="A layer whose norm is below this fraction of the global norm is not "
        "judged: a parameter the loss does not depend on (a key bias under softmax) has a "
        "gradient of float32 rounding noise (epsilon 1.2e-7), which swings by orders of "
        "magnitude.",
    )
    seconds: float = Field(
        default=0.0,
        ge=0,
        le=86_400,
        description="... also spanning at least this many seconds of training (from "
        "perf/step_time_ms; 0: the steps alone). At most 86400.",
    )


class _Layer:
    """One layer's history (log norms), its cached statistics and its current run of
    outlying points."""

    __slots__ = (
        "center",
        "hits",
        "judged",
        "limit",
        "logs",
        "midpoint",
        "noise",
        "quarter",
        "ready",
        "rejected",
        "since_ms",
        "stale",
    )

    def __init__(self, window: int) -> None:
        self.logs: deque[float] = deque(maxlen=window)
        self.ready = False  # warmup points seen: judged from now on
        self.center = 0.0  # median of the logs
        self.noise = 0.0  # its noise, in log (1.4826 MAD, or from successive differences)
        self.limit = math.inf  # the value above which it is outlying
        self.quarter = math.inf  # above a quarter of the limit, fresh statistics first
        self.midpoint = math.inf  # log of the largest value taken into the history
        self.stale = _REFRESH  # points taken since the statistics were computed
        self.judged = 0  # points judged so far
        self.hits: deque[tuple[int, float]] = deque()  # outlying points: (index, ms)
        self.since_ms = 0.0  # training time of the first hit since it had none
        self.rejected = 0  # points in a row kept out of the history


class LayerGradOutlierRule(Rule[LayerGradOutlierSettings]):
    """Each ``layers/grad_norm/<param>`` against its own median and noise (log space):
    above ``factor`` x its median and ``zscore`` robust deviations at ``steps`` of its
    last ``within`` points (and over ``seconds``); one finding per episode naming the
    layer furthest above its median."""

    name = "layer_grad_outlier"
    settings_model = LayerGradOutlierSettings
    causes = (
        N_("this layer's gradient is growing: a learning rate too high for it, or no clipping"),
        N_("a LayerNorm or embedding parameter hit by rare tokens or outlier inputs"),
        N_("a bug that scales this layer's input or its gradient (check recent changes)"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "outlier": N_(
            "layer {layer}: gradient norm {value} is {ratio}x its own median {median}, "
            "outlying at {count} of its last {within} steps (robust z {z:.0f})"
        ),
        "others": N_("{message}; also outlying: {others}"),
    }
    # State: every layer's logs and run, ``raised`` and the clock (state_dict below).

    def __init__(self, settings: LayerGradOutlierSettings) -> None:
        super().__init__(settings)
        self.layers: dict[str, _Layer] = {}
        self.clock = TrainingClock()
        self.raised = False  # an episode's finding was made; quiet until it ends
        self.tags = MatchingTags(lambda tag: tag.startswith(settings.prefix))
        self.ready_at = min(settings.warmup, settings.window)  # points before judging

    def state_dict(self) -> dict[str, Any]:
        layers = {
            tag: {
                "logs": list(layer.logs),
                "judged": layer.judged,
                "hits": [list(hit) for hit in layer.hits],
                "since_ms": layer.since_ms,
                "rejected": layer.rejected,
                # the cached statistics, so a restored rule judges as this one would
                "stats": [layer.center, layer.noise, layer.limit, layer.midpoint, layer.stale]
                if math.isfinite(layer.limit)
                else None,
            }
            for tag, layer in self.layers.items()
        }
        return {"layers": layers, "raised": self.raised, "clock": self.clock.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "layers" in state:
            self.layers = {}
            for tag, saved in (state["layers"] or {}).items():
                layer = self.layers[tag] = _Layer(self.settings.window)
                layer.logs.extend(float(v) for v in saved.get("logs") or ())
                layer.judged = int(saved.get("judged") or 0)
                layer.hits.extend((int(i), float(ms)) for i, ms in saved.get("hits") or ())
                layer.since_ms = float(saved.get("since_ms") or 0.0)
                layer.rejected = int(saved.get("rejected") or 0)
                layer.ready = len(layer.logs) >= self.ready_at
                stats = saved.get("stats")
                if stats:
                    center, noise, limit, midpoint, stale = (float(v) for v in stats)
                    layer.center, layer.noise, layer.midpoint = center, noise, midpoint
                    layer.limit, layer.quarter, layer.stale = limit, 0.25 * limit, int(stale)
        self.raised = bool(state.get("raised", self.raised))
        self.clock.load_state_dict(state.get("clock") or {})

    def _refresh(self, layer: _Layer) -> None:
        """The layer's median and noise from its history (``map`` keeps the loops in C:
        this runs for every layer every 50 points)."""
        s = self.settings
        logs = list(layer.logs)
        n = len(logs)
        ordered = sorted(logs)
        center = ordered[n // 2]
        mad = sorted(map(abs, map(sub, ordered, repeat(center, n))))[n // 2]
        # Also the noise from successive differences: a layer whose norm drifts (the
        # first steps, a schedule) has a wide window that is trend, not noise.
        steps = sorted(map(abs, map(sub, logs[1:], logs))) or [2.0 * mad]
        noise = _MAD_TO_SIGMA * min(mad, steps[len(steps) // 2] / math.sqrt(2.0))
        rise = max(math.log(s.factor), s.zscore * noise)  # in log, above the median
        layer.center, layer.noise, layer.stale = center, noise, 0
        layer.limit = math.exp(center + rise)
        layer.quarter = 0.25 * layer.limit
        layer.midpoint = center + rise / 2.0

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        tags = self.tags(values)
        if not tags:
            return []
        s = self.settings
        now = self.clock.tick(step, values) if s.seconds else 0.0
        total = self.finite(values, s.global_metric)
        negligible = total * s.min_share if total is not None else 0.0
        outlying: list[tuple[float, str, float, _Layer]] = []  # (ratio, tag, value, layer)
        within = max(s.within, s.steps)
        seen = recent = False  # a layer judged; one outlying in its last `within` points
        for tag in tags:
            value = values[tag]
            if not 0.0 < value < math.inf:
                continue  # NaN, inf: the nonfinite rule's; 0: no log (a frozen layer)
            seen = True
            layer = self.layers.get(tag)
            if layer is None:
                layer = self.layers[tag] = _Layer(s.window)
            log_value = math.log(value)
            if not layer.ready:
                layer.logs.append(log_value)
                layer.ready = len(layer.logs) >= self.ready_at
                continue
            if layer.stale >= _REFRESH or (value > layer.quarter and layer.stale):
                self._refresh(layer)
            layer.judged += 1
            hits = layer.hits
            if hits and hits[0][0] <= layer.judged - within:
                hits.popleft()  # out of the last `within` points
            if value > layer.limit and value >= negligible:
                if not hits:
                    layer.since_ms = now  # a new run of outlying points
                hits.append((layer.judged, now))
                outlying.append((value / math.exp(layer.center), tag, value, layer))
            elif hits:
                recent = True
            # Into the history unless above the geometric midpoint between the median
            # and the limit: a layer that grows must not drag its own median up behind
            # it. One held above it for `window` points has found a new level.
            if log_value <= layer.midpoint:
                layer.rejected = 0
            else:
                layer.rejected += 1
                if layer.rejected <= s.window:
                    continue
            layer.logs.append(log_value)
            layer.stale += 1
        if not seen:
            return []
        if not outlying:
            if not recent:
                self.raised = False  # the episode is over
            return []
        if self.raised:
            return []
        timed = s.seconds and self.clock.known
        lasted = [
            o
            for o in outlying
            if len(o[3].hits) >= s.steps
            and (not timed or (now - o[3].since_ms) / 1000.0 >= s.seconds)
        ]
        if not lasted:
            return []
        self.raised = True
        return [self._finding(max(lasted), outlying, now)]

    def _finding(
        self,
        worst: tuple[float, str, float, _Layer],
        outlying: list[tuple[float, str, float, _Layer]],
        now: float,
    ) -> Finding:
        s = self.settings
        ratio, tag, value, layer = worst
        name = tag[len(s.prefix) :]
        median = math.exp(layer.center)
        z = (math.log(value) - layer.center) / max(layer.noise, 1e-12)
        message = self.message(
            "outlier",
            layer=name,
            value=fmt(value),
            ratio=f"{ratio:.0f}" if ratio >= 10 else f"{ratio:.1f}",
            median=fmt(median),
            count=len(layer.hits),
            within=max(s.within, s.steps),
            z=min(z, 1e6),
        )
        others = [o[1][len(s.prefix) :] for o in sorted(outlying, reverse=True) if o[1] != tag]
        if others:
            shown = ", ".join(others[:3]) + (f" (+{len(others) - 3})" if len(others) > 3 else "")
            message = self.message("others", message=message, others=shown)
        severity = "critical" if ratio >= s.critical_factor else "warning"
        extra = {
            "layer": name,
            "ratio": round(ratio, 3),
            "zscore": round(min(z, 1e6), 2),
            "steps": len(layer.hits),
            "within": max(s.within, s.steps),
            "seconds": round((now - layer.since_ms) / 1000.0, 3),
            "others": others[:10],
        }
        return Finding(self.name, severity, tag, value, message, baseline=median, extra=extra)
