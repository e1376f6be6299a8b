"""The alert scorecard: every run of the labelled corpus through the rules, offline.

Each run's event files are replayed through the rules with the current defaults (the
same :class:`~mindwatch.tools.watch.Watcher` ``mindwatch watch`` uses; ``stall`` is
checked as a watcher would see the run ``stall.seconds`` after it was last written).
Per rule it prints false alarms on the healthy corpus (warning or critical), the faults
it should catch, how many it caught (at or after the onset step, and naming the right
rank or part where the label says), and the delay in steps (median, max). Each fault
has a window (``within`` steps, or for ``throughput_drop``, whose persistence is in
time, ``within_s`` seconds of training plus ``recent`` steps at the run's pace after the
onset: its median must turn first): a fault caught later is LATE.

    python benchmarks/alerts_corpus.py [--quick]      # the runs (cached)
    python benchmarks/alerts_scorecard.py [--quick] [--build] [--markdown]
    python benchmarks/alerts_scorecard.py --leading [--markdown]   # issue 23's table

``--leading`` scores the leading indicators (``layer_grad_outlier``,
``attention_logit``, ``attention_logit_growth``), each switched on whatever its
default: its warning/critical alerts on every healthy run, and on every faulted run it
should catch the step it fired against the first step a loss rule (``spike``,
``divergence``, ``nonfinite``) fired: the lead.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from alerts_corpus import DEFAULT_OUT, build, specs  # noqa: E402
from mindwatch.alerts import Alert  # noqa: E402
from mindwatch.config import RULE_NAMES, AlertSettings  # noqa: E402
from mindwatch.events.reader import RunReader, Scalar  # noqa: E402
from mindwatch.tools.watch import Watcher  # noqa: E402

BAD = ("warning", "critical")


@dataclass
class Outcome:
    """One run's replay against its label."""

    name: str
    healthy: bool
    rules: list[str]
    onset: int
    alerts: list[Alert]
    caught_by: Optional[str] = None
    delay: Optional[int] = None
    delay_s: Optional[float] = None  # training seconds from the onset to the alert
    late: bool = False  # caught after the fault's window (steps, or seconds)
    early: list[Alert] = field(default_factory=list)  # warning/critical before the onset
    problem: str = ""


def replay(folder: Path, settings: AlertSettings) -> list[Alert]:
    """The alerts the rules raise on ``folder/run`` (stall: seen ``stall.seconds`` after
    the run was last written)."""
    label = json.loads((folder / "label.json").read_text())
    watcher = Watcher(folder / "run", settings, on_notice=lambda text: None)
    alerts = watcher.poll(now=0.0)  # every event; no stall yet
    last = max((run.last_wall or 0.0) for run in watcher._runs.values())
    later = (label.get("killed_at") or last) + settings.stall.seconds + 1.0
    return alerts + watcher.poll(now=later)


