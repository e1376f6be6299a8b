"""A log folder or a total that cannot be right is refused before training, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mindwatch import Monitor
from mindwatch.config import ConfigError
from mindwatch.events import LogDirError
from tests.hostile.promise import config_error


@pytest.mark.parametrize(
    ("logdir", "named"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("runs/a\0b", "NUL"),
        (5, "must be a path"),
    ],
)
def test_a_log_folder_that_cannot_be_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logdir: Any, named: str
) -> None:
    monkeypatch.chdir(tmp_path)  # an empty logdir used to mean "here", silently
    with pytest.raises(LogDirError) as info:
        Monitor(logdir, {})
    config_error(info, named, "log folder")
    assert list(tmp_path.iterdir()) == []


def test_an_empty_logdir_in_the_config_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        Monitor(config={"logdir": ""})
    config_error(info, "logdir")


@pytest.mark.parametrize(
    ("total", "named"),
    [(10**400, "64 bits"), (0, ">= 1"), (-3, ">= 1"), (1.5, "must be an int"), ("9", "str")],
)
def test_a_total_that_cannot_be_is_refused(tmp_path: Path, total: Any, named: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        Monitor(tmp_path / "run", {}, total_steps=total)
    config_error(info, "total_steps", named)
    assert not (tmp_path / "run").exists()  # refused before anything was made
