"""The ``mindwatch`` command."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Optional

import click

from mindwatch._version import __version__
from mindwatch.common.invocation import command_line
from mindwatch.common.redact import redact_text
from mindwatch.tools import runs as runtools

__all__ = ["main"]


# Commands whose exit status 1 means "findings" (alerts, regressions, problems, runs to
# prune): a crash must never look like one.
CHECKING_COMMANDS = frozenset(
    {
        "watch",
        "report",
        "compare",
        "export",
        "doctor",
        "convert",
        "runs",
        "tensorboard",
        "board",
        "explain",
    }
)
DEBUG_VARIABLE = "MINDWATCH_DEBUG"


class _Commands(click.Group):
    """The ``mindwatch`` group, with a last line of defence for the checking commands:
    an exception nothing else handled (a bug in mindwatch, an input no check foresaw)
    is one line naming the command and the error, and exit status 2 (bad input or
    error), never Python's exit status 1, which these commands define as "findings".
    ``MINDWATCH_DEBUG=1`` adds the traceback. Click's own usage errors and the
    commands' ``ctx.exit`` codes pass through unchanged."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as exc:
            command = ctx.invoked_subcommand
            if command not in CHECKING_COMMANDS:
                raise
            if os.environ.get(DEBUG_VARIABLE, "").strip() not in ("", "0"):
                traceback.print_exc()
                hint = ""
            else:
                hint = f" ({DEBUG_VARIABLE}=1 shows the traceback)"
            # redacted: an exception's text may quote a URL with its token
            text = redact_text(" ".join(str(exc).split()))[:300]
            raise InputError(
                f"mindwatch {command} failed: {type(exc).__name__}"
                + (f": {text}" if text else "")
                + hint
            ) from exc


