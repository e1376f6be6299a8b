"""``mindwatch watch ROOT --prometheus`` over runs that a real ``Model.train`` writes, with
a real Prometheus server scraping it and evaluating the shipped alert rules: PromQL
returns the loss and step the event files hold (TensorBoard's own reader), and a NaN
planted in a run written while watching raises ``mindwatch_alerts_total{rule="nonfinite"}``
and fires ``MindwatchNonFinite``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.deploy.test_prometheus_rules import RULES
from tests.mindspore.test_planted_faults import train
from tests.prometheus_server import PrometheusServer, free_port
from tests.tbread import same_float32, scalars
from tests.tools.watch.test_watch_prometheus import watching

pytestmark = pytest.mark.slow

NAN_AT = 25


def _nan_batch(step: int, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (np.full_like(x, np.nan) if step == NAN_AT else x), y


def _with_rules(prom: PrometheusServer) -> None:
    """The shipped rules, evaluated every second (before the server starts)."""
    config = json.loads(prom.config.read_text(encoding="utf-8"))
    config["rule_files"] = [str(RULES)]
    prom.config.write_text(json.dumps(config), encoding="utf-8")


def test_promql_returns_the_event_files_values_and_counts_a_planted_nan(
    tmp_path: Path, prometheus_bin: str
) -> None:
    root = tmp_path / "runs"
    train(root / "healthy", 40)
    events = scalars(root / "healthy")
    step, loss = events["train/loss"][-1]
    assert step == 40

    port = free_port()
    prom = PrometheusServer(prometheus_bin, tmp_path / "prom", [f"127.0.0.1:{port}"])
    _with_rules(prom)
    with watching(root, port) as watch, prom:
        prom.wait_for('mindwatch_step{run="healthy"}')
        assert prom.value('mindwatch_step{run="healthy"}') == step
        served = prom.value('mindwatch_loss{run="healthy"}')
        assert served == loss  # the float32 of the event file, exactly
        assert same_float32(served, loss)
        grad_norm = prom.value('mindwatch_grad_norm{run="healthy"}')
        assert grad_norm == events["train/grad_norm"][-1][1]
        assert prom.value('mindwatch_run_status{run="healthy", status="finished"}') == 1
        nonfinite = 'sum(mindwatch_alerts_total{rule="nonfinite"}) or vector(0)'
        assert prom.value(nonfinite) == 0
        assert prom.query('ALERTS{alertname="MindwatchNonFinite"}') == []

        # A second job, written while the watcher runs, gets a NaN batch at step 25.
        train(root / "nan", 40, plant=_nan_batch)
        nan_events = scalars(root / "nan")
        first_nan = min(s for s, v in nan_events["train/grad_norm"] if math.isnan(v))
        assert first_nan == NAN_AT  # ReLU turns the NaN inputs to 0: the loss stays finite
        prom.wait_for(nonfinite, lambda result: result[0][1] >= 1)
        counted = prom.query('mindwatch_alerts_total{rule="nonfinite"}')
        assert [(labels["run"], labels["severity"], value) for labels, value in counted] == [
            ("nan", "critical", 1.0)
        ]
        last_step, last_loss = nan_events["train/loss"][-1]
        prom.wait_for(f'mindwatch_step{{run="nan"}} == {last_step}')
        assert prom.value('mindwatch_loss{run="nan"}') == last_loss
        last_norm = nan_events["train/grad_norm"][-1][1]
        served_norm = prom.value('mindwatch_grad_norm{run="nan"}')
        assert served_norm == last_norm or (math.isnan(served_norm) and math.isnan(last_norm))
        firing = prom.wait_for('ALERTS{alertname="MindwatchNonFinite", alertstate="firing"}')
        assert [labels["run"] for labels, _ in firing] == ["nan"]
        assert prom.value('mindwatch_nonfinite_total{run="nan"}') >= 1  # type: ignore[operator]
    assert watch.returncode == 1  # stopped with Ctrl-C, after reporting new alerts
