"""Configuration errors: one message for every mistake, in the user's own terms.

:func:`describe` turns pydantic's validation errors into one :class:`ConfigError`
message: the key path (renamed to the user's terms when the config came from a
MindFormers YAML), the bad value with secrets masked (a notifier's URL, signing secret or
password never appears in an error: :func:`mindwatch.common.redact.masked`), what is
allowed, and for a misspelt key the closest valid one.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Union, get_args

from pydantic import AliasChoices, BaseModel, ValidationError

from mindwatch.common.redact import masked

__all__ = ["ConfigError", "accepted_keys", "describe"]


class ConfigError(ValueError):
    """A configuration that mindwatch refuses; the message says where and how to fix it."""


def accepted_keys(model: type[BaseModel]) -> list[str]:
    """The keys ``model`` accepts: its field names and their aliases."""
    names: list[str] = []
    for name, field in model.model_fields.items():
        names.append(name)
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names += [a for a in alias.choices if isinstance(a, str)]
    return names


def _model_at(root: type[BaseModel], loc: tuple[Union[int, str], ...]) -> type[BaseModel]:
    model = root
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        for member in (annotation, *get_args(annotation)):  # Optional[Model] too
            if isinstance(member, type) and issubclass(member, BaseModel):
                model = member
                break
    return model


_UNION_MEMBERS = {"bool", "int", "float", "str"}


def _shown(loc: tuple[Union[int, str], ...], value: Any) -> str:
    """A bad value for an error message, with secrets replaced (a notifier's URL,
    signing secret or password never appears in an error). The key is the last part of
    ``loc`` that names one, not a union member pydantic appends (``str``)."""
    key = next((str(p) for p in reversed(loc) if str(p) not in _UNION_MEMBERS), "")
    return f"{masked(value, key)!r:.80}"


def describe(
    exc: ValidationError, source: str, key_names: Mapping[str, str], root: type[BaseModel]
) -> str:
    """The message of a :class:`ConfigError` for ``exc`` (``root``: the model validated)."""
    lines = [f"invalid mindwatch {source}:"]
    seen_unions: set[tuple[Union[int, str], ...]] = set()
    for error in exc.errors():
        original = tuple(error["loc"])
        loc = original
        if loc and str(loc[0]) in key_names:  # shown in the user's own terms
            loc = (key_names[str(loc[0])], *loc[1:])
        if loc and loc[-1] in _UNION_MEMBERS:  # one line for a value no union member takes
            if loc[:-1] in seen_unions:
                continue
            seen_unions.add(loc[:-1])
            path = ".".join(str(p) for p in loc[:-1])
            shown = _shown(original, error.get("input"))
            lines.append(f"  - {path} = {shown}: must be a bool, number or string")
            continue
        path = ".".join(str(p) for p in loc)
        if not path:  # a rule about several keys: the message names them
            lines.append(f"  - {str(error['msg']).removeprefix('Value error, ')}")
            continue
        if error["type"] == "extra_forbidden":
            key = str(original[-1])
            known = accepted_keys(_model_at(root, original[:-1]))
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            listed = ", ".join(sorted(set(known)))
            lines.append(f"  - {path}: unknown key{hint} (known keys: {listed})")
            continue
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"  - {path} = {_shown(original, error.get('input'))}: {message}")
    return "\n".join(lines)