class _Seconds(click.FloatRange):
    """A number of seconds within a range, and finite: ``nan`` slips through a plain
    ``FloatRange`` (every comparison with it is false) and ``time.sleep`` raises on it."""

    name = "seconds"

    def convert(
        self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]
    ) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return seconds


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mindwatch")
def main() -> None:
    """mindwatch: an online training monitor for MindSpore and MindSpore Transformers."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")


@main.command()
@click.option(
    "--logdir",
    default="./runs",
    show_default=True,
    help="Root folder; the run is written to <logdir>/<YYYYmmdd-HHMMSS>_demo.",
)
@click.option("--steps", default=300, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--mode",
    type=click.Choice(["graph", "pynative"]),
    default="graph",
    show_default=True,
    help="MindSpore execution mode.",
)
@click.option(
    "--sink/--no-sink", default=False, show_default=True, help="dataset_sink_mode of Model.train."
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Train data-parallel with this many CPU worker processes under msrun.",
)
@click.option("--run-dir", hidden=True, help="The run folder (set by --workers for the ranks).")
def demo(
    *,
    logdir: str,
    steps: int,
    seed: int,
    mode: str,
    sink: bool,
    workers: int,
    run_dir: Optional[str],
) -> None:
    """Train a small MindSpore model on CPU with full monitoring.

    Synthetic data is made in memory; the run folder gets TensorBoard event files and
    run.json, and the command to view them is printed at the end. With --workers 2 the
    job runs under msrun: one global run with values reduced across the ranks, plus a
    rank_<r>/ folder per rank.
    """
    try:
        from mindwatch.mindspore.demo import in_msrun, launch_workers, run_demo
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise click.ClickException(_no_mindspore(exc)) from exc
    if workers > 1 and not in_msrun():
        try:
            launch_workers(
                workers=workers, logdir=logdir, steps=steps, seed=seed, mode=mode, sink=sink
            )
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from exc
        return
    run_demo(
        logdir=logdir,
        steps=steps,
        seed=seed,
        mode=mode,
        sink=sink,
        workers=workers,
        run_dir=run_dir,
    )


class InputError(click.ClickException):
    """Bad input: exit status 2, as diff and grep use it."""

    exit_code = 2


def _read_scalars(logdir: Path, runs: tuple[str, ...], tags: tuple[str, ...]) -> Any:
    """read_scalars with a progress bar on a terminal (quiet in pipes and logs)."""
    from rich.console import Console
    from rich.progress import Progress

    from mindwatch.tools.tables import read_scalars

    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("reading event files", total=None)

        def advance(done: int, total: int, run: str) -> None:
            bar.update(task, completed=done, total=total, description=f"reading {run}")

        return read_scalars(logdir, runs=runs or None, tags=tags or None, progress=advance)


def _logdir(path: Path) -> Path:
    if not path.is_dir():
        raise click.BadParameter(
            f"'{path}' is not a folder; pass a run folder or the folder of runs "
            "(the --logdir you give TensorBoard)",
            param_hint="LOGDIR",
        )
    return path


@main.command("export")
@click.argument("logdir", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "parquet", "jsonl"]),
    default="csv",
    show_default=True,
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Output file (default: ./<LOGDIR name>.scalars.<format>).",
)
@click.option("--run", "runs", multiple=True, help="Only this run (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only this tag (repeatable).")
def export_command(
    *, logdir: Path, fmt: str, out: Optional[Path], runs: tuple[str, ...], tags: tuple[str, ...]
) -> None:
    """Write every scalar below LOGDIR to one file: columns run, tag, step, wall_time, value.

    Every point, none sampled; points a resume voided are left out, as in TensorBoard.
    Exit status: 0 written, 2 bad input (no such folder, nothing to export).
    """
    from mindwatch.tools.export import export_scalars

    frame = _read_scalars(_logdir(logdir), runs, tags)
    if frame.empty:
        raise InputError(
            f"no scalars found below '{logdir}'"
            + (" for the given --run/--tag" if runs or tags else "")
            + "; check the folder (TensorBoard event files are named *tfevents*)"
        )
    target = out or Path(f"{logdir.resolve().name or 'logdir'}.scalars.{fmt}")
    try:
        export_scalars(frame, target, fmt)  # type: ignore[arg-type]
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot write '{target}': {exc}") from exc
    from mindwatch.common.i18n import _, ngettext

    runs_n, tags_n = frame["run"].nunique(), frame["tag"].nunique()
    click.echo(
        _("wrote {points:,} points ({runs}, {tags}) to {target}").format(
            points=len(frame),
            runs=ngettext("{count} run", "{count} runs", runs_n).format(count=runs_n),
            tags=ngettext("{count} tag", "{count} tags", tags_n).format(count=tags_n),
            target=target,
        )
    )


def _formats(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    from mindwatch.tools.report import FORMATS

    chosen = tuple(part.strip().lower() for part in value.split(",") if part.strip())
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise click.BadParameter(
            f"{', '.join(unknown) or 'nothing'} is not a report format; "
            f"use a comma-separated list of {', '.join(FORMATS)}",
            ctx,
            param,
        )
    return chosen


@main.command("report")
@click.argument("logdir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("mindwatch-report"),
    show_default=True,
    help="Folder for report.html, report.pdf, report.json, report.md.",
)
@click.option(
    "--format",
    "formats",
    default="html,pdf,json,md",
    show_default=True,
    callback=_formats,
    help="Comma-separated: html, pdf, json, md.",
)
@click.option(
    "--lang",
    "language",
    type=click.Choice(["zh", "en"]),
    default=None,
    help="Language of the report's text (the JSON stays English). "
    "[default: the locale's, as for alerts: zh when LANGUAGE/LC_ALL/LANG start with zh]",
)
@click.option(
    "--static",
    is_flag=True,
    help="HTML without scripts (SVG charts), for viewers that block them.",
)
def report_command(
    *, logdir: Path, out: Path, formats: tuple[str, ...], language: Optional[str], static: bool
) -> None:
    """Write a training report of the runs below LOGDIR (several runs are overlaid).

    HTML is one self-contained file that loads nothing from the network: interactive
    charts (hover values, zoom, series toggles; plotly.js inlined), or with --static
    SVG charts and no scripts. PDF has the charts for printing; JSON is the
    machine-readable summary; Markdown suits a CI comment.
    Exit status: 0 written, 2 bad input.
    """
    from mindwatch.common.i18n import set_language
    from mindwatch.tools.report import summarize, write_report

    if language is not None:
        set_language(language)

    frame = _read_scalars(_logdir(logdir), (), ())
    if frame.empty:
        raise InputError(
            f"no scalars found below '{logdir}'; check the folder "
            "(TensorBoard event files are named *tfevents*)"
        )
    from mindwatch.common.i18n import _

    runs = summarize(frame, logdir)
    for run in runs:
        doctor = command_line("doctor", run.folder)
        if run.facts.get("mixed_runs"):
            click.echo(
                _(
                    "warning: {run}: {mixed}; its numbers mix them (`{command}` shows how to "
                    "split the folder)"
                ).format(run=run.name, mixed=run.facts["mixed_runs"], command=doctor),
                err=True,
            )
        if run.facts.get("missing_steps"):
            click.echo(
                _(
                    "warning: {run}: {missing}; the report shows what they hold (`{command}` "
                    "says why)"
                ).format(run=run.name, missing=run.facts["missing_steps"], command=doctor),
                err=True,
            )
    try:
        written = write_report(runs, logdir, out, formats, static=static)
    except OSError as exc:
        raise InputError(f"cannot write the report to '{out}': {exc}") from exc
    for fmt, path in written.items():
        click.echo(f"{fmt:>4}: {path}")


_LISTED = 20  # alerts listed before the one explained; more are counted


@main.command("explain")
@click.argument("run", type=click.Path(path_type=Path))
@click.option(
    "--alert",
    "number",
    type=click.IntRange(min=1),
    metavar="N",
    help="Explain alert N (numbered from 1 in alerts.jsonl's order, as the list shows).",
)
@click.option("--step", type=int, metavar="S", help="Explain the alert at step S.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the alert and its whole analysis as JSON."
)
@click.option(
    "--lang",
    "language",
    type=click.Choice(["zh", "en"]),
    default=None,
    help="Language of the text [default: the locale's, as for alerts].",
)
def explain_command(
    *,
    run: Path,
    number: Optional[int],
    step: Optional[int],
    as_json: bool,
    language: Optional[str],
) -> None:
    """Tell the story of an alert of RUN: what moved first, on which layer and rank.

    From the forensics written with the alert: the alert, the layer that departed
    first and how many steps before the loss, the rest ranked, the first non-finite
    gradient in backward order, the batch's sample ids and the lines that make a
    resumed run skip it; in 80 columns (fewer on a narrower terminal). Without
    --alert or --step the run's alerts are listed and the first warning or critical
    one with forensics is explained. Exit status: 0 explained (or no alerts), 2 bad
    input (see docs/forensics.md).
    """
    import shutil

    from mindwatch.common.i18n import _, ngettext, set_language
    from mindwatch.tools import explain

    if language is not None:
        set_language(language)
    if number is not None and step is not None:
        raise click.UsageError(_("give --alert or --step, not both"))
    try:
        found = explain.read_incidents(run)
        chosen = explain.choose(found, run, number=number, step=step)
    except explain.ExplainError as exc:
        raise InputError(str(exc)) from exc
    if chosen is None:
        click.echo(_("'{run}' has no alerts.").format(run=run))
        return
    if as_json:
        click.echo(explain.dumps(chosen.read()))
        return
    width = max(40, min(explain.WIDTH, shutil.get_terminal_size((explain.WIDTH, 24)).columns))
    lines = []
    if number is None and step is None and len(found) > 1:
        head = ngettext(
            "{count} alert in {run}; --alert N explains another:",
            "{count} alerts in {run}; --alert N explains another:",
            len(found),
        )
        lines += explain.wrap(head.format(count=len(found), run=run), width)
        shown = found[:_LISTED]
        if chosen not in shown:
            shown.append(chosen)
        brief = [(i.number, explain.what(i.alert), i.analysed, i is chosen) for i in shown]
        lines += explain.listing(brief, width)
        if len(found) > len(shown):
            more = len(found) - len(shown)
            lines.append("      " + _("... and {count} more").format(count=more))
        lines.append("")
    lines += explain.render(explain.story(chosen), width, of=len(found))
    click.echo("\n".join(lines))


@main.command("watch")
@click.argument("logdir", type=click.Path(path_type=Path))
@click.option("--once", is_flag=True, help="Check once and exit (for cron); the default follows.")
@click.option(
    "--interval",
    type=_Seconds(min=0.1, max=86400),
    default=10.0,
    show_default=True,
    help="Seconds between checks when following (at most a day).",
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="State file (offsets, rule state) [default: one per LOGDIR under "
    "$XDG_STATE_HOME/mindwatch/watch/, i.e. ~/.local/state/...].",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A mindwatch config YAML whose 'alerts' section sets the rules.",
)
@click.option(
    "--stall-secs",
    type=_Seconds(min=1, max=604800),
    help="Seconds without a new step (at most a week).",
)
@click.option("--json", "as_json", is_flag=True, help="Print each alert as a JSON line.")
@click.option(
    "--prometheus",
    "prometheus_address",
    metavar="HOST:PORT",
    help="Also serve every run's metrics to Prometheus at http://HOST:PORT/metrics "
    "(docs/prometheus.md); use a loopback HOST unless the network is trusted.",
)
@click.pass_context
def watch_command(
    ctx: click.Context,
    /,
    *,
    logdir: Path,
    once: bool,
    interval: float,
    state_path: Optional[Path],
    config_path: Optional[Path],
    stall_secs: Optional[float],
    as_json: bool,
    prometheus_address: Optional[str],
) -> None:
    """Apply the anomaly rules to every run below LOGDIR from a separate process.

    Runs that appear later, new files and rotated ones are picked up; --once keeps its
    state in a small file so repeated calls never report the same event twice.
    --prometheus serves the runs' metrics while following (Ctrl-C stops both).
    Exit status: 0 no new alerts, 1 new alerts, 2 error.
    """
    from mindwatch.config import AlertSettings, ConfigError, MonitorConfig
    from mindwatch.tools.watch import Watcher, default_state_path, watch

    root = _logdir(logdir)
    exporter = _watch_exporter(root, prometheus_address, once=once)
    try:
        settings = MonitorConfig.from_any(config_path).alerts if config_path else AlertSettings()
    except (ConfigError, OSError) as exc:
        raise InputError(str(exc)) from exc
    if stall_secs is not None:  # validated, not copied in: the config's bounds hold here too
        stall = settings.stall.model_validate(
            {**settings.stall.model_dump(), "seconds": stall_secs}
        )
        settings = settings.model_copy(update={"stall": stall})
    try:
        watcher = Watcher(
            root,
            settings,
            state_path=state_path or default_state_path(root),
            on_notice=lambda text: click.echo(text, err=True),
            on_info=lambda text: click.echo(text, err=True),
            observer=exporter,
        )
    except ValueError as exc:
        if exporter is not None:
            exporter.close()
        raise InputError(str(exc)) from exc

    def report(alert: Any) -> None:
        click.echo(alert.to_json() if as_json else f"{alert.run}: {alert.line()}")

    try:
        total = watch(watcher, report, once=once, interval=interval)
    except OSError as exc:
        raise InputError(f"cannot save the watch state: {exc}") from exc
    finally:
        if exporter is not None:
            exporter.close()
    ctx.exit(1 if total else 0)


def _watch_exporter(root: Path, address: Optional[str], *, once: bool) -> Any:
    """``watch --prometheus``'s exporter, serving already; None without the option."""
    if address is None:
        return None
    from mindwatch.common.i18n import _
    from mindwatch.tools.watch import WatchExporter, parse_address

    if once:
        raise click.UsageError(
            _("--prometheus serves while watch follows the runs; drop --once"),
        )
    try:
        host, port = parse_address(address)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--prometheus") from exc
    exporter = WatchExporter(root)
    try:
        exporter.serve(host, port)
    except OSError as exc:
        raise InputError(
            _(
                "--prometheus {address}: cannot serve there ({error}); pick a free port, "
                "e.g. --prometheus {host}:{other}"
            ).format(address=address, error=exc.strerror or exc, host=host, other=port + 1)
        ) from exc
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        _("mindwatch watch: serving Prometheus metrics at http://{host}:{port}/metrics").format(
            host=shown, port=port
        ),
        err=True,
    )
    return exporter


