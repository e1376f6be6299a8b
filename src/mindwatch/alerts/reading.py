"""``alerts.jsonl`` read back: the good lines kept, each bad one skipped and counted.

A line is an alert when it is a JSON object with what :class:`AlertLine` declares
(:class:`~mindwatch.alerts.model.Alert` as ``to_dict`` writes it): ``rule``,
``severity`` (``info``, ``warning`` or ``critical``), ``metric``, ``step`` and
``message``, and optional fields of their own types (``value`` a number or
``"NaN"``/``"Infinity"``/``"-Infinity"``, ``rank`` a non-negative integer, ...). No
field is ``null``: ``to_dict`` leaves a missing value out. Other keys (an alert's extra
fields: ``sample_ids``, ``last_stable``) are kept as written.

Anything else on a line is a bad line: bytes that are not UTF-8, text that is not
JSON, JSON that is not such an object, a line longer than :data:`MAX_LINE` bytes. Each
is skipped and counted, and one warning per file (per version of it) names the file,
the first bad line with why, and the count. An empty line is not a line, and a last
line without its newline that does not parse is one still being written (skipped
without a word). A file over :data:`MAX_BYTES` is read up to there, and the warning says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mindwatch.common.side_files import (
    NotASideFileError,
    describe,
    json_type,
    parse_json,
    read_side_file,
    refused,
    warn_once,
)

__all__ = ["AlertLine", "read_alerts"]

MAX_BYTES = 256 << 20  # about half a million alerts; cooldowns keep a run far below
MAX_LINE = 1 << 20

Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
Index = Annotated[int, Field(ge=0, le=2**63 - 1)]
Number = Union[float, Literal["NaN", "Infinity", "-Infinity"]]  # common.json_values


class AlertLine(BaseModel):
    """One line of ``alerts.jsonl``: the fields readers use, with their types."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    rule: str
    severity: Literal["info", "warning", "critical"]
    metric: str
    step: Int64
    message: str
    value: Optional[Number] = None
    baseline: Optional[Number] = None
    rank: Optional[Index] = None
    node: Optional[str] = None
    device: Optional[str] = None
    device_id: Optional[Index] = None
    epoch: Optional[Index] = None
    batch: Optional[Index] = None
    run: Optional[str] = None
    time: Optional[float] = None
    causes: list[str] = []
    action: Optional[str] = None


def _alert(line: bytes) -> dict[str, Any]:
    """The alert on ``line``; NotASideFileError says why it is not one."""
    if len(line) > MAX_LINE:
        raise NotASideFileError(f"longer than {MAX_LINE} bytes")
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotASideFileError(f"not UTF-8 (byte {exc.start + 1})") from None
    value, _note = parse_json(line)
    if not isinstance(value, dict):
        raise NotASideFileError(f"not a JSON object ({json_type(value)})")
    nulls = [key for key, field in value.items() if field is None]
    if nulls:
        raise NotASideFileError(f"{nulls[0]}: null")
    try:
        AlertLine.model_validate(value)
    except ValidationError as exc:
        where, why = next(iter(refused(exc, value).items()))
        raise NotASideFileError(describe(where, why)) from None
    return value


def read_alerts(path: Path, *, warn: bool = True) -> list[dict[str, Any]]:
    """The alerts in ``path`` (an ``alerts.jsonl``), as their JSON objects; none when it
    is missing or cannot be read. With ``warn``, bad lines are warned about once."""
    side = read_side_file(path, MAX_BYTES, partial=True)
    if side.data is None:
        if warn and side.problem is not None:
            warn_once(side, [side.problem], "no alerts are read from it")
        return []
    alerts: list[dict[str, Any]] = []
    bad, first = 0, ""
    lines = side.data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            alerts.append(_alert(line))
        except NotASideFileError as exc:
            if number == len(lines) and not side.truncated:
                break  # no newline yet: a line still being written, not damage
            bad += 1
            first = first or f"line {number}: {exc}"
    if warn and (bad or side.truncated):
        problems = [f"{bad} bad line(s) skipped (the first: {first})"] if bad else []
        if side.truncated:
            problems.append(f"only its first {MAX_BYTES} bytes are read")
        warn_once(side, problems, f"{len(alerts)} alert(s) read")
    return alerts
