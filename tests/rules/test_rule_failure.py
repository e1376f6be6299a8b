"""A rule that raises is switched off alone: the other rules go on, training goes on.

The fault is planted in a real rule (its ``observe`` raises from step 40 on, as a bug or
an unexpected value would), under a real Monitor: before, the first failure switched off
every rule for the rest of the run, so a NaN loss at step 60 raised no alert.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mindwatch
from mindwatch.rules.builtin import SpikeRule
from tests.hostile.promise import one_warning, reads_back


def test_a_failing_rule_is_switched_off_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    observe = SpikeRule.observe

    def broken(self: SpikeRule, step: int, values: Any) -> Iterator[Any]:
        if step >= 40:
            raise ZeroDivisionError("planted")
        return observe(self, step, values)

    monkeypatch.setattr(SpikeRule, "observe", broken)
    caplog.set_level(logging.WARNING, logger="mindwatch")
    losses = [1.0 / s for s in range(1, 80)]
    losses[59] = math.nan  # step 60
    with mindwatch.Monitor(tmp_path / "run", {"print_every": 0}) as mon:
        for step, loss in enumerate(losses, start=1):
            mon.log_step(step, loss=loss)
    warning = one_warning(
        (r for r in caplog.records if "rule" in r.getMessage()), "spike", "step 40", "planted"
    )
    assert "the other rules go on" in warning
    lines = (tmp_path / "run" / "alerts.jsonl").read_text(encoding="utf-8").splitlines()
    alerts = [json.loads(line) for line in lines]
    assert [(a["rule"], a["step"]) for a in alerts] == [("nonfinite", 60)]
    expected = [(s, v) for s, v in enumerate(losses, start=1) if not math.isnan(v)]
    reads_back(tmp_path / "run", {"train/loss": expected})
    run = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert run["status"] == "finished"
