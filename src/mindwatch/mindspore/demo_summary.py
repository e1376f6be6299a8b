"""The end of ``mindwatch demo``: what the run folder holds, said in a few lines.

Built from the run folder alone (``run.json``, the event files' step times and
``alerts.jsonl``), so the same summary follows a single process and an ``msrun`` job.
Lines are wrapped to an 80-column terminal, except the run folder's path, kept whole
so it can be copied.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import numpy as np

from mindwatch.aggregate.reductions import spread_tags
from mindwatch.alerts.model import severity_label
from mindwatch.alerts.reading import read_alerts
from mindwatch.common.i18n import _, ngettext
from mindwatch.common.invocation import command_line
from mindwatch.metrics.smoothing import DEFAULT_WEIGHT, ema
from mindwatch.run.layout import ALERTS_FILE
from mindwatch.run.record import read_run_info

__all__ = [
    "alert_lines",
    "curve_lines",
    "hardware_tags",
    "print_summary",
    "say",
    "step_time_line",
]

WIDTH = 80  # the demo's own lines are wrapped to fit a standard terminal


def say(text: str, indent: str = "", more: str = "  ") -> None:
    """Print ``text`` wrapped at :data:`WIDTH` (continuation lines indented by ``more``)."""
    print(
        textwrap.fill(
            text,
            WIDTH,
            initial_indent=indent,
            subsequent_indent=indent + more if indent else "  ",
            break_long_words=False,
            break_on_hyphens=False,
        ),
        flush=True,
    )


def step_time_line(points: list[tuple[int, float]]) -> Optional[str]:
    """``step time: median ... ms, mean ... ms; step 1 compiled for ... ms (left out)``: the
    first step compiles the graph, so it is kept out of the statistics it would distort."""
    if not points:
        return None
    (first_step, first), rest = points[0], [v for __, v in points[1:] if math.isfinite(v)]
    if not rest:
        return _("step time: {first:.1f} ms (step {step}, compiling)").format(
            first=first, step=first_step
        )
    return _(
        "step time: median {median:.1f} ms, mean {mean:.1f} ms; step {step} compiled for "
        "{first:.1f} ms (left out)"
    ).format(median=float(np.median(rest)), mean=float(np.mean(rest)), step=first_step, first=first)


def _groups(tags: list[str]) -> str:
    groups = Counter(tag.split("/", 1)[0] for tag in tags)
    first = [g for g in ("train", "eval", "perf", "layers", "ranks", "hw") if g in groups]
    order = first + sorted(set(groups) - set(first))
    return ", ".join(f"{g}/ {groups[g]}" for g in order)


def hardware_tags(tags: list[str]) -> list[str]:
    """The hardware curves among ``tags``: ``hw/...`` and their spread across ranks
    (``ranks/<name>_min`` ... ``_argmax`` of a ``hw/<name>``)."""
    names = {tag.split("/", 1)[1] for tag in tags if tag.startswith("hw/")}
    spreads = {spread for name in names for spread in spread_tags(f"hw/{name}")}
    return [tag for tag in tags if tag.startswith("hw/") or tag in spreads]


def curve_lines(tags: list[str], samples: int) -> list[str]:
    """``20 curves: train/ 5, eval/ 1, perf/ 6, layers/ 8`` and the hardware line.

    The hardware curves are counted on a line of their own: whether a run has any
    depends on its length against ``hardware.period_s`` (the first sample comes one
    period after the start), not on the training, so the first line of two runs of the
    same job is the same on a fast machine and on a busy one."""
    hardware = hardware_tags(tags)
    training = [tag for tag in tags if tag not in set(hardware)]
    lines = [_("{count} curves: {groups}").format(count=len(training), groups=_groups(training))]
    if hardware:
        lines.append(
            ngettext(
                "hardware: {count} curves ({groups}), {samples} sample",
                "hardware: {count} curves ({groups}), {samples} samples",
                samples,
            ).format(count=len(hardware), groups=_groups(hardware), samples=samples)
        )
    else:
        lines.append(
            _(
                "hardware: no sample in a run this short (the first comes one "
                "hardware.period_s after the start, 5 s by default)"
            )
        )
    return lines


def alert_lines(alerts: list[dict[str, Any]], shown: int = 3) -> list[str]:
    """``2 alerts (all in alerts.jsonl):`` and the first ``shown``: severity, rule, step,
    rank."""
    if not alerts:
        return [_("alerts: none")]
    if len(alerts) == 1:
        head = _("1 alert (all in {file}):").format(file=ALERTS_FILE)
    else:
        head = _("{count} alerts (all in {file}):").format(count=len(alerts), file=ALERTS_FILE)
    lines = [head]
    for alert in alerts[:shown]:
        where = _("step {step}").format(step=alert.get("step"))
        if alert.get("rank") is not None:
            where += _(", rank {rank}").format(rank=alert["rank"])
        severity = severity_label(str(alert.get("severity", "")))
        line = _("{severity} {rule} at {where}").format(
            severity=severity, rule=alert.get("rule", "?"), where=where
        )
        lines.append(f"  {line}".rstrip())
    if len(alerts) > shown:
        lines.append("  " + _("... and {count} more").format(count=len(alerts) - shown))
    return lines


def print_summary(run_dir: Path, root: Path, elapsed: float, world: int) -> None:
    """The demo's one end summary, from what the run folder holds."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]

    def points(tag: str) -> list[tuple[int, float]]:
        return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in tags else []

    losses = points("train/loss")
    print()
    print(_("Run folder: {path}").format(path=run_dir))  # whole, to copy it
    if losses:
        # as TensorBoard's slider shows it: the raw minimum of a noisy loss is one batch
        smooth = ema([v for _s, v in losses])
        best = int(np.argmin(np.where(np.isfinite(smooth), smooth, np.inf)))  # NaN-proof
        say(
            _(
                "{steps} steps in {seconds:.1f} s; loss {first:.4f} -> {last:.4f}, best "
                "{best:.4f} at step {best_step} (smoothed as TensorBoard does, weight "
                "{weight})"
            ).format(
                steps=len(losses),
                seconds=elapsed,
                first=smooth[0],
                last=smooth[-1],
                best=smooth[best],
                best_step=losses[best][0],
                weight=DEFAULT_WEIGHT,
            ),
            indent="  ",
        )
    step_time = step_time_line(points("perf/step_time_ms"))
    if step_time:
        say(step_time, indent="  ")
    evals = points("eval/loss")
    if evals:
        say("eval/loss: " + ", ".join(f"{v:.4f}@{s}" for s, v in evals), indent="  ")
    for line in alert_lines(read_alerts(run_dir / ALERTS_FILE)):
        say(line, indent="  ")
    nonfinite = read_run_info(run_dir).nonfinite
    if nonfinite:
        say(_("non-finite values: {values}").format(values=nonfinite), indent="  ")
    samples = max((len(points(tag)) for tag in hardware_tags(tags)), default=0)
    for line in curve_lines(sorted(tags), samples):
        say(line, indent="  ")
    if world > 1:
        ranks = [f"rank_{r}/" for r in range(world) if (run_dir / f"rank_{r}").is_dir()]
        say(
            _(
                "values reduced across {world} ranks (their spread: ranks/loss_max, "
                "ranks/loss_argmax, ...); each rank's own in {folders}"
            ).format(world=world, folders=", ".join(ranks)),
            indent="  ",
        )
    print()
    print(_("View it in TensorBoard:"))
    print(f"  {command_line('tensorboard', root)}")
