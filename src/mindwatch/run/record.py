"""``run.json`` read back: a declared schema, so every reader gets the types it expects.

Whatever the file holds (any JSON value, wrong types at any key, invalid UTF-8, binary,
a huge file, a FIFO, a directory named ``run.json``), :func:`read_run_info` returns a
:class:`RunRecord` whose declared fields have their declared types or are empty. A
value of the wrong type is left out, not the file: ``hparams`` given as a list leaves
``hparams`` empty and the status still reads. The first reader of a damaged file logs
one warning naming the file and each key left out, with why
(:func:`mindwatch.common.side_files.warn_once`).

The schema is a pydantic model in strict mode (``"4"`` is not a world size, ``true``
is not a step) with integers bounded to what the consumers can use (a pid a signal can
be sent to, steps in int64); keys it does not declare (``flops``, ``prometheus``, a
framework's extra fields, a newer version's) are kept as they are, unchecked, in
``model_extra``. :meth:`RunRecord.get` reads it like the dict it used to be.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from mindwatch.common.side_files import (
    NotASideFileError,
    SideFile,
    json_type,
    parse_json,
    read_side_file,
    validate,
    warn_once,
)
from mindwatch.run.layout import RUN_FILE
from mindwatch.run.ranks import RankPlace

__all__ = ["Attempt", "RankEntry", "RunFile", "RunRecord", "read_run_file", "read_run_info"]

# mindwatch writes a few KB; a file bigger than this is not one of ours.
MAX_BYTES = 16 << 20

Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
Count = Annotated[int, Field(ge=0, le=2**63 - 1)]
Pid = Annotated[int, Field(ge=1, le=2**31 - 1)]  # what os.kill takes
Ranks = Annotated[int, Field(ge=1, le=2**31 - 1)]
HParam = Union[bool, Int64, float, str]
RunStatus = Literal["running", "finished", "failed", "terminated"]


class _Schema(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    def get(self, key: str, default: Any = None) -> Any:
        """``key``'s value (None, an empty list or mapping: not there), as a dict's
        ``get`` would give it; keys the schema does not declare come as written."""
        if key in type(self).model_fields:
            value = getattr(self, key)
            if isinstance(value, BaseModel):
                return value.model_dump()
            return default if value is None else value
        return (self.model_extra or {}).get(key, default)


class Attempt(_Schema):
    """One process that wrote the folder (``attempts``)."""

    start_time: Optional[str] = None
    end_time: Optional[str] = None
    status: Optional[Literal["running", "finished", "failed", "terminated", "crashed"]] = None
    host: Optional[str] = None
    pid: Optional[Pid] = None
    process: Optional[str] = None
    last_step: Optional[Int64] = None
    resumed_at: Optional[Int64] = None


class RankEntry(_Schema):
    """Where one rank ran (``ranks``: :meth:`mindwatch.run.ranks.RankPlace.to_dict`)."""

    rank: Annotated[int, Field(ge=0, le=2**31 - 1)]
    node: str
    device: Optional[str] = None
    device_id: Optional[Count] = None

    def place(self) -> RankPlace:
        return RankPlace(self.rank, self.node, self.device, self.device_id)


class RecordedConfig(_Schema):
    """The effective config (``config``): only what readers use is declared."""

    collect_freq: Optional[Annotated[int, Field(ge=1, le=2**63 - 1)]] = None


class RunRecord(_Schema):
    """A run folder's ``run.json`` as written by :class:`~mindwatch.run.info.RunInfo`."""

    format: Optional[Int64] = None
    status: Optional[RunStatus] = None
    start_time: Optional[str] = None
    end_time: Optional[str] = None
    host: Optional[str] = None
    pid: Optional[Pid] = None
    process: Optional[str] = None
    argv: list[str] = []
    cwd: Optional[str] = None
    logdir: Optional[str] = None
    world_size: Optional[Ranks] = None
    rank: Optional[Annotated[int, Field(ge=0, le=2**31 - 1)]] = None
    ranks: list[RankEntry] = []  # every rank's node and device, as the ranks agreed
    versions: dict[str, str] = {}
    config: RecordedConfig = RecordedConfig()
    attempts: list[Attempt] = []
    hparams: dict[str, HParam] = {}
    points_dropped: Optional[Count] = None
    write_errors: Optional[Count] = None
    event_files: list[str] = []
    event_file_bytes: dict[str, Count] = {}  # what each writer wrote (doctor: a cut file)
    event_files_vanished: Optional[Count] = None
    steps_out_of_order: Optional[Count] = None
    alerts: Optional[Count] = None
    last_step: Optional[Int64] = None
    steps_logged: Optional[Count] = None
    resumed_at: Optional[Int64] = None
    nonfinite: dict[str, Count] = {}
    previous_run: Optional[str] = None
    next_runs: list[str] = []
    error: Optional[str] = None


@dataclass(frozen=True)
class RunFile:
    """What reading ``run.json`` found: the record (empty when nothing could be read),
    the JSON object as it was (None without one: for code that rewrites the file and
    must not lose what it does not know), and what was left out, and why."""

    path: Path
    record: RunRecord
    raw: Optional[dict[str, Any]] = None
    problems: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        """A JSON object was read (perhaps with keys left out)."""
        return self.raw is not None


def read_run_file(folder: Path, *, warn: bool = True) -> RunFile:
    """``folder``'s ``run.json``; with ``warn``, its problems are logged once (see the
    module)."""
    path = folder / RUN_FILE
    side = read_side_file(path, MAX_BYTES)
    problems: list[str] = []
    raw: Optional[dict[str, Any]] = None
    record = RunRecord()
    if side.problem is not None:
        problems.append(side.problem)
    elif side.data is not None:
        try:
            value, note = parse_json(side.data)
        except NotASideFileError as exc:
            value, note = None, str(exc)
            problems.append(str(exc))
        else:
            if note:
                problems.append(note)
            if isinstance(value, dict):
                raw = value
                record, refused = validate(RunRecord, _copy(value))
                problems += refused
            else:
                problems.append(f"not a JSON object ({json_type(value)})")
    if warn and problems:
        _warn(side, problems, found=raw is not None)
    return RunFile(path, record, raw, tuple(problems))


def read_run_info(folder: Path) -> RunRecord:
    """``folder``'s ``run.json`` as a :class:`RunRecord` (empty when it is missing,
    damaged or being rewritten; a damaged one is warned about once)."""
    return read_run_file(folder).record


def _copy(value: Any) -> Any:
    """A copy of JSON data (validation removes what it refuses from what it is given)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _warn(side: SideFile, problems: list[str], *, found: bool) -> None:
    warn_once(side, problems, "the rest of it is used" if found else "it is ignored")
