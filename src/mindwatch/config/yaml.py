"""Reading a YAML config file, with errors that name the file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

from mindwatch.config.errors import ConfigError

__all__ = ["load_yaml"]


def load_yaml(path: Union[str, Path]) -> dict[str, Any]:
    """``yaml.safe_load`` of ``path`` as a mapping, or a ConfigError naming the file."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file '{path}': {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or exc
        raise ConfigError(f"'{path}' is not valid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"'{path}' must hold a mapping of settings (key: value lines), "
            f"got a {type(data).__name__}"
        )
    return data
