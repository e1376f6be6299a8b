"""``mindwatch doctor``'s checks of the event files themselves, and of what ``run.json``
says they should hold.

Per file (:mod:`mindwatch.events.contents`): 0 bytes, only a header, damaged regions
(zero-filled ones named as such: power loss), an incomplete last record, and tags whose
steps go back or repeat without a restart marker. A file still being written may be
empty or end mid-record for a while, so those count only once the file is settled: its
run ended (``run.json``), its process is gone, a newer file follows it, or it has not
changed for :data:`SETTLE_SECS`.

Per run: the files ``run.json`` lists and the bytes each held at the end
(``event_files``, ``event_file_bytes``), and the steps it logged
(:mod:`mindwatch.tools.completeness`), against what the folder holds; a gap is a
finding naming the files, what is missing, and the likely cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mindwatch.common.i18n import _, ngettext
from mindwatch.common.invocation import command_line
from mindwatch.events.contents import FileContents, RunContents, run_contents
from mindwatch.run.record import RunRecord
from mindwatch.tools.completeness import likely_causes, steps_gap
from mindwatch.tools.doctor.findings import Finding, run_check

__all__ = ["SETTLE_SECS", "event_file_findings"]

# A file unchanged this long is not being written: torch's SummaryWriter flushes every
# 120 s by default, and keeps a torn record in its buffer until then.
SETTLE_SECS = 600.0


def event_file_findings(
    name: str, folder: Path, info: RunRecord, *, ended: bool, now: float
) -> list[Finding]:
    """The findings about ``folder``'s event files (run ``name``); ``ended``: its run is
    over (finished, failed, or its process gone), ``info`` its ``run.json``."""
    contents = run_contents(folder)
    check = run_check(name)
    findings: list[Finding] = []
    causes: list[str] = []  # short, for the run.json comparison
    shows = any(f.shown for f in contents.files)
    cut = _cut(info, contents) if ended else {}
    for number, file in enumerate(contents.files):
        settled = ended or number < len(contents.files) - 1 or _age(file, now) > SETTLE_SECS
        if file.path.name in cut:  # its torn or empty end is the cut's: one finding
            file.torn = 0
            if file.empty:
                continue
        findings += _file(check, file, settled=settled, others_show=shows, causes=causes)
    if ended:
        findings += _against_run_json(check, folder, info, contents, causes=causes, cut=cut)
    return findings


def _cut(info: RunRecord, contents: RunContents) -> dict[str, tuple[int, int]]:
    """Files smaller than the bytes ``run.json`` says their writer wrote: name ->
    (size, written)."""
    written = info.get("event_file_bytes")
    if not isinstance(written, Mapping):
        return {}
    sizes = {f.path.name: f.size for f in contents.files}
    cut = {}
    for name, wrote in written.items():
        size = sizes.get(str(name))
        if size is not None and isinstance(wrote, int) and size < wrote:
            cut[str(name)] = (size, wrote)
    return cut


def _age(file: FileContents, now: float) -> float:
    try:
        return now - file.path.stat().st_mtime
    except OSError:
        return 0.0


def _file(
    check: str, file: FileContents, *, settled: bool, others_show: bool, causes: list[str]
) -> list[Finding]:
    name = file.path.name
    if file.empty:
        if not settled:
            said = _("{file} is empty so far (its writer has not flushed)").format(file=name)
            return [Finding(check, "info", said)]
        causes.append(_("{file} is empty (0 bytes)").format(file=name))
        return [
            Finding(
                check,
                "warning",
                _(
                    "{file} is empty (0 bytes): its writer never wrote to it (killed before "
                    "its first flush, a full disk), or it was cut to nothing since"
                ).format(file=name),
                _(
                    "nothing in it to recover (TensorBoard skips it); if the run did not "
                    "finish, resume it from its last checkpoint"
                ),
            )
        ]
    findings = []
    if file.header_only and not settled:
        said = _("{file} holds only its header so far: nothing logged yet").format(file=name)
        findings.append(Finding(check, "info", said))
    if file.header_only and settled:
        alone = not others_show
        said = (
            _(
                "{file} holds only its header: nothing was logged to it, so TensorBoard "
                "shows nothing for this run"
            )
            if alone
            else _("{file} holds only its header: nothing was logged to it")
        )
        findings.append(
            Finding(
                check,
                "warning" if alone else "info",
                said.format(file=name),
                _(
                    "check that the training logs to this writer and closes it (torch's "
                    "SummaryWriter writes on flush() or close(), by default every 120 s)"
                ),
            )
        )
    if file.damage:
        findings.append(_damage(check, file, causes))
    if file.torn and settled:
        at = file.size - file.torn
        causes.append(
            _("{file} ends in an incomplete record at byte {offset}").format(file=name, offset=at)
        )
        findings.append(
            Finding(
                check,
                "warning",
                _(
                    "{file} ends in an incomplete record ({size} bytes from byte {offset}): "
                    "its writer stopped in the middle of a write (killed, out of memory, a "
                    "full disk, or the file was cut); that record is lost"
                ).format(file=name, size=file.torn, offset=at),
                _(
                    "the records before it read normally; if the run did not finish, resume "
                    "it from its last checkpoint"
                ),
            )
        )
    if file.order:
        first = file.order[0]
        others = len(file.order) - 1
        also = (
            ngettext("; also {count} more tag", "; also {count} more tags", others).format(
                count=others
            )
            if others
            else ""
        )
        findings.append(
            Finding(
                check,
                "warning",
                _(
                    "{file}: {what}, with no restart marker{also}: TensorBoard draws the "
                    "curve folding back over itself, and report/compare statistics mix both"
                ).format(file=name, what=first.describe(file.tags[first.group]), also=also),
                _(
                    "if training resumed from a checkpoint, mark the restart so the earlier "
                    "points from that step on are hidden (mindwatch: resume_step={step}; "
                    "torch: SummaryWriter(purge_step={step})), or write each attempt to a "
                    "folder of its own; otherwise log each step once"
                ).format(step=first.step),
            )
        )
    return findings


def _damage(check: str, file: FileContents, causes: list[str]) -> Finding:
    name = file.path.name
    offset, length = file.damage[0]
    zeros = file.zero_filled[0]
    kind = _("zero-filled") if zeros else _("damaged")
    more = len(file.damage) - 1
    also = (
        ngettext(", and {count} more damaged region", ", and {count} more damaged regions", more)
        if more
        else ""
    ).format(count=more)
    why = (
        _(
            "what a power loss or a machine crash leaves: the file's size reached the disk, "
            "its data did not"
        )
        if zeros
        else _("a disk error, a bad copy, or another program writing into the file")
    )
    causes.append(
        _("{file} is {kind} from byte {offset}").format(file=name, kind=kind, offset=offset)
    )
    if file.after_damage:
        return Finding(
            check,
            "problem",
            _(
                "{file}: {size:,} bytes {kind} at byte {offset}{also} ({why}): TensorBoard "
                "stops reading the file there, so {lost} of its {records} records do not "
                "show in TensorBoard"
            ).format(
                file=name,
                size=length,
                kind=kind,
                offset=offset,
                also=also,
                why=why,
                lost=file.after_damage,
                records=file.records,
            ),
            _(
                "`{command}` (and export, read_scalars) reads the records after the "
                "damage too; TensorBoard cannot (keep the file as it is)"
            ).format(command=command_line("report", file.path.parent)),
        )
    # No record follows the damage: all from its start is lost, to the end of the file
    # (the reader's region leaves out a last few bytes that could start a record).
    length = file.size - offset
    return Finding(
        check,
        "problem",
        _(
            "{file}: its last {size:,} bytes, from byte {offset}, are {kind}{also} ({why}): "
            "the records that were there are lost"
        ).format(file=name, size=length, offset=offset, kind=kind, also=also, why=why),
        _(
            "nothing recovers them; the records before byte {offset} read normally; if the "
            "run did not finish, resume it from its last checkpoint"
        ).format(offset=offset),
    )


def _against_run_json(
    check: str,
    folder: Path,
    info: RunRecord,
    contents: RunContents,
    *,
    causes: list[str],
    cut: Mapping[str, tuple[int, int]],
) -> list[Finding]:
    findings = []
    listed = info.get("event_files")
    listed = [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []
    missing = [n for n in listed if not (folder / n).is_file()]
    if missing:
        causes.append(
            ngettext(
                "{count} listed file missing", "{count} listed files missing", len(missing)
            ).format(count=len(missing))
        )
        findings.append(
            Finding(
                check,
                "problem",
                _(
                    "run.json lists event files that are not in the folder: {files} "
                    "(moved or deleted after the run)"
                ).format(files=", ".join(missing)),
                _(
                    "put them back: TensorBoard and mindwatch read the event files in the "
                    "folder itself"
                ),
            )
        )
    for file_name, (size, wrote) in cut.items():
        causes.append(
            _("{file} was cut to {size:,} of {wrote:,} bytes").format(
                file=file_name, size=size, wrote=wrote
            )
        )
        said = (
            _("{file} is empty (0 bytes), but its writer wrote {wrote:,}")
            if size == 0
            else _("{file} is {size:,} bytes, but its writer wrote {wrote:,}")
        )
        findings.append(
            Finding(
                check,
                "problem",
                _(
                    "{said}: it was cut after the run (copied while being written, a sync "
                    "that stopped, a disk quota)"
                ).format(said=said.format(file=file_name, size=size, wrote=wrote)),
                _("copy it again from where the run wrote it, if it is still there"),
            )
        )
    gap = steps_gap(info, contents.last_step, len(contents.steps))
    if gap is None:
        return findings
    own = likely_causes(info)
    because = causes + [cause for cause, _fix in own]
    message = gap.describe()
    if gap.missing:
        message = _("{gap}: {count} steps are missing").format(gap=message, count=gap.missing)
    if not because:
        return [
            *findings,
            Finding(
                check,
                "problem",
                _("{gap}; the event files were cut, zeroed or replaced after the run ended").format(
                    gap=message
                ),
                _(
                    "check the copy or sync that brought the files here, and copy them "
                    "again from where the run wrote them"
                ),
            ),
        ]
    message = _("{gap}; likely because {causes}").format(gap=message, causes="; ".join(because))
    if causes:
        return [*findings, Finding(check, "problem", message, _("see the findings above"))]
    # Only run.json's own account: the folder deleted or moved mid-run is what the user
    # did (and was told at the time), not damage.
    vanished_only = len(own) == 1 and bool(info.get("event_files_vanished"))
    fix = "; ".join(f for _cause, f in own)
    return [*findings, Finding(check, "info" if vanished_only else "problem", message, fix)]