@main.command("convert")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.argument("dst", type=click.Path(path_type=Path, file_okay=False))
@click.option("--steps-per-epoch", type=click.IntRange(min=1), help="For LossMonitor lines.")
@click.option(
    "--raw-tags", is_flag=True, help="Keep MindSpore's summary tags as written (loss/auto)."
)
@click.option("--follow", is_flag=True, help="Keep converting files that are still written.")
@click.option("--interval", type=_Seconds(min=0.1, max=86400), default=2.0, show_default=True)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace the event files of an earlier conversion into DST (else: an error).",
)
def convert_command(
    *,
    sources: tuple[Path, ...],
    dst: Path,
    steps_per_epoch: Optional[int],
    raw_tags: bool,
    follow: bool,
    interval: float,
    overwrite: bool,
) -> None:
    """Convert MindSpore summaries or training logs (SOURCES) into TensorBoard runs below DST.

    MindSpore summary files (*_MS, from SummaryCollector / SummaryRecord): every folder
    holding them becomes a run (scalars, histograms, images, tensors, the graph, lineage
    as hparams). Otherwise training logs: MindFormers' MFLossMonitor lines and
    MindSpore's LossMonitor / TimeMonitor lines (a log file, or a folder of msrun
    worker_<i>.log files), one run per worker (DST/rank_<i>) and, for several workers,
    DST itself reduced across them. Exit status: 0 converted, 2 bad input.
    """
    from mindwatch.tools.convert import ConversionError, convert, plan_conversion

    try:
        plan = plan_conversion(sources)
        for note in plan.notes:
            click.echo(note, err=True)
        summary = convert(
            plan,
            dst,
            steps_per_epoch=steps_per_epoch,
            raw_tags=raw_tags,
            follow=follow,
            interval=interval,
            overwrite=overwrite,
        )
    except ConversionError as exc:
        raise InputError(str(exc)) from exc
    click.echo(summary)


