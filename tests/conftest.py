"""Shared fixtures. MindSpore logs are silenced (GLOG_v=3) for every test and subprocess."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("GLOG_v", "3")


@pytest.fixture(autouse=True)
def _own_state_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-user state (``mindwatch watch``'s) goes to a fresh folder, never ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state-home")))
