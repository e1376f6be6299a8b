"""Reading a JSON side file (``run.json``, ``alerts.jsonl``, watch's state) whatever it
holds: the one place that decides what "damaged" means.

A side file may be anything by the time a tool reads it: hand-edited, cut short, binary,
a FIFO (reading one would block for ever), a directory, a device, gigabytes. The rules:

* :func:`read_side_file` opens it without blocking and reads only a regular file, at
  most ``limit`` bytes; anything else is a reason, not an exception.
* :func:`parse_json` parses text that may be anything: invalid UTF-8 is replaced (and
  said), an integer of thousands of digits is a float (Python refuses to parse it), a
  lone surrogate (``"\\ud800"``, which no UTF-8 file can hold) becomes ``?``, and
  nesting deeper than :data:`MAX_DEPTH` is refused, so no consumer can hit a recursion
  limit or an encoding error on what it was given.
* :func:`validate` checks data against a declared pydantic schema leniently: each value
  the schema refuses is removed (the key, or the item of a list) and named in a
  problem, and the rest is kept.
* :func:`warn_once` logs a file's problems once per version of the file (its inode, size
  and modification time): a watcher that reads ``run.json`` every poll says it once.

Schemas are pydantic models in strict mode (``"4"`` is not an integer, ``true`` is not
1) that allow keys they do not declare (a newer version's): see
:mod:`mindwatch.run.record`, :mod:`mindwatch.alerts.reading`.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

from pydantic import BaseModel, ValidationError

from mindwatch.common.redact import redact_text
from mindwatch.common.warn import WarnOnce

__all__ = [
    "MAX_DEPTH",
    "NotASideFileError",
    "SideFile",
    "describe",
    "json_type",
    "parse_json",
    "read_side_file",
    "refused",
    "validate",
    "warn_once",
]

log = logging.getLogger(__name__)

MAX_DEPTH = 64  # mindwatch writes 5 levels; deeper is not a file of ours
_DIGITS = 64  # longer integers become floats: int() refuses 4300+ digits
_warned = WarnOnce(log)

Model = TypeVar("Model", bound=BaseModel)
Loc = tuple[Union[int, str], ...]


class NotASideFileError(ValueError):
    """Content that is not what a side file holds; the message says why."""


@dataclass(frozen=True)
class SideFile:
    """What :func:`read_side_file` found: the bytes (None when there is no file or it
    cannot be read), why it cannot be read, and the file's identity for
    :func:`warn_once`."""

    path: Path
    data: Optional[bytes] = None
    problem: Optional[str] = None
    truncated: bool = False  # more than ``limit`` bytes: ``data`` holds the first ones
    identity: tuple[int, ...] = ()


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_side_file(path: Path, limit: int, *, partial: bool = False) -> SideFile:
    """The first ``limit`` bytes of ``path`` if it is a regular file. A bigger file is a
    problem, or with ``partial`` its first ``limit`` bytes (``truncated``); so is a path
    that cannot be opened (a NUL in it included)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO opens at once instead of waiting
    except (FileNotFoundError, NotADirectoryError):
        return SideFile(path)
    except OSError as exc:
        return SideFile(path, problem=f"cannot be opened ({exc.strerror or exc})")
    except ValueError:  # a NUL in the path: no file system has such a file
        return SideFile(path, problem="cannot be opened (its path holds a NUL character)")
    try:
        return _read(path, fd, limit, partial)
    except OSError as exc:
        return SideFile(path, problem=f"cannot be read ({exc.strerror or exc})")
    finally:
        os.close(fd)


def _read(path: Path, fd: int, limit: int, partial: bool) -> SideFile:
    info = os.fstat(fd)
    identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"is {_kind(info.st_mode)}"
    elif info.st_size > limit and not partial:
        problem = f"is {info.st_size} bytes, more than the {limit} a mindwatch file has"
    if problem is not None:
        return SideFile(path, problem=problem, identity=identity)
    chunks, left = [], limit + 1  # one more: a file that grew since fstat
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) <= limit:
        return SideFile(path, data, identity=identity)
    if partial:
        return SideFile(path, data[:limit], truncated=True, identity=identity)
    return SideFile(path, problem=f"is more than {limit} bytes", identity=identity)