@main.command("doctor")
@click.argument("logdir", required=False, type=click.Path(path_type=Path))
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also check this mindwatch / MindFormers config file.",
)
@click.option(
    "--lang",
    "language",
    type=click.Choice(["zh", "en"]),
    default=None,
    help="Language of the checklist [default: the locale's, as for alerts: zh when "
    "LANGUAGE/LC_ALL/LANG start with zh].",
)
@click.pass_context
def doctor_command(
    ctx: click.Context,
    /,
    *,
    logdir: Optional[Path],
    config_path: Optional[Path],
    language: Optional[str],
) -> None:
    """Check why TensorBoard shows nothing (or too little) for LOGDIR.

    A checklist with a verdict and a fix per line: event files where TensorBoard looks,
    MindSpore summary files, unclosed or stale runs, records that collect_freq skipped,
    mode and sink-mode consequences, the tensorboard install, permissions, disk space,
    network file systems, non-ASCII paths, and a config file. Exit status: 0 healthy,
    1 problems found, 2 error.
    """
    from rich.cells import cell_len

    from mindwatch.common.i18n import _, ngettext, set_language
    from mindwatch.tools.doctor import VERDICTS, diagnose

    if language is not None:
        set_language(language)
    if logdir is None and config_path is None:
        logdir = Path(".")
    try:
        findings = diagnose(logdir, config_path)
    except OSError as exc:
        raise InputError(_("cannot check: {error}").format(error=exc)) from exc
    marks = {verdict: _(mark) for verdict, mark in VERDICTS.items()}
    width = max(cell_len(mark) for mark in marks.values())  # a Chinese mark is 2 cells a sign
    line, fix = _("{check}: {message}"), _("fix: {fix}")
    for finding in findings:
        mark = marks[finding.verdict]
        said = line.format(check=finding.check, message=finding.message)
        click.echo(f"[{' ' * (width - cell_len(mark))}{mark}] {said}")
        if finding.fix and finding.verdict != "ok":
            click.echo(" " * (width + 3) + fix.format(fix=finding.fix))
    bad = [f for f in findings if f.verdict in ("warning", "problem")]
    if bad:
        found = ngettext("{count} problem found", "{count} problems found", len(bad))
        click.echo(found.format(count=len(bad)))
    else:
        click.echo(_("healthy"))
    ctx.exit(1 if bad else 0)


