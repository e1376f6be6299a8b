"""``mindwatch watch``'s state file read back: a declared schema, checked whole.

The state says how far each run was read (file offsets), the rules' state and the
last step and time seen, so ``--once`` from cron never reports an event twice. A state
that cannot be trusted is an error naming the file and what is wrong (``mindwatch
watch`` exits 2), with the fix, deleting it: guessing would report old alerts again or
miss new ones without a word. What counts: content that is not JSON, not the version
written, or a value of the wrong type anywhere (an offset that is not a byte count, a
rule state that does not restore). A FIFO or a directory in its place is refused
without blocking. The state an older version left in the watched folder
(``.mindwatch-watch.json``) is another matter: damaged, it is ignored with a warning,
since the folder may not be the user's to clean.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from mindwatch.alerts.engine import RuleEngine
from mindwatch.common.side_files import (
    NotASideFileError,
    describe,
    json_type,
    parse_json,
    read_side_file,
    refused,
)
from mindwatch.config import AlertSettings

__all__ = ["VERSION", "SavedRun", "load_state"]

VERSION = 1
MAX_BYTES = 256 << 20  # a few hundred bytes per run and rule

Offset = Annotated[int, Field(ge=0, le=2**63 - 1)]
FileName = Annotated[str, StringConstraints(pattern=r"^[^/\\\x00]+$")]  # in the run's folder


class SavedRun(BaseModel):
    """What the state keeps of one run."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    offsets: dict[FileName, Offset] = {}
    plugins: dict[str, str] = {}
    engine: dict[str, Any] = {}
    last_wall: Optional[float] = None
    last_step: Optional[Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]] = None
    stalled: bool = False
    runs_seen: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0
    ended: bool = False  # its run.json said it ended, and its steps were checked


class _State(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    version: Literal[1]
    runs: dict[str, SavedRun] = {}


# What a rule's load_state_dict raises on data of the wrong shape.
_RESTORE_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError)


def load_state(path: Path, settings: AlertSettings) -> dict[str, SavedRun]:
    """The runs saved in ``path``; ValueError names the file, what is wrong, and the fix."""
    fix = "delete it to start over (alerts already reported may then be reported again)"
    try:
        return _parse(path, settings)
    except NotASideFileError as exc:
        raise ValueError(f"cannot read the watch state '{path}': {exc}; {fix}") from None


def _parse(path: Path, settings: AlertSettings) -> dict[str, SavedRun]:
    side = read_side_file(path, MAX_BYTES)
    if side.problem is not None:
        raise NotASideFileError(f"it {side.problem}")
    if side.data is None:  # gone since it was found: nothing saved
        return {}
    value, note = parse_json(side.data)
    if note:
        raise NotASideFileError(note)
    if not isinstance(value, dict) or value.get("version") != VERSION:
        what = json_type(value) if not isinstance(value, dict) else "another version"
        raise NotASideFileError(f"not a mindwatch watch state, version {VERSION} ({what})")
    try:
        runs = _State.model_validate(value).runs
    except ValidationError as exc:
        where, why = next(iter(refused(exc, value).items()))
        raise NotASideFileError(describe(where, why)) from None
    for name, saved in runs.items():
        try:  # a rule's state is its own shape: restoring it is the check
            RuleEngine(settings, run=name).load_state_dict(saved.engine)
        except _RESTORE_ERRORS as exc:
            why = f"runs.{name}.engine: the rules' state does not restore ({exc!r:.80})"
            raise NotASideFileError(why) from None
    return runs