def score(folder: Path, settings: AlertSettings) -> Outcome:
    label = json.loads((folder / "label.json").read_text())
    alerts = replay(folder, settings)
    out = Outcome(label["name"], not label["fault"], label["rules"], label["onset"], alerts)
    if out.healthy:
        return out
    onset = label["onset"]
    out.early = [a for a in alerts if a.severity in BAD and a.step < onset and a.rule != "stall"]
    after = [a for a in alerts if a.step >= onset or a.rule == "stall"]
    right = [a for a in after if a.rule in label["rules"]]
    if label.get("rank") is not None:
        right = [a for a in right if a.rank == label["rank"]]
    if label.get("part"):
        right = [a for a in right if a.extra.get("part") == label["part"]]
    if right:
        first = min(right, key=lambda a: a.step)
        out.caught_by, out.delay = first.rule, max(first.step - onset, 0)
        if first.rule == "stall":
            out.delay = None  # time-based: stall.seconds, not steps
        else:
            times = _step_times(folder / "run", onset, first.step)
            out.delay_s = sum(times)
            spec = WINDOWS.get(label["name"])
            within, within_s = (spec.within, spec.within_s) if spec else (10, 0.0)
            if within_s:
                # The drop's median must turn first: half the rule's recent points, at
                # the run's pace after the onset, and as many again for the prefetched
                # batches of a slow input pipeline.
                pace = sorted(times)[len(times) // 2] if times else 0.0
                within_s += settings.throughput_drop.recent * pace
            out.late = out.delay_s > within_s if within_s else out.delay > within
    else:
        seen = sorted({(a.rule, a.step, a.extra.get("part"), a.rank) for a in after})[:4]
        out.problem = f"not caught (after the onset: {seen})"
    return out


WINDOWS = {spec.name: spec for spec in specs()}


def _step_times(run: Path, onset: int, step: int) -> list[float]:
    """The run's ``perf/step_time_ms`` from step ``onset`` to ``step``, in seconds."""
    return [
        item.value / 1000.0
        for item in RunReader(run).read()
        if isinstance(item, Scalar) and item.tag == "perf/step_time_ms"
        if onset <= item.step <= step and item.value == item.value
    ]


def table(outcomes: list[Outcome]) -> list[list[str]]:
    healthy = [o for o in outcomes if o.healthy]
    rows = []
    for rule in RULE_NAMES:
        false = [a for o in healthy for a in o.alerts if a.rule == rule and a.severity in BAD]
        infos = [a for o in healthy for a in o.alerts if a.rule == rule and a.severity == "info"]
        # A fault counts under the first rule its label names (others may catch it too).
        faults = [o for o in outcomes if not o.healthy and o.rules[0] == rule]
        caught = [o for o in faults if o.caught_by is not None]
        delays = [o.delay for o in caught if o.delay is not None]
        rows.append(
            [
                rule,
                f"{len(false)}" + (f" (+{len(infos)} info)" if infos else ""),
                f"{len(caught)}/{len(faults)}" if faults else "-",
                f"{statistics.median(delays):g}" if delays else "-",
                f"{max(delays)}" if delays else "-",
            ]
        )
    return rows


HEADER = ["rule", "false alarms (healthy)", "faults caught", "delay median", "delay max"]


def render(outcomes: list[Outcome], markdown: bool = False) -> str:
    rows = table(outcomes)
    healthy = sum(o.healthy for o in outcomes)
    lines = [f"{healthy} healthy runs, {len(outcomes) - healthy} faulted runs", ""]
    if markdown:
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("|" + "|".join("---" for _ in HEADER) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(len(HEADER))]
        for row in [HEADER, *rows]:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
    lines.append("")
    for o in outcomes:
        if o.healthy:
            bad = [a for a in o.alerts if a.severity in BAD]
            if bad:
                lines.append(f"FALSE ALARM {o.name}: " + "; ".join(a.line() for a in bad[:3]))
        else:
            where = "" if o.delay is None else f" after {o.delay} steps ({o.delay_s:.2f} s)"
            where += " LATE" if o.late else ""
            status = f"caught by {o.caught_by}{where}" if o.caught_by else o.problem
            lines.append(f"{o.name} (onset {o.onset}, expects {'/'.join(o.rules)}): {status}")
            for a in o.early:
                lines.append(f"  EARLY {a.line()}")
    return "\n".join(lines)


def run_scorecard(
    out: Path, quick: bool = False, settings: Optional[AlertSettings] = None
) -> list[Outcome]:
    settings = settings or AlertSettings()
    names = {s.name for s in specs(quick)}
    folders = sorted(p.parent for p in out.glob("*/label.json") if p.parent.name in names)
    return [score(folder, settings) for folder in folders]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--quick", action="store_true", help="the reduced corpus")
    parser.add_argument("--build", action="store_true", help="run the missing runs first")
    parser.add_argument("--markdown", action="store_true", help="the table in Markdown")
    parser.add_argument("--config", default="{}", help="alerts settings as JSON, to try")
    parser.add_argument("--leading", action="store_true", help="the leading indicators' table")
    args = parser.parse_args()
    if args.build:
        build(specs(args.quick), args.out, echo=True)
    config = json.loads(args.config)
    settings = leading_settings(config) if args.leading else AlertSettings(**config)
    outcomes = run_scorecard(args.out, args.quick, settings)
    if not outcomes:
        raise SystemExit(f"no runs in {args.out}: run benchmarks/alerts_corpus.py first")
    print(
        render_leading(outcomes, args.markdown) if args.leading else render(outcomes, args.markdown)
    )


LEADING = ("layer_grad_outlier", "attention_logit", "attention_logit_growth")
LOSS_RULES = ("spike", "divergence", "nonfinite")


def leading_settings(config: Optional[dict[str, Any]] = None) -> AlertSettings:
    """The defaults (or ``config``) with every leading rule switched on."""
    merged: dict[str, Any] = dict(config or {})
    for rule in LEADING:
        merged[rule] = {**merged.get(rule, {}), "enabled": True}
    return AlertSettings(**merged)


def _first(alerts: list[Alert], rules: tuple[str, ...], onset: int) -> Optional[Alert]:
    hits = [a for a in alerts if a.rule in rules and a.step >= onset and a.severity in BAD]
    return min(hits, key=lambda a: a.step) if hits else None


def leading_table(outcomes: list[Outcome]) -> tuple[list[list[str]], list[list[str]]]:
    """Per leading rule (false alarms, faults caught, lead over the loss rules), and per
    faulted run it should catch (the steps)."""
    healthy = [o for o in outcomes if o.healthy]
    planted = [o for o in outcomes if not o.healthy and set(o.rules) & set(LEADING)]
    per_rule = []
    for rule in LEADING:
        false = [a for o in healthy for a in o.alerts if a.rule == rule and a.severity in BAD]
        runs = sorted({o.name for o in healthy for a in o.alerts if a.rule == rule and a in false})
        mine = [o for o in planted if rule in o.rules]
        leads: list[str] = []
        caught = 0
        for o in mine:
            found = _first(o.alerts, (rule,), o.onset)
            loss = _first(o.alerts, LOSS_RULES, o.onset)
            if found is None:
                continue
            caught += 1
            short = o.name.removeprefix("fault-")
            leads.append(f"{short}: {loss.step - found.step if loss else 'loss silent'}")
        per_rule.append(
            [
                rule,
                f"{len(false)} on {len(runs)}/{len(healthy)} runs"
                if false
                else f"0/{len(healthy)}",
                f"{caught}/{len(mine)}" if mine else "-",
                "; ".join(leads) or "-",
            ]
        )
    per_run = []
    for o in planted:
        cells = [o.name, str(o.onset)]
        for rule in (*LEADING, "grad_explosion"):
            found = _first(o.alerts, (rule,), o.onset)
            cells.append(str(found.step) if found else "-")
        loss = _first(o.alerts, LOSS_RULES, o.onset)
        cells.append(f"{loss.rule} {loss.step}" if loss else "none")
        layer = _first(o.alerts, ("layer_grad_outlier",), o.onset)
        cells.append(f"`{layer.extra.get('layer')}`" if layer else "-")
        per_run.append(cells)
    return per_rule, per_run


LEADING_HEADER = ["rule", "warning/critical on healthy runs", "faults caught", "lead (steps)"]
RUN_HEADER = ["run", "onset", *LEADING, "grad_explosion", "first loss rule", "layer named"]


def _grid(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        return lines + ["| " + " | ".join(row) + " |" for row in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in [header, *rows]]


def render_leading(outcomes: list[Outcome], markdown: bool = False) -> str:
    per_rule, per_run = leading_table(outcomes)
    healthy = sum(o.healthy for o in outcomes)
    lines = [f"{healthy} healthy runs, {len(outcomes) - healthy} faulted runs", ""]
    lines += [*_grid(LEADING_HEADER, per_rule, markdown), ""]
    lines += [*_grid(RUN_HEADER, per_run, markdown), ""]
    for o in outcomes:
        bad = [a for a in o.alerts if a.rule in LEADING and a.severity in BAD]
        if o.healthy and bad:
            lines.append(f"FALSE ALARM {o.name}: " + "; ".join(a.line() for a in bad[:3]))
        elif not o.healthy and bad and not set(o.rules) & set(LEADING):
            lines.append(f"also on {o.name} (onset {o.onset}): {bad[0].line()}")
    return "\n".join(lines)


TIMING_RULES = ("throughput_drop", "straggler", "stall")


def timing_only(outcome: Outcome) -> bool:
    """Whether all that is wrong with ``outcome`` hangs on wall-clock time: a healthy
    run's false alarms all by timing rules, or a fault of a timing rule missed or late
    with no early alarm of another rule. Another process on a shared machine can slow
    a healthy run for seconds (seen on CI: compute 6.66 -> 27 ms a step for 66 steps),
    which ``throughput_drop`` rightly reports, and can slow a run's baseline as much as
    its planted fault; numbers (losses, norms) do not depend on the machine."""
    if outcome.healthy:
        bad = [a for a in outcome.alerts if a.severity in BAD]
        return bool(bad) and all(a.rule in TIMING_RULES for a in bad)
    wrong = outcome.caught_by is None or outcome.late
    early = [a for a in outcome.early if a.rule not in TIMING_RULES]
    return wrong and not early and outcome.rules[0] in TIMING_RULES


def rescore_timing(
    out: Path, outcomes: list[Outcome], settings: AlertSettings, attempts: int = 2
) -> tuple[list[Outcome], list[str]]:
    """``outcomes`` with every :func:`timing_only` failure trained again (a fresh run in
    place of the old) and scored again, up to ``attempts`` times; and a line per retry.
    A rule that is wrong every time still fails: a retry is a new run, not a new
    reading of the same one."""
    chosen = {s.name: s for s in specs()}
    lines: list[str] = []
    for attempt in range(1, attempts + 1):
        again = [o for o in outcomes if timing_only(o)]
        if not again:
            break
        for o in again:
            lines.append(f"retry {attempt} of {o.name}: {render([o]).splitlines()[-1]}")
            shutil.rmtree(out / o.name)
        build([chosen[o.name] for o in again], out, jobs=1)
        fresh = {o.name: score(out / o.name, settings) for o in again}
        outcomes = [fresh.get(o.name, o) for o in outcomes]
    return outcomes, lines


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """What the CI test asserts on."""
    return {
        "false_alarms": [
            (o.name, a.rule, a.step)
            for o in outcomes
            if o.healthy
            for a in o.alerts
            if a.severity in BAD
        ],
        "missed": [o.name for o in outcomes if not o.healthy and o.caught_by is None],
        "late": [(o.name, o.delay, o.delay_s) for o in outcomes if o.late],
        "early": [(o.name, a.rule, a.step) for o in outcomes for a in o.early],
    }


if __name__ == "__main__":
    main()