@main.command("compare")
@click.argument("run", type=click.Path(path_type=Path))
@click.option(
    "--baseline",
    "baselines",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A baseline run folder, a folder of baseline runs, or a saved baseline's name. "
    "Repeat for several runs of the job (their spread is the run-to-run noise).",
)
@click.option(
    "--tolerances",
    "tolerances_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="YAML file with any of the tolerance keys (flags below win).",
)
@click.option("--loss-rtol", type=float, help="Relative loss increase always allowed [0.05].")
@click.option("--loss-atol", type=float, help="Absolute loss increase allowed on top [0].")
@click.option("--eval-rtol", type=float, help="Relative eval change always allowed [0.05].")
@click.option("--throughput-rtol", type=float, help="Throughput drop always allowed [0.10].")
@click.option("--step-time-rtol", type=float, help="Step time rise always allowed [0.10].")
@click.option(
    "--loss-sigmas",
    type=float,
    help="Loss rise allowed, in standard errors of the difference between runs; 0: off [3.5].",
)
@click.option(
    "--perf-sigmas",
    type=float,
    help="Throughput/step time change allowed, in standard errors; 0: off [3.5].",
)
@click.option(
    "--align",
    type=click.Choice(["step", "samples", "tokens"]),
    help="Match runs by step, samples or tokens seen [step].",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    help="Also write the result as JSON to this file ('-': stdout, instead of the table).",
)
@click.option(
    "--junit-xml",
    "junit_out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the result as JUnit XML (one test case per check) to this file.",
)
@click.option(
    "--save-baseline",
    "save_name",
    metavar="NAME",
    help="Store RUN as a run of the baseline NAME (after the comparison, if it passes).",
)
@click.option(
    "--baselines-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Where named baselines live [$MINDWATCH_BASELINES, else ./baselines].",
)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Runs a saved baseline keeps (the newest).",
)
@click.pass_context
def compare_command(
    ctx: click.Context,
    /,
    *,
    run: Path,
    baselines: tuple[Path, ...],
    tolerances_file: Optional[Path],
    json_out: Optional[Path],
    junit_out: Optional[Path],
    save_name: Optional[str],
    baselines_dir: Optional[Path],
    keep: int,
    **flags: Any,
) -> None:
    """Compare RUN with one or more baseline runs: a regression gate for CI.

    Checks the final loss, the loss at matched steps, eval metrics, throughput and step
    time. A change fails only when it is larger than both its tolerance and the noise
    of the compared statistic between two runs of the job: the baselines' spread, or
    with one baseline the statistic's own standard error (see docs/compare.md). Exit
    status: 0 within tolerance, 1 regression found, 2 bad input.
    """
    from mindwatch.common.i18n import _
    from mindwatch.tools import compare as cmp

    if not baselines and save_name is None:
        raise click.UsageError(_("give --baseline (or --save-baseline NAME to record one)"))
    folder = cmp.baselines_dir(baselines_dir)
    passed = True
    try:
        tol = cmp.load_tolerances(tolerances_file, flags)
        subject = cmp.load_run(run)
        if baselines:
            bases = [b for given in baselines for b in cmp.load_runs(cmp.resolve(given, folder))]
            # A folder of baselines may hold the run itself: it is not its own baseline.
            others = [b for b in bases if b.folder.resolve() != subject.folder.resolve()]
            bases = others or bases
            checks = cmp.compare_runs(subject.frame, [b.frame for b in bases], tol)
            changed = cmp.changes(subject.facts, [b.facts for b in bases])
            result = cmp.report_json(checks, tol, subject, bases, changed)
            passed = bool(result["passed"])
            _write_compare_outputs(
                result, checks, subject, bases, json_out=json_out, junit_out=junit_out
            )
            if json_out is None or str(json_out) != "-":
                _print_comparison(checks, changed, bases, passed=passed)
        if save_name is not None:
            quiet = json_out is not None and str(json_out) == "-"  # stdout holds the JSON
            _save_baseline(subject.folder, save_name, folder, keep, passed=passed, err=quiet)
    except cmp.CompareError as exc:
        raise InputError(str(exc)) from exc
    ctx.exit(0 if passed else 1)