def _clean(value: Any, depth: int) -> Any:
    """``value`` with lone surrogates replaced; NotASideFileError when nested too deep."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
        return value
    if depth >= MAX_DEPTH and isinstance(value, (dict, list)):
        raise NotASideFileError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        return {_clean(k, depth): _clean(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, depth + 1) for v in value]
    return value


def _integer(text: str) -> Union[int, float]:
    return int(text) if len(text) <= _DIGITS else float(text)


def parse_json(data: bytes) -> tuple[Any, Optional[str]]:
    """``data`` parsed as JSON (NotASideFileError says why it cannot be), and a note when
    bytes that are not UTF-8 were replaced to parse it (bytes are counted from 1)."""
    note = binary = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        binary = f"byte {exc.start + 1} is not UTF-8"
        note = f"{binary}; the bad bytes were replaced"
    if text.startswith("\ufeff"):  # a BOM from an editor on Windows: not an error
        text = text[1:]
    try:
        value = json.loads(text, parse_int=_integer)
    except RecursionError:
        raise NotASideFileError(f"not JSON (nested deeper than {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        why = f"binary, not JSON ({binary})" if binary else f"not JSON ({exc})"
        raise NotASideFileError(why) from None
    return _clean(value, 0), note


def json_type(value: Any) -> str:
    """What a JSON value is, as a message names it: ``an array``, ``a string``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


_EXPECTED = {
    "bool_type": "a boolean",
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "an array",
}


def _where(data: Any, loc: Loc) -> Loc:
    """The longest prefix of ``loc`` that exists in ``data`` (pydantic appends a union
    member's name, e.g. ``('hparams', 'lr', 'str')``)."""
    found: list[Union[int, str]] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and isinstance(part, str) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_dict or in_list):
            break
        node = node[part]
        found.append(part)
    return tuple(found)


def _at(data: Any, where: Loc) -> Any:
    for part in where:
        data = data[part]
    return data


def _why(errors: list[dict[str, Any]], value: Any) -> str:
    """One reason for the errors pydantic gave about one value."""
    expected = [_EXPECTED[e["type"]] for e in errors if e["type"] in _EXPECTED]
    if expected and len(expected) == len(errors):
        wanted = list(dict.fromkeys(expected))
        listed = wanted[0] if len(wanted) == 1 else ", ".join(wanted[:-1]) + " or " + wanted[-1]
        return f"{json_type(value)}, not {listed}"
    message = next((str(e["msg"]) for e in errors if e["type"] not in _EXPECTED), "")
    message = message.removeprefix("Input should be ").removeprefix("Value error, ")
    shown = redact_text(repr(value))[:40]
    return f"{shown}, not {message}" if message else f"{shown}, refused"


def _dotted(where: Loc) -> str:
    return ".".join(str(p) for p in where)


def refused(exc: ValidationError, data: Any) -> dict[Loc, str]:
    """Where in ``data`` each value ``exc`` refused is, and why, in the order found."""
    grouped: dict[Loc, list[dict[str, Any]]] = {}
    for error in exc.errors():
        grouped.setdefault(_where(data, tuple(error["loc"])), []).append(dict(error))
    return {where: _why(errors, _at(data, where)) for where, errors in grouped.items()}


def describe(where: Loc, why: str) -> str:
    """``hparams: an array, not an object``."""
    return f"{_dotted(where)}: {why}" if where else why


def validate(model: type[Model], data: dict[str, Any]) -> tuple[Model, list[str]]:
    """``data`` as ``model``, leniently: every value the schema refuses is removed (the
    key, or the item of a list) and named (``hparams: an array, not an object``) in the
    problems returned. ``data`` is changed in place (pass a copy you own)."""
    problems: list[str] = []
    for _round in range(8):  # each round removes at least one value
        try:
            return model.model_validate(data), problems
        except ValidationError as exc:
            found = refused(exc, data)
        if () in found:  # about the whole object: nothing to keep
            problems.append(found[()])
            break
        problems += [describe(where, why) for where, why in found.items()]
        for where in sorted(found, reverse=True):  # items of one list: the last first
            del _at(data, where[:-1])[where[-1]]
    return model.model_validate({}), problems


def warn_once(file: SideFile, problems: Iterable[str], then: str) -> None:
    """One warning about ``file`` per version of it: its problems and ``then`` (what the
    reader did about them)."""
    listed = "; ".join(problems)
    if not listed:
        return
    key = f"{file.path}|{file.identity}|{listed}"
    _warned(key, "mindwatch: %s: %s; %s", file.path, listed, then)
