"""Forensics name the layer with the train cells mindwatch ships, as they come: the
default ``build_model`` and the default ``TrainOneStepWithGradNormCell``, in GRAPH and
in PyNative mode; and where no per-parameter norm is recorded (the ``layer_norms=False``
opt-out, a train cell of the user's own, a loop of the user's own) every output that
tells first movers says so, and how to record them, instead of "no layer departed".

The case, unlike the other forensics tests (an MLP, CNN or attention weight x50 or x30,
through ``layer_norms=True``): a residual network with a normalisation layer whose
*scale* (``norm.gamma``, a LayerNorm-type parameter: SPAM, arXiv 2501.06842, finds them
spiking most often) gets a gradient 300 times larger from step ``FAULT`` on, through
the masked op of ``planted_cells`` (the forward pass unchanged). A spy callback keeps
what the cell returned each step, so the first mover's value and baseline are checked
against the square roots of the squared norm at that parameter's index.
"""

from __future__ import annotations

import http.server
import json
import math
import statistics
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import mindspore as ms
import numpy as np
import pytest
from click.testing import CliRunner
from mindspore import Parameter, Tensor, nn, ops
from mindspore.dataset import GeneratorDataset
from mindspore.train import Callback, Model

import mindwatch
from mindwatch.cli import main
from mindwatch.mindspore import TrainingMonitor, TrainOneStepWithGradNormCell, build_model
from tests.mindspore.planted_cells import Dense, GradScale, PlantAt
from tests.tbread import scalars

pytestmark = pytest.mark.slow

FAULT, FACTOR, STEPS, BATCH = 120, 300.0, 130, 16
FEATURES = 12


class Norm(nn.Cell):  # type: ignore[misc]
    """Layer normalisation whose scale ``gamma`` goes through ``fault``."""

    def __init__(self, width: int, fault: Any) -> None:
        super().__init__()
        self.gamma = Parameter(Tensor(np.ones(width, np.float32)), name="gamma")
        self.beta = Parameter(Tensor(np.zeros(width, np.float32)), name="beta")
        self.fault = fault

    def construct(self, x: Any) -> Any:
        mean = ops.mean(x, -1, True)
        var = ops.mean(ops.square(x - mean), -1, True)
        return (x - mean) / ops.sqrt(var + 1e-5) * self.fault(self.gamma) + self.beta


class Residual(nn.Cell):  # type: ignore[misc]
    def __init__(self, fault: GradScale) -> None:
        super().__init__()
        self.embed = Dense(FEATURES, 32, 1)
        self.norm = Norm(32, fault)
        self.mix = Dense(32, 32, 2)
        self.head = Dense(32, 1, 3)
        self.relu = nn.ReLU()

    def construct(self, x: Any) -> Any:
        h = self.relu(self.embed(x))
        h = h + self.mix(self.relu(self.norm(h)))
        return self.head(h)


class Spy(Callback):  # type: ignore[misc]
    """What the train cell returned at each step, and its weights' names in order."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: dict[int, int] = {}
        self.squares: dict[int, list[float]] = {}
        self.weights: list[str] = []
        self.cell: Any = None

    def on_train_begin(self, run_context: Any) -> None:
        self.cell = run_context.original_args().train_network
        self.weights = [p.name for p in getattr(self.cell, "weights", ())]

    def on_train_step_end(self, run_context: Any) -> None:
        cb = run_context.original_args()
        out = cb.net_outputs
        step = int(cb.cur_step_num)
        self.outputs[step] = len(out) if isinstance(out, (tuple, list)) else 1
        if isinstance(out, (tuple, list)) and len(out) == 3:
            self.squares[step] = [float(v) for v in out[2].asnumpy().reshape(-1)]


class Webhook(http.server.BaseHTTPRequestHandler):
    """A Slack-style incoming webhook: keeps the text of every POST."""

    texts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        type(self).texts.append(json.loads(self.rfile.read(length))["text"])
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def webhook() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    finally:
        httpd.shutdown()


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * BATCH, FEATURES)).astype(np.float32)
    y = (x[:, :1] * 2 + np.sin(x[:, 1:2])).astype(np.float32)
    return x, y


@dataclass
class Run:
    folder: Path  # the run folder (alerts.jsonl's)
    spy: Spy
    faulty: str  # the faulty parameter's name
    notified: list[str]  # what the webhook received


def _train(how: str, mode: str, logdir: Path, hook: str) -> Run:
    """Train the residual network with the fault planted, ``how``: ``build_model`` or
    ``cell`` (defaults), ``opt_out`` (``build_model(..., layer_norms=False)``), ``user``
    (a train cell of the user's own)."""
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
    try:
        ms.set_seed(0)
        fault = GradScale()
        net = Residual(fault)
        x, y = _data()
        data = GeneratorDataset(
            lambda: ((x[i], y[i]) for i in range(len(x))), ["x", "y"], shuffle=False
        ).batch(BATCH)
        opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
        if how == "build_model":
            model = build_model(net, nn.MSELoss(), opt)
        elif how == "opt_out":
            model = build_model(net, nn.MSELoss(), opt, layer_norms=False)
        elif how == "cell":
            model = Model(TrainOneStepWithGradNormCell(nn.WithLossCell(net, nn.MSELoss()), opt))
        else:
            model = Model(UsersCell(nn.WithLossCell(net, nn.MSELoss()), opt))
        config = {
            "print_every": 0,
            "alerts": {"notify": [{"kind": "slack", "url": hook, "min_severity": "warning"}]},
        }
        Webhook.texts = []
        monitor = TrainingMonitor(logdir=logdir, config=config)
        spy = Spy()
        callbacks = [PlantAt(fault, FAULT, FACTOR), spy, monitor]
        model.train(1, data, callbacks=callbacks, dataset_sink_mode=False)
    finally:
        ms.set_context(mode=previous)
    return Run(
        next(logdir.rglob("alerts.jsonl")).parent, spy, net.norm.gamma.name, list(Webhook.texts)
    )


class UsersCell(nn.TrainOneStepCell):  # type: ignore[misc]
    """Someone's own train cell: MindSpore's step, returning (loss, grad_norm)."""

    def construct(self, *inputs: Any) -> Any:
        loss = self.network(*inputs)
        grads = self.grad(self.network, self.weights)(*inputs, ops.ones_like(loss))
        grads = self.grad_reducer(grads)
        norm = ops.sqrt(ops.addn([ops.reduce_sum(ops.square(g)) for g in grads]))
        return ops.depend(loss, self.optimizer(grads)), norm


def _alerts(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "alerts.jsonl").read_text().splitlines()]