def _write_compare_outputs(
    result: dict[str, Any],
    checks: list[Any],
    /,
    run: Any,
    bases: list[Any],
    *,
    json_out: Optional[Path],
    junit_out: Optional[Path],
) -> None:
    from mindwatch.tools import compare as cmp

    try:
        if json_out is not None:
            text = json.dumps(result, indent=2, ensure_ascii=False)
            if str(json_out) == "-":
                click.echo(text)
            else:
                json_out.write_text(text + "\n", encoding="utf-8")
        if junit_out is not None:
            junit_out.write_bytes(cmp.report_junit(checks, run, bases))
    except OSError as exc:
        raise InputError(f"cannot write the result: {exc}") from exc


def _save_baseline(
    run: Path, name: str, folder: Path, keep: int, *, passed: bool, err: bool
) -> None:
    from mindwatch.common.i18n import _, ngettext
    from mindwatch.tools import compare as cmp

    if not passed:
        click.echo(
            _("not saved as baseline '{name}': the run has regressions").format(name=name),
            err=err,
        )
        return
    saved = cmp.save(run, name, folder, keep=keep)
    count = len(saved.runs)
    click.echo(
        ngettext(
            "saved as baseline '{name}' in {folder} ({count} run)",
            "saved as baseline '{name}' in {folder} ({count} runs)",
            count,
        ).format(name=name, folder=folder / name, count=count),
        err=err,
    )
    for old in saved.removed:
        click.echo("  " + _("dropped the oldest: {run}").format(run=old.name), err=err)


