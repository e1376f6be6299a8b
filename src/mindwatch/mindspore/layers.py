"""Per-layer norms, the global parameter norm and histograms, on recorded steps only.

Everything here runs only on the steps the config asks for (``layer_norms_every``,
``param_norm_every``, ``histogram_every_steps`` / ``histogram_interval``); any other
step pays one integer comparison per setting. What each recorded step costs:

* ``layers/param_norm/<param>`` and ``train/param_norm``: one device-to-host copy of
  the chosen (all, for the global norm) parameters and a float64 norm on the host;
* ``layers/grad_norm/<param>``: one copy of a vector of squared norms that the train
  cell returns every step anyway:
  :class:`~mindwatch.mindspore.cells.TrainOneStepWithGradNormCell` (by default, the
  terms of the global norm; not with ``layer_norms=False``) or MindFormers' cells
  (``local_norm=True``, this rank's gradients before the gradient reducer);
* parameter histograms: a copy of each chosen parameter; bucketing runs on the writer's
  thread;
* gradient histograms: one extra forward and backward pass of the step's batch (a small
  compiled graph, built on the first recorded step), at the weights after that step's
  update (the applied gradients are gone by then: keeping them would double the
  parameter memory and put them into every checkpoint). Non-trainable state the pass
  would change (BatchNorm's moving statistics) is saved and restored around it; dropout
  draws extra random numbers on those steps. Under data parallelism they are this
  rank's local gradients. In dataset sink mode, where the callback never sees the
  batch, they are skipped with one warning.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np
from mindspore import Tensor

from mindwatch.common.warn import WarnOnce
from mindwatch.config import MonitorConfig
from mindwatch.metrics.selection import select_names
from mindwatch.metrics.timing import Every
from mindwatch.mindspore.outputs import squared_norms_array
from mindwatch.monitor import Monitor

__all__ = ["LayerRecorder", "optimizer_states"]

# Optimizer state tuples, aligned with optimizer.parameters, and the tag each one gets.
_STATES = (
    (("moment1", "moments1", "exp_avg"), "adam_m_norm"),
    (("moment2", "moments2", "exp_avg_sq"), "adam_v_norm"),
    (("moments",), "momentum_norm"),
)


def optimizer_states(optimizer: Any) -> list[tuple[str, list[Any]]]:
    """``[(tag kind, [state per parameter])]`` for the optimizer's per-parameter state."""
    found = []
    count = len(getattr(optimizer, "parameters", ()) or ())
    for names, kind in _STATES:
        for name in names:
            state = getattr(optimizer, name, None)
            if state is not None and len(state) == count:
                found.append((kind, list(state)))
                break
    return found


log = logging.getLogger(__name__)