def _first_explained(run: Path) -> tuple[int, dict[str, Any]]:
    return next(
        (n, a)
        for n, a in enumerate(_alerts(run), start=1)
        if "forensics" in a and a["severity"] != "info"
    )


def _explain(run: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["explain", str(run), *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    ("how", "mode"),
    [(how, mode) for how in ("build_model", "cell") for mode in ("graph", "pynative")],
)
def test_the_default_cells_name_the_planted_layer_first(
    how: str, mode: str, tmp_path: Path, webhook: str
) -> None:
    run = _train(how, mode, tmp_path / "run", webhook)
    cell = run.spy.cell
    assert type(cell) is TrainOneStepWithGradNormCell
    assert (cell.layer_norms, cell.layer_norms_asked) == (True, False)  # the defaults
    assert set(run.spy.outputs.values()) == {3}, run.spy.outputs  # (loss, norm, squares)
    assert sorted(run.spy.outputs) == list(range(1, STEPS + 1))

    number, alert = _first_explained(run.folder)
    assert FAULT <= alert["step"] <= FAULT + 3, alert
    forensics = alert["forensics"]
    assert "layer_norms" not in forensics, forensics  # they were recorded
    first = forensics["first_mover"]
    assert (first["name"], first["kind"], first["onset"]) == (run.faulty, "layer", FAULT), first
    assert run.faulty.endswith("norm.gamma"), run.faulty

    # Bound to the right values: the value at the alert's step and the baseline median
    # are the square roots of what the cell returned at that parameter's index.
    j = run.spy.weights.index(run.faulty)
    record = json.loads((run.folder / forensics["file"]).read_text())
    step, lookback = alert["step"], record["lookback"]
    assert record["layers"] == len(run.spy.weights)
    norm = math.sqrt(run.spy.squares[step][j])
    assert first["value"] == pytest.approx(norm, rel=1e-5)
    base = [math.sqrt(run.spy.squares[s][j]) for s in range(1, step - lookback + 1)]
    assert first["baseline"] == pytest.approx(statistics.median(base), rel=1e-5)
    assert first["value"] > 100 * first["baseline"]  # the x300 fault, seen as such

    text = _explain(run.folder, "--alert", str(number))
    assert f"First mover layer {run.faulty} on rank 0 moved" in text, text
    assert f"(from step {FAULT}: z " in text, text
    assert "gradient norms were not recorded" not in text, text
    assert "No layer" not in text, text
    # The notifier names it too, and says nothing of missing norms.
    said = [t for t in run.notified if f"first mover: layer {run.faulty}" in t]
    assert said, run.notified
    assert not any("norms were not recorded" in t for t in run.notified), run.notified
    # Returned by default, for the recorder; their curves are the user's choice
    # (layer_norms=True or layer_norms_every), not written unasked.
    assert not any(t.startswith("layers/grad_norm/") for t in scalars(run.folder))


NOTES = {
    "opt_out": "Per-layer gradient norms were not recorded, so no layer can be named: the "
    "train cell was built with layer_norms=False; leave layer_norms at its default to "
    "record them (docs/forensics.md).",
    "user": "Per-layer gradient norms were not recorded, so no layer can be named: the "
    "train cell (UsersCell) returns none; train with mindwatch.mindspore.build_model(net, "
    "loss_fn, optimizer) or TrainOneStepWithGradNormCell(loss_net, optimizer), which "
    "return them by default (docs/forensics.md).",
}
NOTES_ZH = {
    "opt_out": "没有记录逐层梯度范数，因此无法指出是哪一层：训练单元构建时设置了 "
    "layer_norms=False；保留 layer_norms 的默认值即可记录（docs/forensics.md）。",
    "user": "没有记录逐层梯度范数，因此无法指出是哪一层：训练单元（UsersCell）不返回它们；"
    "请用 mindwatch.mindspore.build_model(net, loss_fn, optimizer) 或 "
    "TrainOneStepWithGradNormCell(loss_net, optimizer) 训练，它们默认返回逐层范数"
    "（docs/forensics.md）。",
}


@pytest.mark.parametrize("how", ["opt_out", "user"])
def test_without_layer_norms_every_output_says_so_and_how(
    how: str, tmp_path: Path, webhook: str
) -> None:
    run = _train(how, "graph", tmp_path / "run", webhook)
    assert set(run.spy.outputs.values()) == {2}, run.spy.outputs  # (loss, grad_norm)
    note, cell = NOTES[how], type(run.spy.cell).__name__
    number, alert = _first_explained(run.folder)
    assert alert["step"] >= FAULT, alert
    forensics = alert["forensics"]
    why = "opt_out" if how == "opt_out" else "cell"
    assert forensics["layer_norms"] == {"recorded": False, "why": why, "cell": cell, "note": note}
    assert "first_mover" not in forensics
    assert all(m["kind"] == "scalar" for m in forensics["movers"]), forensics
    record = json.loads((run.folder / forensics["file"]).read_text())
    assert record["layer_norms"]["note"] == note
    assert record["layers"] == 0

    text = _explain(run.folder, "--alert", str(number), "--lang", "en")
    movers = forensics["movers"]
    if movers:  # what did move is named, as a scalar, not as a layer
        assert f"First mover No layer was recorded; {movers[0]['name']} moved first" in text
    else:
        assert "First mover No layer was recorded, and nothing else departed" in text, text
    assert note in text, text
    assert "No layer departed" not in text, text
    zh = _explain(run.folder, "--alert", str(number), "--lang", "zh")
    assert NOTES_ZH[how].replace(" ", "") in zh.replace(" ", ""), zh

    explained = [t for t in run.notified if alert["rule"] in t]
    assert explained, run.notified
    assert all(note in t for t in explained), run.notified

    out = tmp_path / "report"
    args = ["report", str(run.folder), "--out", str(out), "--static", "--format", "html,md"]
    args += ["--lang", "en"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text(encoding="utf-8")
    line = f"alert {number} at step {alert['step']} ({alert['rule']}): {note}"
    assert line in md, md
    html = (out / "report.html").read_text(encoding="utf-8")
    assert f"<p>{note}</p>" in html.replace("&#39;", "'"), html[-3000:]


def test_a_loop_of_ones_own_is_told_how_to_hand_them_over(tmp_path: Path) -> None:
    """``Monitor`` in a PyNative loop of one's own: the recorder got no norms; then it
    gets them through ``flight_recorder``, and the same fault is named."""
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        for hand_over in (False, True):
            ms.set_seed(0)
            fault = GradScale()
            net = Residual(fault)
            loss_net = nn.WithLossCell(net, nn.MSELoss())
            opt = nn.SGD(net.trainable_params(), learning_rate=0.01)
            step_fn = ms.value_and_grad(loss_net, None, opt.parameters)
            x, y = _data()
            logdir = tmp_path / ("handed" if hand_over else "plain")
            with mindwatch.Monitor(logdir, {"print_every": 0}) as monitor:
                recorder = monitor.flight_recorder
                assert recorder is not None
                if hand_over:
                    recorder.set_layers([p.name for p in opt.parameters])
                for step in range(1, STEPS + 1):
                    if step == FAULT:
                        fault.scale.set_data(Tensor(FACTOR, ms.float32))
                    rows = slice((step - 1) * BATCH, step * BATCH)
                    loss, grads = step_fn(Tensor(x[rows]), Tensor(y[rows]))
                    opt(grads)
                    squares = [float(np.square(g.asnumpy()).sum()) for g in grads]
                    if hand_over:
                        recorder.add_layers(step, np.array(squares))
                    monitor.log_step(
                        step, loss=float(loss.asnumpy()), grad_norm=math.sqrt(sum(squares))
                    )
            _, alert = _first_explained(next(logdir.rglob("alerts.jsonl")).parent)
            forensics = alert["forensics"]
            if hand_over:
                assert "layer_norms" not in forensics
                assert forensics["first_mover"]["name"] == net.norm.gamma.name
                assert forensics["first_mover"]["onset"] == FAULT
            else:
                assert forensics["layer_norms"]["why"] == "loop"
                assert (
                    "monitor.flight_recorder.set_layers(names) once"
                    in (forensics["layer_norms"]["note"])
                )
    finally:
        ms.set_context(mode=previous)