def _print_comparison(
    checks: list[Any], changed: list[Any], bases: list[Any], *, passed: bool
) -> None:
    from rich.console import Console

    from mindwatch.common.i18n import _, ngettext
    from mindwatch.tools.compare import changes_table, checks_lines, display_name
    from mindwatch.tools.compare.facts import FACTS

    console = Console(highlight=False, markup=False, emoji=False)
    facts = [c for c in changed if c.kind == "fact"]
    if changed:
        labels = dict(FACTS)
        what = [_(labels[c.key]) for c in facts]
        if any(c.kind == "config" for c in changed):
            what.append(_("its config"))
        shown = ", ".join(what)
        click.echo(_("warning: the run differs from its baseline in {what}:").format(what=shown))
        _echo_table(console, changes_table(changed))
        click.echo("")
    width = console.width if console.is_terminal else None
    click.echo("\n".join(checks_lines(checks, width)))
    if len(bases) == 1:
        click.echo(_("noise: each statistic's standard error in the one baseline run"))
    else:
        click.echo(
            ngettext(
                "noise: the spread of {count} baseline run",
                "noise: the spread of {count} baseline runs",
                len(bases),
            ).format(count=len(bases))
        )
    bad = [display_name(c.name) for c in checks if c.status == "regression"]
    click.echo(
        _("within tolerance") if passed else _("regression: {checks}").format(checks=", ".join(bad))
    )
    if not passed and len(bases) == 1 and any(c.kind == "config" for c in changed):
        click.echo(
            _(
                "note: one baseline measures sampling noise only. Runs that differ in "
                "config (another seed) also differ by their trajectories: compare with "
                "several baseline runs (--baseline A --baseline B ...)."
            )
        )


def _echo_table(console: Any, table: Any) -> None:
    """Print a rich table through click; in a pipe or a file as plain text, rows never
    wrapped and no trailing blanks."""
    if not console.is_terminal:
        console.width = 1000
    with console.capture() as captured:
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def _no_mindspore(exc: Optional[BaseException]) -> str:
    return (
        f"mindwatch demo needs MindSpore ({exc}). Install it with "
        "`pip install 'mindwatch[mindspore]'` (CPU build from PyPI), or install the "
        "MindSpore build that matches your CANN version on Ascend."
    )


