"""TensorBoard's first screen: the CUSTOM SCALARS layout a run writes once.

TensorBoard's own tabs sort tag groups by name (``eval``, ``layers``, ``perf``,
``ranks``, ``train``), so the training loss sits at the bottom. A run therefore also
writes a custom-scalars layout (TensorBoard's stock ``custom_scalars`` plugin) whose
first category answers "is training healthy?": the training loss, the evaluation
metrics, the learning rate, the gradient norm and the throughput, in that order; then
the spread across ranks as bands (mean, min to max), which rank is slow (the
``straggler`` rule's input waits and compute micro-benchmark, slowest and fastest rank)
and the step timings.
``mindwatch tensorboard`` opens that dashboard. Last comes "Hardware": the sampler's
curves (``hw/...``: process CPU, host and device memory, memory growth, disk and
network; NPU AICore, HBM, temperature, power and health where npu-smi exists), laid
out from the config since the first sample arrives a period after the first step.

The layout is built from the tags of the first step the run writes, so it shows only
curves the run has (evaluation metrics come later and are matched by ``^eval/``).

Tags that are not curves stay scalars, since the rules (live and in ``mindwatch
watch``), ``report`` and TensorBoard's reader all read them so, but are left off the
first screen: ``ranks/<name>_argmax`` (the rank with the largest value: a rank number,
which a smoothed line between ranks only obscures; the rules name it in their alerts,
``report`` the rank most often highest) and ``train/epoch`` (a staircase). They remain
in TensorBoard's SCALARS and TIME SERIES tabs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mindwatch.metrics.tags import TAGS

__all__ = ["HARDWARE_CATEGORY", "HEALTH_CATEGORY", "STRAGGLER_CATEGORY", "first_screen_layout"]

HEALTH_CATEGORY = "Is training healthy?"
_RANKS_CATEGORY = "Across ranks (mean, band from min to max)"
_TIMING_CATEGORY = "Step time"

# (chart title, tags or tag prefixes, always): a chart is kept when one of its tags was
# logged, or always (evaluation metrics arrive after the first step).
_HEALTH: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    (TAGS["loss"], (TAGS["loss"],), False),
    ("eval", ("eval/",), True),
    (TAGS["lr"], (TAGS["lr"],), False),
    (TAGS["grad_norm"], (TAGS["grad_norm"],), False),
    (TAGS["samples_per_s"], (TAGS["samples_per_s"],), False),
    (TAGS["tokens_per_s"], (TAGS["tokens_per_s"],), False),
    (TAGS["perplexity"], (TAGS["perplexity"],), False),
)
_TIMING = tuple(
    TAGS[key] for key in ("step_time_ms", "compute_ms", "data_wait_ms", "tflops_per_device", "mfu")
)
_SPREAD = ("_mean", "_min", "_max")
STRAGGLER_CATEGORY = "Which rank is slow"
# The straggler rule's inputs (mindwatch.rules.straggler): written every interval, so
# laid out whenever the run is reduced across ranks, from regexes.
_STRAGGLER_CHARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "input wait ms: slowest and fastest rank, and the step",
        (r"^ranks/input_wait_ms_(min|max)$", r"^straggler/step_ms$"),
    ),
    ("compute micro-benchmark ms: slowest and fastest rank", (r"^ranks/bench_ms_(min|max)$",)),
)
HARDWARE_CATEGORY = "Hardware"
# (chart title, regexes): the sampler's first values arrive a period after the first
# step, so these charts are laid out from the config, not from the first step's tags.
# On the global run of a reduced job the ranks/ lines give the spread across ranks.
_HOST_CHARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("process CPU % (100 = one core)", (r"^hw/cpu_percent$", r"^ranks/cpu_percent_(min|max)$")),
    ("memory MB", (r"^hw/(rss_mb|host_mem_available_mb|device_mem_[a-z]+_mb)$",)),
    ("memory growth MB/min, per rank", (r"^hw/rss_growth_mb_per_min$",)),
    ("disk and network MB/s", (r"^hw/(disk|net)_[a-z]+_mb_s$",)),
)
_NPU_CHARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("NPU AICore %", (r"^hw/npu_aicore_pct$", r"^ranks/npu_aicore_pct_(min|max)$")),
    ("NPU HBM used %", (r"^hw/npu_hbm_used_pct$",)),
    ("NPU temperature (C)", (r"^hw/npu_temp_c$",)),
    ("NPU power (W)", (r"^hw/npu_power_w$",)),
    ("NPU health (0 = OK)", (r"^hw/npu_health$",)),
)


def _exact(tag: str) -> str:
    """A regex matching ``tag`` only (custom scalars match a chart's regexes to tags)."""
    import re

    return "^" + re.escape(tag) + ("" if tag.endswith("/") else "$")


def first_screen_layout(tags: Iterable[str], *, host: bool = False, npu: bool = False) -> Any:
    """The ``custom_scalar.layout_pb2.Layout`` for a run whose first step logged ``tags``;
    ``host`` / ``npu``: the sampler reads the host counters / npu-smi (a "Hardware"
    category, after the others)."""
    from tensorboard.plugins.custom_scalar import layout_pb2

    logged = set(tags)
    layout = layout_pb2.Layout()
    health = layout.category.add(title=HEALTH_CATEGORY)
    for title, patterns, always in _HEALTH:
        if always or logged.intersection(patterns):
            chart = health.chart.add(title=title)
            chart.multiline.tag.extend(_exact(p) for p in patterns)
    spread = sorted(
        (
            tag[len("ranks/") : -len("_mean")]
            for tag in logged
            if tag.startswith("ranks/")
            and tag.endswith("_mean")
            and all(tag[: -len("_mean")] + end in logged for end in _SPREAD)
        ),
        key=lambda name: (name != "loss", name),  # the loss first
    )
    if spread:
        ranks = layout.category.add(title=_RANKS_CATEGORY)
        for name in spread:
            chart = ranks.chart.add(title=f"{name} across ranks")
            chart.margin.series.add(
                value=f"ranks/{name}_mean", lower=f"ranks/{name}_min", upper=f"ranks/{name}_max"
            )
    if spread:  # a job reduced across ranks
        category = layout.category.add(title=STRAGGLER_CATEGORY)
        for title, patterns in _STRAGGLER_CHARTS:
            category.chart.add(title=title).multiline.tag.extend(patterns)
    timing = [tag for tag in _TIMING if tag in logged]
    if timing:
        category = layout.category.add(title=_TIMING_CATEGORY)
        for tag in timing:
            category.chart.add(title=tag).multiline.tag.append(_exact(tag))
    charts = (_HOST_CHARTS if host else ()) + (_NPU_CHARTS if npu else ())
    if charts:
        category = layout.category.add(title=HARDWARE_CATEGORY)
        for title, patterns in charts:
            category.chart.add(title=title).multiline.tag.extend(patterns)
    return layout