class LayerRecorder:
    """Records the per-parameter views of one training run into a Monitor."""

    def __init__(self, config: MonitorConfig) -> None:
        self.config = config
        self._names: list[str] = []
        self._params: list[Any] = []
        self._chosen: list[int] = []
        self._grad_index: dict[int, int] = {}  # chosen parameter -> its squared-norm slot
        self._grad_fn: Any = None
        self._warn_once = WarnOnce(log)
        self._layer_due = Every(config.layer_norms_every)
        self._param_due = Every(config.param_norm_every)
        self._hist_due = Every(config.histogram_every_steps)
        self._states: list[tuple[str, dict[str, Any]]] = []
        self.histogram_steps = 0  # steps whose histograms were written
        # Only the first this many chosen parameters (SummaryCollector's default: five).
        self.first: Optional[int] = None

    @property
    def active(self) -> bool:
        c = self.config
        every = (c.layer_norms_every, c.param_norm_every)
        return any(every) or bool(c.histogram_interval or c.histogram_every_steps)

    def begin(self, train_network: Any, network: Any = None, optimizer: Any = None) -> None:
        """Learn the model's parameters (at train begin).

        They are the weights the train cell optimizes (``train_network.weights``), or the
        network's trainable parameters: not ``train_network.trainable_params()``, which
        also holds the optimizer's state (moments, step counter, learning rate).
        """
        weights = getattr(train_network, "weights", None)
        if weights is not None:
            self._params = list(weights)
        elif network is not None:
            self._params = list(network.trainable_params())
        else:
            return
        self._names = [p.name for p in self._params]
        self._chosen = select_names(self._names, self.config.target, self.config.invert)
        if self.first is not None:
            self._chosen = self._chosen[: self.first]
        order = {w.name: j for j, w in enumerate(weights)} if weights is not None else {}
        self._grad_index = {
            i: order[self._names[i]] for i in self._chosen if self._names[i] in order
        }
        self._states = []
        if self.config.optimizer_state_norms and optimizer is not None:
            names = [p.name for p in optimizer.parameters]
            self._states = [
                (kind, dict(zip(names, state))) for kind, state in optimizer_states(optimizer)
            ]
            if not self._states:
                self._warn(
                    "states",
                    f"optimizer_state_norms: {type(optimizer).__name__} has no per-parameter "
                    "moments mindwatch knows (Adam, AdamWeightDecay, Lamb, Momentum)",
                )
        if self.active and not self._chosen:
            self._warn(
                "target",
                f"target {self.config.target} (invert={self.config.invert}) matches none "
                f"of the {len(self._names)} parameters",
            )

    def tell_missing_histograms(self, steps: int, epochs: int) -> None:
        """At the end of training: histograms were asked for, and none came because the
        run was shorter than their interval; say so, with the fix. (Other reasons, a
        ``target`` matching nothing, were told when they arose.)"""
        c = self.config
        if self.histogram_steps:
            return
        if c.histogram_every_steps and steps < c.histogram_every_steps:
            asked = f"histogram_every_steps is {c.histogram_every_steps}"
            ran, fix = f"{steps} step(s)", "lower histogram_every_steps"
        elif c.histogram_interval and epochs < c.histogram_interval:
            asked = f"histogram_interval is {c.histogram_interval} epoch(s)"
            ran, fix = f"{epochs} epoch(s)", "lower histogram_interval"
        else:
            return
        self._warn(
            "no_hist",
            f"no histogram written: {asked} but training ended after {ran}; {fix} (a "
            "config naming collect_specified_data without an interval collects them "
            "every collect_freq steps)",
        )

    def histograms_due(self, step: int) -> bool:
        return self._hist_due(step)

    def epoch_histograms_due(self, epoch: int) -> bool:
        every = self.config.histogram_interval
        return every is not None and epoch % every == 0

    def record(
        self,
        monitor: Monitor,
        step: int,
        grad_squares: Any,
        *,
        histograms: bool,
        norms: bool = True,
        loss_net: Any = None,
        batch: Any = None,
    ) -> None:
        """Write what is due at ``step``. ``grad_squares``: the squared norm of every
        gradient, in the order of the train cell's ``weights``, as the train cell returned
        them (copied to the host only when due), or None when it returns none."""
        scalars: dict[str, float] = {}
        norm_of: dict[int, float] = {}  # a parameter's norm, copied to the host once

        def param_norm(i: int) -> float:
            if i not in norm_of:
                norm_of[i] = _norm(self._params[i])
            return norm_of[i]

        if norms and self._layer_due(step):
            if "parameters" in self.config.layer_norms_of:
                for i in self._chosen:
                    scalars[f"layers/param_norm/{self._names[i]}"] = param_norm(i)
            if "gradients" in self.config.layer_norms_of:
                scalars.update(self._grad_norms(grad_squares))
            for kind, states in self._states:
                for i in self._chosen:
                    state = states.get(self._names[i])
                    if state is not None:
                        scalars[f"layers/{kind}/{self._names[i]}"] = _norm(state)
        if norms and self._param_due(step):
            total = sum(param_norm(i) ** 2 for i in range(len(self._params)))
            scalars["train/param_norm"] = float(np.sqrt(total))
        if scalars:
            monitor.log_scalars(step, scalars)
        if histograms:
            self._histograms(monitor, step, loss_net, batch)

    def _grad_norms(self, grad_squares: Any) -> dict[str, float]:
        squares = squared_norms_array(grad_squares)
        if squares is None:
            self._warn(
                "grad_norm",
                "layers/grad_norm needs a train cell that returns them: mindwatch's "
                "build_model(net, loss_fn, optimizer) or TrainOneStepWithGradNormCell("
                "loss_net, optimizer) (by default; not with layer_norms=False), or "
                "MindFormers' runner_wrapper local_norm: True; only layers/param_norm is "
                "written",
            )
            return {}
        out = {}
        for i, j in self._grad_index.items():
            if j < squares.size:
                out[f"layers/grad_norm/{self._names[i]}"] = float(np.sqrt(squares[j]))
        return out

    def _histograms(self, monitor: Monitor, step: int, loss_net: Any, batch: Any) -> None:
        kinds = self.config.histograms_of
        chosen = [self._params[i] for i in self._chosen]
        self.histogram_steps += bool(chosen and kinds)
        if "parameters" in kinds:
            for param in chosen:
                monitor.log_histogram(f"parameters/{param.name}", param.asnumpy(), step)
        if "gradients" in kinds and chosen:
            if loss_net is None or not batch:
                self._warn(
                    "grad_hist",
                    "gradient histograms need the step's batch, which MindSpore does not "
                    "pass to callbacks in dataset sink mode; only parameters are shown. "
                    "Train with dataset_sink_mode=False to get them, or set histograms_of: "
                    "[parameters] to silence this",
                )
                return
            if self._grad_fn is None:
                self._grad_fn = _gradients_cell(loss_net, chosen)
            # The extra pass must not change the model: keep the non-trainable state
            # (BatchNorm's moving statistics) and put it back afterwards.
            state = [
                (p, p.asnumpy().copy()) for p in loss_net.get_parameters() if not p.requires_grad
            ]
            try:
                grads = self._grad_fn(*batch)
            finally:
                for param, value in state:
                    param.set_data(Tensor(value))
            for param, grad in zip(chosen, grads):
                monitor.log_histogram(f"gradients/{param.name}", grad.asnumpy(), step)

    def _warn(self, key: str, message: str) -> None:
        self._warn_once(key, "mindwatch: %s", message)


def _gradients_cell(loss_net: Any, params: list[Any]) -> Any:
    """A compiled cell returning d(loss)/d(params): one graph, built once (about 3 ms a
    call on the benchmark MLP, where the functional ``ms.value_and_grad`` outside a
    graph took about 50 ms and slowed the training steps after it)."""
    from mindspore import ParameterTuple, nn, ops

    class GradientsOf(nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            # auto_prefix=False: adopting the user's network must not rename its
            # parameters (their names are what checkpoints are keyed by).
            super().__init__(auto_prefix=False)
            self.network = loss_net
            self.weights = ParameterTuple(params)
            self.grad = ops.GradOperation(get_by_list=True)

        def construct(self, *inputs: Any) -> Any:
            return self.grad(self.network, self.weights)(*inputs)

    return GradientsOf()


def _norm(param: Any) -> float:
    # No np.dot: a BLAS call leaves OpenBLAS's worker threads spinning for a while,
    # and on a small machine they then compete with MindSpore's own threads (measured:
    # the gradient graph right after took 25-80 ms instead of 6).
    data = np.asarray(param.asnumpy()).reshape(-1)
    return float(np.sqrt(np.square(data, dtype=np.float64).sum()))