def _max_size(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return runtools.parse_size(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a size; use e.g. 500M, 2G, 1.5GiB, 10MB or plain bytes like "
            "1048576 (K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB of 1000)",
            ctx,
            param,
        ) from None


@main.command("tensorboard")
@click.argument("logdir", required=False, default="./runs", type=click.Path(path_type=Path))
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Port to serve on [default: a free one].",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0: every interface, for a remote machine).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the address in a web browser.")
@click.option("--ranks", is_flag=True, help="Also list the per-rank folders (rank_<r>/) as runs.")
@click.pass_context
def tensorboard_command(
    ctx: click.Context, /, *, logdir: Path, port: int, host: str, open_browser: bool, ranks: bool
) -> None:
    """View the runs in TensorBoard (until Ctrl-C).

    Serves the runs below LOGDIR [default: ./runs, the demo's] with the TensorBoard
    installed with mindwatch (not whatever `tensorboard` is on PATH) on a free local
    port, waits until it answers and prints its address. The address opens on the
    dashboard that answers "is training healthy?" (loss, eval, lr, grad norm,
    throughput); per-rank folders of msrun jobs are filtered out of the run list unless
    --ranks. Also available as `mindwatch board`. Exit status: 0 stopped with Ctrl-C,
    1 TensorBoard failed, 2 bad input.
    """
    from mindwatch.common.i18n import _
    from mindwatch.tools import board as tb

    try:
        runs = tb.check_logdir(logdir)
    except tb.BoardError as exc:
        raise InputError(str(exc)) from exc
    empty = tb.nothing_to_show(logdir, runs)
    if empty:
        click.echo(f"warning: {empty}", err=True)
    try:
        with tb.show(logdir, runs, host=host, port=port, ranks=ranks) as shown:
            click.echo(
                _("TensorBoard serves {folder} ({count}) at:").format(
                    folder=logdir.resolve(), count=shown.count
                )
            )
            click.echo(f"  {shown.url}")
            if open_browser and not tb.open_in_browser(shown.url):
                click.echo(_("No web browser found here: open the address above yourself."))
            click.echo(_("Press Ctrl-C to stop."))
            status = shown.wait()
            if status is None:
                click.echo(_("Stopping TensorBoard."))
                ctx.exit(0)
            raise click.ClickException(
                f"TensorBoard stopped by itself (exit status {status}):\n{shown.board.output()}"
            )
    except KeyboardInterrupt:
        # Ctrl-C before the wait began (while starting, or just after "Press Ctrl-C"):
        # leaving the block has stopped TensorBoard, so it is the same clean stop.
        click.echo(_("Stopping TensorBoard."))
        ctx.exit(0)
    except tb.BoardError as exc:
        raise click.ClickException(str(exc)) from exc


main.add_command(tensorboard_command, name="board")


@main.command("runs")
@click.argument("root", type=click.Path(path_type=Path))
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    metavar="N",
    help="Keep the N newest runs; mark older ones.",
)
@click.option(
    "--max-size",
    metavar="SIZE",
    callback=_max_size,
    help="Mark the oldest runs until the kept ones total at most SIZE (500M, 2G, 1.5GiB).",
)
@click.option(
    "--active-secs",
    type=_Seconds(min=0),
    metavar="SECONDS",
    default=runtools.DEFAULT_ACTIVE_SECS,
    show_default=True,
    help="A run with a file changed this recently is never deleted.",
)
@click.option("--yes", is_flag=True, help="Delete the marked runs (default: only show them).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@click.pass_context
def runs_command(
    ctx: click.Context,
    *,
    root: Path,
    keep: Optional[int],
    max_size: Optional[int],
    active_secs: float,
    yes: bool,
    as_json: bool,
) -> None:
    """List the runs below ROOT, and prune old ones with --keep and/or --max-size.

    Dry run unless --yes. Runs still running, or with a file changed in the last
    --active-secs, are never deleted. Exit status: 0 fine (nothing to prune, or pruned),
    1 runs would be deleted (dry run), 2 bad input or a deletion failed.
    """
    from rich.console import Console

    if not root.exists():
        raise click.BadParameter(
            f"'{root}' does not exist; pass the folder that holds the run folders "
            "(the --logdir of your training, e.g. ./runs)",
            param_hint="ROOT",
        )
    if not root.is_dir():
        raise click.BadParameter(
            f"'{root}' is a file, not a folder; pass the folder that holds the run folders",
            param_hint="ROOT",
        )
    if yes and keep is None and max_size is None:
        raise click.UsageError("--yes deletes by a policy: add --keep N and/or --max-size SIZE")
    pruning = runtools.prune(
        root, keep=keep, max_size=max_size, active_secs=active_secs, delete=yes
    )
    if as_json:
        click.echo(json.dumps(runtools.pruning_json(pruning), indent=2, ensure_ascii=False))
    else:
        console = Console(highlight=False, markup=False, emoji=False)
        table = runtools.runs_table(pruning.found, now=pruning.now, with_action=pruning.policy)
        if console.is_terminal:
            console.print(table)
        else:
            _echo_table(console, table)
        for line in runtools.summary_lines(pruning):
            console.print(line)
    from mindwatch.common.i18n import _

    for name, error in pruning.failed.items():
        click.echo(
            _(
                "mindwatch runs: could not delete {run}: {error} (fix that and run again, "
                "or delete the folder by hand)"
            ).format(run=name, error=error),
            err=True,
        )
    ctx.exit(2 if pruning.failed else 1 if pruning.marked and not yes else 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
