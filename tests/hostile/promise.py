"""The promise every hostile-input test checks (issue 20, docs/hostile-inputs.md).

For every hostile input the result is exactly one of:

(a) a clear error before training starts, naming the key or file and the fix
    (:func:`config_error`);
(b) one warning, and training goes on (:func:`one_warning`);
(c) exit status 2 from a CLI command, naming the file and the reason (:func:`exit_2`);

and everything logged before the fault reads back with TensorBoard's own
``EventAccumulator`` (:func:`reads_back`). Never a traceback, never a silent loss.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import pytest

from tests.tbread import same_float32, scalars

Points = Mapping[str, Sequence[tuple[int, float]]]


def config_error(excinfo: pytest.ExceptionInfo[BaseException], *names: str) -> str:
    """(a): the error is a ConfigError (or LogDirError) whose message names each of
    ``names`` (the key path, the file, the value). Returns the message."""
    from mindwatch.config import ConfigError
    from mindwatch.events import LogDirError

    assert isinstance(excinfo.value, (ConfigError, LogDirError, TypeError, ValueError)), (
        f"not a clear error: {excinfo.value!r}"
    )
    message = str(excinfo.value)
    for name in names:
        assert name in message, f"{name!r} not named in: {message}"
    assert "Traceback" not in message
    return message


def mindwatch_warnings(records: Iterable[logging.LogRecord]) -> list[str]:
    """The messages of WARNING (and worse) records logged by mindwatch's loggers."""
    return [
        r.getMessage()
        for r in records
        if r.name.startswith("mindwatch") and r.levelno >= logging.WARNING
    ]


def one_warning(records: Iterable[logging.LogRecord], *names: str) -> str:
    """(b): exactly one mindwatch warning, naming each of ``names``. Returns it."""
    warnings = mindwatch_warnings(records)
    assert len(warnings) == 1, f"expected one warning, got {len(warnings)}: {warnings}"
    for name in names:
        assert name in warnings[0], f"{name!r} not named in: {warnings[0]}"
    return warnings[0]


def exit_2(result: Any, *names: str) -> str:
    """(c): a click ``Result`` (or CompletedProcess) that exited 2 naming ``names``,
    with no traceback. Returns what it printed."""
    code = getattr(result, "exit_code", getattr(result, "returncode", None))
    output = getattr(result, "output", None)
    if output is None:
        output = (getattr(result, "stdout", "") or "") + (getattr(result, "stderr", "") or "")
    exception = getattr(result, "exception", None)
    assert code == 2, f"exit status {code}, not 2; output: {output}; exception: {exception!r}"
    assert "Traceback" not in output, output
    if exception is not None:
        assert isinstance(exception, SystemExit), f"raised {exception!r}"
    for name in names:
        assert name in output, f"{name!r} not named in: {output}"
    return str(output)


def reads_back(folder: Union[str, Path], expected: Points) -> None:
    """Every ``(step, value)`` of ``expected`` is in ``folder``'s event files, as
    TensorBoard's EventAccumulator reads them (values compared as float32)."""
    found = scalars(folder)
    for tag, points in expected.items():
        assert tag in found, f"{tag} missing from {folder} (tags: {sorted(found)})"
        have = dict(found[tag])
        for step, value in points:
            assert step in have, f"{tag} step {step} missing from {folder}"
            assert same_float32(have[step], value) or (math.isinf(value) and have[step] == value), (
                f"{tag} step {step}: {have[step]} != {value}"
            )


def no_traceback(text: str) -> None:
    assert not re.search(r"Traceback \(most recent call last\)", text), text
