"""``mindwatch explain`` and the report's anomalies on a real MindSpore run: a small MLP
trained on the CPU through ``TrainOneStepWithGradNormCell(layer_norms=True)``, one
layer's gradient multiplied 30x from step 150 (forward unchanged), the alert raised by
mindwatch's own rules, the flight recorder fed the cell's real squared norms, and the
analysis written with the alert in the layout the pipeline writes (the ``forensics``
object of the alert line, ``forensics/<alert>.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mindspore as ms
import numpy as np
import pytest
from click.testing import CliRunner
from mindspore import Parameter, Tensor, nn, ops

import mindwatch
from mindwatch.cli import main
from mindwatch.forensics import FlightRecorder, analyse
from mindwatch.mindspore import TrainOneStepWithGradNormCell
from mindwatch.tools.explain import cells

FAULT = 150  # from this step fc2's weight gradient is 30x (the forward pass unchanged)
STEPS = 220


class Linear(nn.Cell):  # type: ignore[misc]
    """A dense layer whose weight gradient passes a gain: ``w * g + stop_gradient(w *
    (1 - g))`` is ``w`` forward and has gradient ``g`` backward."""

    def __init__(self, fan_in: int, fan_out: int, seed: int) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        weight = rng.normal(0, 1 / np.sqrt(fan_in), (fan_out, fan_in)).astype(np.float32)
        self.weight = Parameter(Tensor(weight), name="weight")
        self.bias = Parameter(Tensor(np.zeros(fan_out, np.float32)), name="bias")
        self.gain = Parameter(Tensor(1.0, ms.float32), name="gain", requires_grad=False)

    def construct(self, x: Any) -> Any:
        w = self.weight * self.gain + ops.stop_gradient(self.weight * (1 - self.gain))
        return ops.matmul(x, w.T) + self.bias


class MLP(nn.Cell):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = Linear(16, 32, 1)
        self.fc2 = Linear(32, 32, 2)
        self.fc3 = Linear(32, 4, 3)
        self.relu = nn.ReLU()

    def construct(self, x: Any) -> Any:
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


def _train(folder: Path) -> tuple[FlightRecorder, list[str]]:
    """Train with mindwatch's rules on; the recorder holds every step's real norms."""
    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_seed(0)
    net = MLP()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
    cell = TrainOneStepWithGradNormCell(nn.WithLossCell(net, loss_fn), opt, layer_norms=True)
    names = [p.name for p in cell.weights]
    recorder = FlightRecorder(256)
    recorder.set_layers(names)
    rng = np.random.default_rng(0)
    with mindwatch.Monitor(folder, {"print_every": 0}) as monitor:
        for step in range(1, STEPS + 1):
            if step == FAULT:
                net.fc2.gain.set_data(Tensor(30.0, ms.float32))
            x = rng.normal(size=(32, 16)).astype(np.float32)
            y = (x[:, :4].argmax(axis=1)).astype(np.int32)
            loss, grad_norm, squares = cell(Tensor(x), Tensor(y))
            recorder.add_layers(step, squares)
            values = {"train/loss": float(loss.asnumpy()), "train/grad_norm": float(grad_norm)}
            recorder.add_scalars(step, values)
            recorder.add_sample_ids(step, list(range(step * 32, step * 32 + 32)))
            monitor.log_step(step, loss=values["train/loss"], grad_norm=float(grad_norm))
    return recorder, names


def _write_forensics(folder: Path, recorder: FlightRecorder) -> dict[str, Any]:
    """The first alert at or after the fault analysed and written with it (what the
    pipeline does on an alert); returns that alert's line."""
    path = folder / "alerts.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    index = next(i for i, a in enumerate(lines) if a["step"] >= FAULT)
    alert = lines[index]
    step = alert["step"]
    full = analyse(recorder.window(step), step, lookback=32, z=6.0, rank=0)
    name = f"forensics/step-{step}-{alert['rule']}.json"
    (folder / "forensics").mkdir()
    (folder / name).write_text(json.dumps({**full, "alert": alert}), encoding="utf-8")
    summary = {"file": name, "movers": full["movers"][:5], "loss_onset": full["loss_onset"]}
    for key in ("first_mover", "nonfinite", "batch"):
        if key in full:
            summary[key] = full[key]
    lines[index] = {**alert, "forensics": summary}
    path.write_text("".join(json.dumps(a) + "\n" for a in lines), encoding="utf-8")
    return lines[index]


@pytest.mark.slow
def test_explain_names_the_layer_whose_gradient_was_multiplied(tmp_path: Path) -> None:
    folder = tmp_path / "mlp"
    recorder, names = _train(folder)
    assert names == [f"fc{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")]
    alert = _write_forensics(folder, recorder)
    assert alert["rule"] in ("grad_explosion", "spike"), alert
    first = alert["forensics"]["first_mover"]
    assert first["name"] == "fc2.weight"
    assert first["onset"] == FAULT
    result = CliRunner().invoke(main, ["explain", str(folder)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(cells(line) <= 80 for line in lines), lines
    text = " ".join(result.output.split())
    assert f"[{alert['severity']}] {alert['rule']} at step {alert['step']}" in text
    assert "First mover layer fc2.weight on rank 0 moved" in text
    assert f"(from step {FAULT}: z " in text
    table = lines.index("What moved, first movers first")
    assert lines[table + 2].split()[1:2] == [str(FAULT)]
    assert lines[table + 2].split()[-1] == "fc2.weight"
    ids = ", ".join(str(i) for i in range(alert["step"] * 32, alert["step"] * 32 + 4))
    assert f"32 sample ids: {ids}," in text
    out = tmp_path / "report"
    report = CliRunner().invoke(main, ["report", str(folder), "--out", str(out), "--static"])
    assert report.exit_code == 0, report.output
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "layer fc2.weight on rank 0 moved" in html
    assert '<table class="heat">\n      <tr><th>fc2.weight</th>' in html
