"""``mindwatch doctor``'s checks of one run: its ``run.json`` (readable, closed, stale),
runs mixed in its folder, steps that collect_freq skipped, and what its mode and sink
mode mean; what its event files hold is :mod:`.event_files`'s."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from mindwatch.common.i18n import N_, _
from mindwatch.common.invocation import command_line
from mindwatch.events.mixing import mixed_runs
from mindwatch.events.reader import event_files
from mindwatch.run.info import process_alive
from mindwatch.run.ranks import rank_of_run
from mindwatch.run.record import RunFile, read_run_file, read_run_info
from mindwatch.tools.completeness import ENDED
from mindwatch.tools.doctor.event_files import event_file_findings
from mindwatch.tools.doctor.findings import Finding, run_check

__all__ = ["STALE_SECS", "run_findings"]

STALE_SECS = 3600.0  # a run marked running but silent this long may hang

# run.json's status words, as doctor says them
_STATUSES = {
    "running": N_("running"),
    "finished": N_("finished"),
    "terminated": N_("terminated"),
    "failed": N_("failed"),
}


def _damaged(name: str, run_file: RunFile) -> list[Finding]:
    """A ``run.json`` that could not be read whole: what was ignored, and why."""
    if not run_file.problems:
        return []
    ignored = _("the rest of it is used") if run_file.found else _("it is ignored")
    return [
        Finding(
            run_check(name),
            "warning",
            f"{run_file.path}: {'; '.join(run_file.problems)}; {ignored}",
            _(
                "the tools read what they can; the next run written into this folder (a "
                "resume) starts a fresh run.json and keeps this one as run.json.damaged"
            ),
        )
    ]


def run_findings(name: str, folder: Path) -> list[Finding]:
    """The findings about run ``name`` in ``folder`` (one ``ok`` when all is well)."""
    run_file = read_run_file(folder, warn=False)  # its problems are a finding here
    findings: list[Finding] = _damaged(name, run_file)
    info = run_file.record
    newest = max((folder / f).stat().st_mtime for f in event_files(folder))
    age = time.time() - newest
    status = info.get("status")
    ended = status in ENDED
    check = run_check(name)
    if status == "running":
        same_host = info.get("host") == socket.gethostname()
        if same_host and not process_alive(info.get("pid")):
            ended = True
            findings.append(
                Finding(
                    check,
                    "problem",
                    _(
                        "its process is gone but the run was never closed (crashed or "
                        "killed): the last points up to flush_secs before the end may be "
                        "missing"
                    ),
                    _(
                        "check the training log for the error; resume from the last "
                        "checkpoint into the same folder"
                    ),
                )
            )
        elif age > STALE_SECS:
            findings.append(
                Finding(
                    check,
                    "warning",
                    _("marked running, but nothing was written for {hours:.1f} h").format(
                        hours=age / 3600
                    ),
                    _(
                        "the job may hang (a collective waiting for a dead rank?): check it; "
                        "`{command}` reports stalls"
                    ).format(command=command_line("watch", folder)),
                )
            )
    if not ended and rank_of_run(name) is not None:  # a rank's folder: the run's status
        ended = read_run_info(folder.parent).get("status") in ENDED
    findings += event_file_findings(name, folder, info, ended=ended, now=time.time())
    mixed = mixed_runs(folder)
    if mixed is not None:
        findings.append(
            Finding(
                check,
                "problem",
                _(
                    "{runs}: TensorBoard draws them as one curve with several points per "
                    "step, and report/compare numbers mix them"
                ).format(runs=mixed.describe()),
                _("move each later run into a folder of its own: {commands}").format(
                    commands="; ".join(mixed.split_commands())
                ),
            )
        )
    hparams = info.hparams
    every = info.config.collect_freq
    if status in ENDED and info.steps_logged == 0:
        why = (
            _("collect_freq {every} skipped every step the run took").format(every=every)
            if every is not None and every > 1
            else _("no training step reached the monitor")
        )
        findings.append(
            Finding(
                check,
                "problem",
                _("the run ended without recording a step: {why}").format(why=why),
                _(
                    "lower collect_freq (1 records every step), and check that the "
                    "callback is in Model.train's callbacks"
                ),
            )
        )
    if hparams.get("mode") == "PYNATIVE":
        findings.append(
            Finding(
                check,
                "info",
                _(
                    "PyNative mode: steps are slower than in GRAPH mode; MindSpore's "
                    "SummaryCollector would record nothing here, mindwatch does"
                ),
            )
        )
    if hparams.get("dataset_sink_mode") is True:
        findings.append(
            Finding(
                check,
                "info",
                _(
                    "dataset sink mode: on Ascend the callback runs once per sink, so one "
                    "point per sink (its last step), with the sink's time shared among its "
                    "steps"
                ),
            )
        )
    if not findings:
        said = _(_STATUSES[status]) if status in _STATUSES else status or _("no run.json")
        findings.append(
            Finding(
                check,
                "ok",
                _("{status}; last written {seconds:.0f} s ago").format(status=said, seconds=age),
            )
        )
    return findings
