"""Real MindSpore training scraped by a real Prometheus: what PromQL returns is what the
event files hold, and a planted NaN raises ``mindwatch_alerts_total{rule="nonfinite"}``.

A small regression network trains with ``Model.train`` and ``TrainingMonitor`` (the
exporter on, port chosen by the test); ``/usr/bin/prometheus`` scrapes it every second.
A callback placed before the monitor holds training, once before the NaN and once after
the last step, until Prometheus has scraped what the monitor logged so far; the queries
then go through Prometheus' HTTP API, and the event files are read back with
TensorBoard's own reader.
"""

from __future__ import annotations

import math
import socket
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn
from mindspore.train import Model

from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from tests.prometheus_server import PrometheusServer, free_port
from tests.tbread import same_float32, scalars

pytestmark = pytest.mark.slow

BATCH = 8
STEPS = 30
NAN_AT = 26  # a label of this step's batch is NaN, and so is its loss
W_TRUE = np.linspace(-1, 1, 8).astype(np.float32)[:, None]


class Source:
    def __len__(self) -> int:
        return STEPS * BATCH

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(index)
        x = rng.normal(size=8).astype(np.float32)
        y = (x @ W_TRUE + rng.normal(scale=0.1, size=1)).astype(np.float32)
        if index // BATCH + 1 == NAN_AT and index % BATCH == 3:
            y[0] = np.nan  # a label: the loss itself is NaN
        return x, y


class ScrapedBy(ms.train.Callback):  # type: ignore[misc]
    """Before the monitor: at the end of step ``at + 1`` (the monitor has logged ``at``)
    and at the end of training (before the monitor closes), wait until Prometheus holds
    the step the monitor logged last, and keep what PromQL says then."""

    def __init__(self, prom: PrometheusServer, at: int) -> None:
        super().__init__()
        self.prom, self.at = prom, at
        self.seen: dict[int, dict[str, Any]] = {}

    def _wait_for_step(self, step: int) -> None:
        prom = self.prom
        prom.wait_for(f'mindwatch_step{{run="run"}} == {step}')
        self.seen[step] = {
            "loss": prom.value('mindwatch_loss{run="run"}'),
            "lr": prom.value('mindwatch_learning_rate{run="run"}'),
            "grad_norm": prom.value('mindwatch_grad_norm{run="run"}'),
            "nonfinite_alerts": prom.value('sum(mindwatch_alerts_total{rule="nonfinite"})'),
            "running": prom.value('mindwatch_run_status{run="run",status="running"}'),
            "job": prom.query('mindwatch_step{run="run"}')[0][0].get("job"),
            "team": prom.query('mindwatch_step{run="run"}')[0][0].get("team"),
            "node": prom.query('mindwatch_step{run="run"}')[0][0].get("node"),
            "since": prom.value('mindwatch_seconds_since_last_step{run="run"}'),
        }

    def on_train_step_end(self, run_context: Any) -> None:
        if int(run_context.original_args().cur_step_num) == self.at + 1:
            self._wait_for_step(self.at)

    def on_train_end(self, run_context: Any) -> None:
        self._wait_for_step(STEPS)


def test_promql_returns_what_the_event_files_hold(prometheus_bin: str, tmp_path: Path) -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    config = {
        "print_every": 0,
        "flush_secs": 0.2,
        "prometheus": {"port": port, "labels": {"job": "ci-train", "team": "nlp"}},
    }
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    net = nn.SequentialCell([nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1)])
    opt = nn.SGD(net.trainable_params(), learning_rate=0.02)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    data = ms.dataset.GeneratorDataset(Source(), ["x", "y"], shuffle=False).batch(BATCH)
    logdir = tmp_path / "run"
    with PrometheusServer(prometheus_bin, tmp_path / "prometheus", [target]) as prom:
        before = NAN_AT - 1
        hold = ScrapedBy(prom, at=before)
        monitor = TrainingMonitor(logdir=logdir, config=config)
        Model(cell).train(1, data, callbacks=[hold, monitor], dataset_sink_mode=False)

    curves = scalars(logdir)
    loss, lr = dict(curves["train/loss"]), dict(curves["train/lr"])
    grad_norm = dict(curves["train/grad_norm"])
    assert max(loss) == STEPS
    # Before the NaN: the same loss, lr and grad norm as the event files, no alert yet.
    mid = hold.seen[before]
    assert math.isfinite(loss[before])
    assert same_float32(mid["loss"], loss[before])
    assert same_float32(mid["lr"], lr[before])
    assert same_float32(mid["grad_norm"], grad_norm[before])
    assert mid["nonfinite_alerts"] is None  # no alert raised: no series yet
    assert mid["running"] == 1
    assert (mid["job"], mid["team"]) == ("ci-train", "nlp")  # honor_labels keeps them
    assert mid["node"] == socket.gethostname()  # one process: its node, to join NPU-Exporter
    assert mid["since"] is not None
    assert mid["since"] >= 0
    # After it: the last step, its (NaN) loss as in the files, and the alert counted.
    end = hold.seen[STEPS]
    assert math.isnan(loss[NAN_AT])
    assert same_float32(end["loss"], loss[STEPS])
    assert end["nonfinite_alerts"] is not None
    assert end["nonfinite_alerts"] >= 1
    alerts = (logdir / "alerts.jsonl").read_text().splitlines()
    nonfinite = [line for line in alerts if '"rule": "nonfinite"' in line]
    assert end["nonfinite_alerts"] == len(nonfinite)
    assert end["running"] == 1
