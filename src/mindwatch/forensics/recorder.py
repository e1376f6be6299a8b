"""``FlightRecorder``: the last K steps of what explains a spike, kept in memory only.

Per step it holds the values the rules already see (the loss, learning rate, loss scale,
global gradient norm, any ``max_attention_logit`` series), the per-parameter squared
gradient norms the train cell returns (mindwatch's ``TrainOneStepWithGradNormCell`` and
``build_model`` by default, MindFormers' cells with ``local_norm``), the batch's sample
ids, and the ids of the samples whose inputs were not finite. When nothing gives it the
per-parameter norms, it knows why (:attr:`FlightRecorder.layers_missing`), so an alert
can say that no layer was recorded, and how to record them, instead of "no layer
departed". Nothing is written per
step: on an alert, :meth:`window` hands the analysis (:mod:`mindwatch.forensics.analysis`)
a copy of the steps up to the alert.

Two threads feed it. The training thread appends the squared norms as the framework
tensor it got (no device-to-host copy: they are converted, a few hundred small arrays,
only when an alert asks for a window) and the sample ids; the pipeline's thread appends
the scalars. Each kind is a ``deque`` of bounded length (``capacity``): appending is
one C call under the GIL, copying one for a window is another, so neither thread
locks, and memory is flat however long the run: K steps of the cell's vector (4 bytes
a parameter in float32), the batch's ids and a few scalars, 2-3 KB a step for 200
parameters and 32 ids (``benchmarks/recorder_memory.py``). Under data parallelism every
rank keeps its own recorder.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import numpy as np

__all__ = ["SCALARS", "FlightRecorder", "Window", "recorded_scalars"]

# The scalars a window keeps, by the names ``log_step`` gives them (and the tags the
# pipeline writes), and any tag holding this marker (MindFormers' and mindwatch's
# max attention logit series).
SCALARS = (
    "loss",
    "train/loss",
    "lr",
    "loss_scale",
    "train/loss_scale",
    "grad_norm",
    "train/grad_norm",
)
_ALIASES = {"train/loss": "loss", "train/loss_scale": "loss_scale", "train/grad_norm": "grad_norm"}
_LOGIT_MARK = "max_attention_logit"


def recorded_scalars(
    values: Union[Mapping[str, float], Iterable[tuple[str, float]]],
) -> dict[str, float]:
    """The scalars of one step a recorder keeps, under their short names (``values``:
    a mapping, or the pipeline's ``(tag, value)`` pairs)."""
    kept: dict[str, float] = {}
    pairs = values.items() if isinstance(values, Mapping) else values
    for name, value in pairs:
        if name in SCALARS or _LOGIT_MARK in name:
            kept[_ALIASES.get(name, name)] = float(value)
    return kept


@dataclass
class Window:
    """The recorder's steps up to an alert, as arrays (NaN where a step lacks a value).

    ``steps``: ascending; ``scalars[name]``: one value per step; ``layers``: a
    (steps x parameters) array of *norms* (the square roots of what the cell returned),
    or None when the cell returns none; ``layer_names`` in the cell's order;
    ``sample_ids[step]`` and ``nonfinite_samples[step]`` where known.
    ``scalars_logged[name]`` and ``layers_logged`` (same shapes) are True where a value
    was recorded: they tell a step without a value (a series logged every other step, a
    step whose cell output held no norms) from a value that is NaN. A series missing
    from ``scalars_logged`` (or ``layers_logged`` None) counts as recorded at every step.
    ``layers_missing``: why no per-parameter norms were recorded (see
    :attr:`FlightRecorder.layers_missing`), None when they were."""

    steps: list[int]
    scalars: dict[str, np.ndarray[Any, Any]]
    layers: Optional[np.ndarray[Any, Any]]
    layer_names: list[str]
    sample_ids: dict[int, list[Any]] = field(default_factory=dict)
    nonfinite_samples: dict[int, list[Any]] = field(default_factory=dict)
    layers_nonfinite: dict[int, list[int]] = field(default_factory=dict)
    scalars_logged: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    layers_logged: Optional[np.ndarray[Any, Any]] = None
    layers_missing: Optional[dict[str, str]] = None

    def index(self, step: int) -> Optional[int]:
        """The row of ``step``, or None."""
        try:
            return self.steps.index(step)
        except ValueError:
            return None


class FlightRecorder:
    """A ring of the last ``capacity`` steps (see the module docs).

    Args:
        capacity: steps kept (the ``alerts.forensics.window`` setting).

    ``layers_missing`` is None once :meth:`set_layers` named the parameters; before,
    ``{"why": "loop"}`` (nothing handed it any: a loop of the user's own), or what
    :meth:`no_layers` said (``{"why": ..., "cell": ...}``: the MindSpore adapter, for a
    train cell that returns none).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self._scalars: deque[tuple[int, dict[str, float]]] = deque(maxlen=self.capacity)
        self._layers: deque[tuple[int, Any]] = deque(maxlen=self.capacity)
        self._ids: deque[tuple[int, list[Any]]] = deque(maxlen=self.capacity)
        self._bad: deque[tuple[int, list[Any]]] = deque(maxlen=self.capacity)
        self.layer_names: list[str] = []
        self.layers_missing: Optional[dict[str, str]] = {"why": "loop"}
        self._to_array: Callable[[Any], Optional[np.ndarray[Any, Any]]] = _as_array

    def set_layers(
        self,
        names: Sequence[str],
        to_array: Optional[Callable[[Any], Optional[np.ndarray[Any, Any]]]] = None,
    ) -> None:
        """The parameters the squared norms are of, in the cell's order, and how to turn
        one recorded vector (a framework tensor) into a flat float64 array."""
        self.layer_names = list(names)
        if self.layer_names:
            self.layers_missing = None
        if to_array is not None:
            self._to_array = to_array

    def no_layers(self, why: str, cell: str = "") -> None:
        """No per-parameter norms will come, and why: ``why`` one of the reasons
        :func:`mindwatch.alerts.movers.no_layers_note` words (``opt_out``, ``cell``,
        ``mindformers``, ``loop``), ``cell`` the train cell's class name."""
        self.layer_names = []
        self.layers_missing = {"why": why, "cell": cell}

    def add_layers(self, step: int, squares: Any) -> None:
        """Training thread: the step's squared gradient norms, as the cell returned them."""
        self._layers.append((step, squares))

    def add_sample_ids(self, step: int, ids: list[Any]) -> None:
        self._ids.append((step, ids))

    def add_nonfinite_samples(self, step: int, ids: list[Any]) -> None:
        """The samples of ``step``'s batch whose inputs held NaN or Inf."""
        self._bad.append((step, ids))

    def add_scalars(
        self, step: int, values: Union[Mapping[str, float], Iterable[tuple[str, float]]]
    ) -> None:
        """Pipeline thread: the step's values (only :data:`SCALARS` and logits kept)."""
        kept = recorded_scalars(values)
        if kept:
            self._scalars.append((step, kept))

    def __len__(self) -> int:
        return max(len(self._scalars), len(self._layers))

    def window(self, until: int) -> Window:
        """The recorded steps up to and including ``until``, as arrays."""
        scalars = [(s, v) for s, v in self._scalars.copy() if s <= until]
        layers = [(s, v) for s, v in self._layers.copy() if s <= until]
        steps = sorted({s for s, _ in scalars} | {s for s, _ in layers})
        row = {s: i for i, s in enumerate(steps)}
        names = sorted({name for _, v in scalars for name in v})
        series = {name: np.full(len(steps), math.nan) for name in names}
        logged = {name: np.zeros(len(steps), dtype=bool) for name in names}
        for s, values in scalars:
            for name, value in values.items():
                series[name][row[s]] = value
                logged[name][row[s]] = True
        matrix = None
        matrix_logged = None
        broken: dict[int, list[int]] = {}
        width = len(self.layer_names)
        if layers and width:
            matrix = np.full((len(steps), width), math.nan)
            matrix_logged = np.zeros((len(steps), width), dtype=bool)
            for s, squares in layers:
                data = self._to_array(squares)
                if data is None:
                    continue
                data = data[:width]
                bad = ~np.isfinite(data)
                if bad.any():
                    broken[s] = [int(j) for j in np.flatnonzero(bad)]
                with np.errstate(invalid="ignore"):
                    matrix[row[s], : data.size] = np.sqrt(np.where(data >= 0, data, math.nan))
                matrix_logged[row[s], : data.size] = True
        ids = {s: v for s, v in self._ids.copy() if s <= until}
        bad_ids = {s: v for s, v in self._bad.copy() if s <= until}
        missing = dict(self.layers_missing) if self.layers_missing is not None else None
        return Window(
            steps,
            series,
            matrix,
            list(self.layer_names),
            ids,
            bad_ids,
            broken,
            scalars_logged=logged,
            layers_logged=matrix_logged,
            layers_missing=missing,
        )


def _as_array(data: Any) -> Optional[np.ndarray[Any, Any]]:
    if data is None:
        return None
    if hasattr(data, "asnumpy"):
        data = data.asnumpy()
    return np.asarray(data, dtype=np.float64).reshape(-1)
