"""Reading a YAML config file, with errors that name the file, line and column.

:func:`load_yaml` is the one reader of config and tolerances files. Which encodings it
reads (issue 20: a Chinese comment saved by a Windows editor gave a raw
``UnicodeDecodeError``):

* UTF-8, with or without a byte order mark (BOM);
* UTF-16 and UTF-32 with a BOM (what editors write when they save "Unicode");
* a file that is not UTF-8 but is valid GB18030 (a superset of GBK and GB2312, the
  default of Chinese Windows editors): read as GB18030, with one warning naming the file
  and the fix (save it as UTF-8). Reading it is the useful choice: YAML's syntax is
  ASCII, so a wrong guess can only garble text (a comment, a run name), never a number
  or a key, and the warning says how to be sure.

Anything else (Latin-1 text that is not also GB18030, NUL bytes, random bytes) is a
:class:`ConfigError` naming the file, the byte offset, line and column, and the fix.
"""

from __future__ import annotations

import codecs
import logging
from pathlib import Path
from typing import Any, Union

from mindwatch.config.errors import ConfigError

__all__ = ["load_yaml", "read_text"]

log = logging.getLogger(__name__)

# Longest first: UTF-32-LE's BOM starts with UTF-16-LE's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)
_FIX = "save it as UTF-8 (in most editors: Save As -> Encoding: UTF-8)"


def _where(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"byte {offset} (line {line}, column {column})"


def read_text(path: Union[str, Path], what: str = "config file") -> str:
    """The text of ``path`` in the encodings the module doc lists, or a ConfigError
    naming the file (``what`` says which kind of file it is)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} '{path}': {exc.strerror or exc}") from None
    for bom, encoding, name in _BOMS:
        if data.startswith(bom):
            body = data[len(bom) :]
            try:
                return body.decode(encoding)
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"'{path}' starts with a {name} byte order mark but is not {name} text at "
                    f"{_where(data, exc.start + len(bom))}; {_FIX}"
                ) from None
    if b"\x00" in data:
        offset = data.index(b"\x00")
        raise ConfigError(
            f"'{path}' is not a text file: it holds a NUL byte at {_where(data, offset)} "
            f"(binary data, or UTF-16/UTF-32 saved without a byte order mark); {_FIX}"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf8_error = exc
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        byte = data[utf8_error.start]
        raise ConfigError(
            f"'{path}' is not UTF-8 text: byte 0x{byte:02x} at {_where(data, utf8_error.start)} "
            f"cannot be read (nor as GBK/GB18030); {_FIX}"
        ) from None
    log.warning(
        "mindwatch: '%s' is not UTF-8; read it as GB18030 (GBK), the encoding of Chinese "
        "Windows editors. If its text looks wrong, %s.",
        path,
        _FIX,
    )
    return text


def load_yaml(path: Union[str, Path], what: str = "config file") -> dict[str, Any]:
    """``yaml.safe_load`` of ``path`` as a mapping, or a ConfigError naming the file."""
    import yaml

    text = read_text(path, what)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or exc
        raise ConfigError(f"'{path}' is not valid YAML{where}: {problem}") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        # PyYAML's constructors raise these for a scalar they cannot build (a date
        # such as 2024-13-45) and for nesting deeper than Python's stack.
        raise ConfigError(
            f"'{path}' is not valid YAML: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"'{path}' must hold a mapping of settings (key: value lines), "
            f"got a {type(data).__name__}"
        )
    return data
