"""``mindwatch explain`` and the report's anomalies on a real run, end to end: a small
MLP trained on the CPU by ``Model.train`` with ``TrainingMonitor`` (forensics on, as by
default) through ``TrainOneStepWithGradNormCell(layer_norms=True)``, its dataset giving
sample ids; from step ``FAULT`` one layer's gradient is multiplied 30x through a masked
op (the forward pass unchanged). mindwatch's rules raise the alert, the pipeline writes
its forensics; ``explain`` and ``report`` read what it wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from click.testing import CliRunner
from mindspore import nn
from mindspore.dataset import GeneratorDataset
from mindspore.train import Model

from mindwatch.cli import main
from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell
from mindwatch.tools.explain import cells
from tests.mindspore.planted_cells import Dense, GradScale, PlantAt, WithIds

FAULT, FACTOR, STEPS, BATCH = 150, 30.0, 170, 16


class MLP(nn.Cell):  # type: ignore[misc]
    def __init__(self, fault: GradScale) -> None:
        super().__init__()
        self.embed = Dense(16, 32, 1)
        self.hidden = Dense(32, 32, 2, fault)
        self.head = Dense(32, 1, 3)
        self.relu = nn.ReLU()

    def construct(self, x: Any) -> Any:
        return self.head(self.relu(self.hidden(self.relu(self.embed(x)))))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    logdir = tmp_path_factory.mktemp("explain-real") / "mlp"
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * BATCH, 16)).astype(np.float32)
    y = (x[:, :1] * 2 + np.sin(x[:, 1:2])).astype(np.float32)
    ids = np.arange(10_000, 10_000 + len(x), dtype=np.int64)[:, None]
    rows = GeneratorDataset(
        lambda: ((x[i], y[i], ids[i]) for i in range(len(x))), ["x", "y", "id"], shuffle=False
    )
    fault = GradScale()
    net = MLP(fault)
    cell = TrainOneStepWithGradNormCell(
        WithIds(net), nn.SGD(net.trainable_params(), learning_rate=0.01), layer_norms=True
    )
    monitor = TrainingMonitor(logdir=logdir, config={"print_every": 0, "alerts": {"sample_ids": 2}})
    callbacks = [PlantAt(fault, FAULT, FACTOR), monitor]
    Model(cell).train(1, rows.batch(BATCH), callbacks=callbacks, dataset_sink_mode=False)
    ms.set_context(mode=previous)
    return next(logdir.rglob("alerts.jsonl")).parent


def _first_explained(run: Path) -> tuple[int, dict[str, Any]]:
    lines = [json.loads(line) for line in (run / "alerts.jsonl").read_text().splitlines()]
    number, alert = next(
        (n, a) for n, a in enumerate(lines, start=1) if "forensics" in a and a["severity"] != "info"
    )
    return number, alert


@pytest.mark.slow
def test_explain_tells_the_real_run_in_80_columns(run: Path) -> None:
    number, alert = _first_explained(run)
    assert FAULT <= alert["step"] <= FAULT + 3, alert
    result = CliRunner().invoke(main, ["explain", str(run)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(cells(line) <= 80 for line in lines), lines
    text = " ".join(result.output.split())
    # the first serious alert with forensics is the one told
    assert f"Alert {number} " in text
    assert f"[{alert['severity']}] {alert['rule']} at step {alert['step']}" in text
    faulty = alert["forensics"]["first_mover"]["name"]
    assert faulty.endswith("hidden.weight")  # MindSpore's name, under the loss cell's
    assert f"First mover layer {faulty} on rank 0 moved" in text
    assert f"(from step {FAULT}: z " in text
    table = lines.index("What moved, first movers first")
    first = lines[table + 2].split()
    assert first[:2] == ["1", str(FAULT)]
    assert first[-1] == faulty
    step = alert["step"]
    ids = ", ".join(str(10_000 + (step - 1) * BATCH + k) for k in range(4))
    assert f"step {step}, rank 0, batch {alert['batch']}; {BATCH} sample ids: {ids}," in text
    # The fault is in a layer's gradient, not in the batch: the loss did not jump on
    # this batch, so no skip is suggested and skip.json blames nothing
    # (tests/mindspore/test_forensics_multicard.py resumes past a bad batch for real).
    assert "skip" not in alert["forensics"]
    assert "Skip it on resume" not in lines
    assert not (run / "skip.json").exists()


@pytest.mark.slow
def test_the_report_of_the_real_run_has_its_anomaly(run: Path, tmp_path: Path) -> None:
    number, alert = _first_explained(run)
    out = tmp_path / "report"
    args = ["report", str(run), "--out", str(out), "--static", "--format", "html,pdf,md"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text(encoding="utf-8")
    assert f"<h4>Alert {number}: [{alert['severity']}] {alert['rule']}" in html
    faulty = alert["forensics"]["first_mover"]["name"]
    assert f"layer {faulty} on rank 0 moved" in html
    assert f'<table class="heat">\n      <tr><th>{faulty}</th>' in html
    md = (out / "report.md").read_text(encoding="utf-8")
    assert f"alert {number} at step {alert['step']} ({alert['rule']}): first mover: layer" in md
