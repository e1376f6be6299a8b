"""``mindwatch doctor``'s check of a data-parallel run's ranks: the rank whose folder
stopped getting points while the others went on (:mod:`mindwatch.tools.ranks`)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Optional

from mindwatch.common.i18n import _
from mindwatch.run.info import process_alive
from mindwatch.run.ranks import rank_of_run
from mindwatch.run.record import read_run_info
from mindwatch.tools.completeness import ENDED
from mindwatch.tools.doctor.findings import Finding, run_check
from mindwatch.tools.ranks import behind, rank_progress, stopped_message

__all__ = ["SILENT_SECS", "rank_findings"]

# While the run goes on, a rank this much behind the others' newest point has stopped;
# less is the spread of the ranks' flushes (flush_secs) and of a slow step. Once the
# run ended its files are complete, so a rank is behind when its last point is more
# than two flush periods older than the others' and its last step lower.
SILENT_SECS = 60.0


def _ended(folder: Path) -> tuple[bool, float]:
    """Whether the run ended (run.json, or its process gone) and its flush period."""
    info = read_run_info(folder)
    status = info.get("status")
    ended = status in ENDED or (
        status == "running"
        and info.get("host") == socket.gethostname()
        and not process_alive(info.get("pid"))
    )
    flush = (info.get("config") or {}).get("flush_secs")
    if isinstance(flush, (int, float)) and not isinstance(flush, bool) and flush > 0:
        return ended, float(flush)
    return ended, 2.0


def rank_findings(runs: list[tuple[str, Path]], now: Optional[float] = None) -> list[Finding]:
    """One finding per data-parallel run below the folder: a warning per rank that
    stopped reporting, else how far all the ranks got."""
    now = time.time() if now is None else now
    names = {name for name, _folder in runs}
    findings = []
    for name, folder in runs:
        parent = name.rsplit("/", 1)[0] if "/" in name else "."
        if rank_of_run(name) is not None and parent in names:
            continue  # a rank's folder: checked with its run
        progress = rank_progress(folder)
        if len(progress) < 2:
            continue
        check = run_check(name)
        ended, flush_secs = _ended(folder)
        late = behind(progress, min_lag=max(2 * flush_secs, 1.0) if ended else SILENT_SECS)
        for rank, others in late:
            findings.append(
                Finding(
                    check,
                    "warning",
                    _("a rank stopped reporting: {what}").format(
                        what=stopped_message(rank, others, now)
                    ),
                    _(
                        "read that rank's worker log (msrun: <log_dir>/worker_{rank}.log) "
                        "and check its node; the others wait for it in the next collective "
                        "or train on without it"
                    ).format(rank=rank.rank),
                )
            )
        early = [] if late or ended else behind(progress, min_lag=max(2 * flush_secs, 1.0))
        for rank, others in early:  # behind, but maybe a slow step or a checkpoint
            findings.append(
                Finding(
                    check,
                    "info",
                    _("{what} (called stopped after {seconds:.0f} s)").format(
                        what=stopped_message(rank, others, now), seconds=SILENT_SECS
                    ),
                )
            )
        if not late and not early:
            steps = sorted({p.last_step for p in progress if p.last_step is not None})
            at = "?" if not steps else str(steps[0])
            if len(steps) > 1:
                at += f"-{steps[-1]}"
            findings.append(
                Finding(
                    check,
                    "ok",
                    _("all {count} ranks report (last step {step})").format(
                        count=len(progress), step=at
                    ),
                )
            )
    return findings
