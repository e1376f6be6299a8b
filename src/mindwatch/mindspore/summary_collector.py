"""``SummaryCollector``: MindSpore's callback of that name, writing a TensorBoard run.

    from mindwatch.mindspore import SummaryCollector   # was: from mindspore.train.callback

    model.train(epochs, ds, callbacks=[SummaryCollector(summary_dir="./summary", collect_freq=50)])

A thin front over :class:`~mindwatch.mindspore.TrainingMonitor` with MindSpore 2.10's
signature and meanings: everything ``TrainingMonitor`` writes (``train/loss``,
``train/lr``, ``train/grad_norm`` with :class:`~mindwatch.mindspore.TrainOneStepWithGradNormCell`,
step time, throughput, hparams, evaluation results), every ``collect_freq`` steps.
``collect_specified_data`` (MindSpore's dict) maps to what mindwatch records:

=========================  ==========================================================
MindSpore key              mindwatch
=========================  ==========================================================
``collect_metric``         ``train/loss`` (always recorded)
``collect_graph``          the GRAPHS tab: the compiled train graph, once
``collect_train_lineage``  HPARAMS: optimizer, learning rate, batch size, epochs
``collect_eval_lineage``   ``eval/<metric>`` after ``Model.fit`` / ``Model.eval``
``histogram_regular``      HISTOGRAMS / DISTRIBUTIONS of the parameters it matches
                           (``re.search``; without it, the first five parameters, as
                           MindSpore does), every ``collect_freq`` steps
``collect_input_data``,    not recorded: named once in a warning, with the fix
``collect_dataset_graph``,
``collect_landscape``
=========================  ==========================================================

The seeds' list form, ``collect_specified_data=["parameters", "gradients"]`` (which
MindSpore itself rejects), is mindwatch's ``histograms_of``: histograms of those every
``collect_freq`` steps. The network's summary operators (``ops.ScalarSummary``, ...)
are recorded on collected steps, their ``TensorSummary`` data every
``collect_tensor_freq`` steps (by default at most 20 times in the run, and not more
often than the rest, MindSpore's rule). ``custom_lineage_data`` becomes hparams;
``max_file_size`` and ``export_options`` mean what they mean for
:class:`~mindwatch.mindspore.SummaryRecord`. ``config`` takes any other mindwatch
setting (rules, alerts, Prometheus, ...).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import Any, Optional

from mindwatch.common.i18n import _
from mindwatch.config import MonitorConfig
from mindwatch.events.writer import PathLike
from mindwatch.metrics.timing import Every
from mindwatch.mindspore.callback import TrainingMonitor
from mindwatch.mindspore.layers import LayerRecorder
from mindwatch.mindspore.summary_record import SummaryRecord
from mindwatch.mindspore.summary_values import (
    check_export_options,
    drop_network_summaries,
    with_file_size,
)

__all__ = ["SummaryCollector"]

log = logging.getLogger(__name__)

# MindSpore 2.10's SummaryCollector._DEFAULT_SPECIFIED_DATA.
_DEFAULTS: dict[str, Any] = {
    "collect_metric": True,
    "collect_graph": True,
    "collect_train_lineage": True,
    "collect_eval_lineage": True,
    "collect_input_data": True,
    "collect_dataset_graph": True,
    "histogram_regular": None,
    "collect_landscape": None,
}
_UNRECORDED = ("collect_input_data", "collect_dataset_graph", "collect_landscape")
# MindSpore's histograms without histogram_regular: the first five parameters.
_DEFAULT_HISTOGRAM_PARAMS = 5
# MindSpore's TensorSummary budget without collect_tensor_freq: this many steps a run.
_TENSOR_STEPS = 20


def _specified(data: Any) -> dict[str, Any]:
    """MindSpore's dict form of ``collect_specified_data``, checked as MindSpore checks it."""
    if not isinstance(data, dict):
        raise TypeError(
            "For 'SummaryCollector', 'collect_specified_data' should be a dict (MindSpore's "
            "keys) or a list of 'parameters' / 'gradients' (mindwatch's histograms_of), but "
            f"got {type(data).__name__}"
        )
    unexpected = set(data) - set(_DEFAULTS)
    if unexpected:
        raise ValueError(
            f"For 'collect_specified_data', the keys {sorted(unexpected)} are unsupported, "
            f"expect the follow keys: {list(_DEFAULTS)}"
        )
    for key, value in data.items():
        if key == "histogram_regular":
            if value is not None and not isinstance(value, str):
                raise TypeError(
                    f"For 'collect_specified_data', 'histogram_regular' should be a str or "
                    f"None, but got {type(value).__name__}"
                )
        elif key != "collect_landscape" and not isinstance(value, bool):
            raise TypeError(
                f"For 'collect_specified_data', {key!r} should be a bool, "
                f"but got {type(value).__name__}"
            )
    return dict(data)


def _lineage(data: Any) -> dict[str, Any]:
    """``custom_lineage_data``: str keys, str / int / float values (MindSpore's check)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TypeError(
            "For 'SummaryCollector', 'custom_lineage_data' should be a dict, "
            f"but got {type(data).__name__}"
        )
    for key, value in data.items():
        if not isinstance(key, str) or isinstance(value, bool):
            raise TypeError(
                "For 'custom_lineage_data', the keys should be str and the values str, int "
                f"or float, but got {key!r}: {value!r}"
            )
        if not isinstance(value, (str, int, float)):
            raise TypeError(
                "For 'custom_lineage_data', the values should be str, int or float, "
                f"but got {key!r}: {type(value).__name__}"
            )
    return dict(data)


class SummaryCollector(TrainingMonitor):
    """MindSpore's ``SummaryCollector(summary_dir, collect_freq=10, ...)`` (see the module).

    Args:
        summary_dir: the run folder (created).
        collect_freq: record every this many steps (MindSpore's default, 10).
        num_process: accepted for MindSpore's signature; one background thread writes.
        collect_specified_data: MindSpore's dict, or a list of ``parameters`` /
            ``gradients`` to histogram.
        keep_default_action: with ``collect_specified_data``, also collect what it does
            not name as by default (True) or only what it names (False).
        custom_lineage_data: ``{str: str | int | float}``, shown as hparams.
        collect_tensor_freq: steps between recordings of the network's
            ``TensorSummary`` data.
        max_file_size: each event file stays below this many bytes (a new one is
            started).
        export_options: ``{"tensor_format": "npy"}``: the network's tensor summaries
            are also saved as ``.npy`` files, as MindSpore does.
        config: any other :class:`~mindwatch.MonitorConfig` field (a dict).
    """

    def __init__(  # noqa: PLR0917 - MindSpore's positional signature
        self,
        summary_dir: PathLike,
        collect_freq: int = 10,
        num_process: int = 32,
        collect_specified_data: Any = None,
        keep_default_action: bool = True,
        custom_lineage_data: Optional[dict[str, Any]] = None,
        collect_tensor_freq: Optional[int] = None,
        max_file_size: Optional[int] = None,
        export_options: Optional[dict[str, Optional[str]]] = None,
        *,
        config: Optional[Mapping[str, Any]] = None,
    ) -> None:
        if not isinstance(keep_default_action, bool):
            raise TypeError(
                "For 'SummaryCollector', 'keep_default_action' should be a bool, "
                f"but got {type(keep_default_action).__name__}"
            )
        for name, freq in (
            ("collect_freq", collect_freq),
            ("collect_tensor_freq", collect_tensor_freq),
        ):
            if freq is not None and (
                isinstance(freq, bool) or not isinstance(freq, int) or freq < 1
            ):
                raise ValueError(
                    f"For 'SummaryCollector', '{name}' should be an int >= 1 (steps), "
                    f"but got {freq!r}"
                )
        self._export_options = check_export_options(export_options)
        settings: dict[str, Any] = dict(config or {})
        settings["logdir"] = os.fspath(summary_dir)
        settings["collect_freq"] = collect_freq
        hparams = {**_lineage(custom_lineage_data), **dict(settings.get("hparams") or {})}
        if hparams:
            settings["hparams"] = hparams
        self._collect_graph = False
        first: Optional[int] = None
        if isinstance(collect_specified_data, (list, tuple)):
            # The seeds' form: mindwatch's histograms_of (the config paces and checks it).
            settings["collect_specified_data"] = list(collect_specified_data)
        else:
            given = _specified(collect_specified_data or {})
            chosen = {**_DEFAULTS, **given} if keep_default_action else given
            self._collect_graph = bool(chosen.get("collect_graph"))
            regular = chosen.get("histogram_regular")
            if regular is not None or keep_default_action:
                settings.setdefault("histograms_of", ["parameters"])
                if regular is not None:
                    settings["target"] = [regular]
                else:
                    first = _DEFAULT_HISTOGRAM_PARAMS
            self._tell_unrecorded(given)
        cfg = with_file_size(MonitorConfig.from_any(settings), _file_size(max_file_size))
        self._first_params = first
        super().__init__(cfg)
        self._collect_tensor_freq = collect_tensor_freq
        self._tensor_due: Optional[Every] = None
        self._ops_due = Every(collect_freq)
        self._record: Optional[SummaryRecord] = None

    def _tell_unrecorded(self, given: Mapping[str, Any]) -> None:
        """The keys asked for that mindwatch does not record: one warning, with the fix."""
        named = [key for key in _UNRECORDED if given.get(key)]
        if given.get("collect_metric") is False:
            log.warning(
                _(
                    "mindwatch: SummaryCollector: collect_metric=False: the loss is always "
                    "recorded (train/loss); drop the key to silence this"
                )
            )
        if named:
            log.warning(
                _(
                    "mindwatch: SummaryCollector: {keys} not recorded: TensorBoard has no "
                    "view for them (MindInsight's); set them to False or drop them from "
                    "collect_specified_data to silence this"
                ).format(keys=", ".join(named))
            )

    def _layer_recorder(self, train_network: Any) -> LayerRecorder:
        recorder = super()._layer_recorder(train_network)
        recorder.first = self._first_params
        return recorder

    def on_train_begin(self, run_context: Any) -> None:
        super().on_train_begin(run_context)
        if self._collect_tensor_freq is None:
            cb = run_context.original_args()
            total = int(cb.get("epoch_num") or 0) * int(cb.get("batch_num") or 0)
            freq = max(self.config.collect_freq, math.ceil(total / _TENSOR_STEPS))
        else:
            freq = self._collect_tensor_freq
        self._tensor_due = Every(freq)

    def on_train_step_end(self, run_context: Any) -> None:
        super().on_train_step_end(run_context)
        step = self._prev_step
        if step is None or not self._ops_due(step):
            drop_network_summaries()
            return
        cb = run_context.original_args()
        tensors = self._tensor_due is None or self._tensor_due(step)
        self._guarded(
            "summary operators",
            lambda: self._summary_record(cb).record(
                step,
                train_network=cb.get("train_network"),
                plugin_filter=None if tensors else (lambda plugin: plugin != "tensor"),
            ),
        )

    def _summary_record(self, cb: Any) -> SummaryRecord:
        """What the network's summary operators and graph go through (this run's Monitor)."""
        if self._record is None:
            network = cb.get("train_network") if self._collect_graph else None
            self._record = SummaryRecord(
                self.logdir,
                network=network,
                export_options=self._export_options,
                monitor=self.monitor,
            )
        return self._record


def _file_size(size: Optional[int]) -> Optional[int]:
    """MindSpore's ``max_file_size``: an int or None; a negative one means no limit."""
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
        raise TypeError(
            f"For 'SummaryCollector', the 'max_file_size' should be int type, but got {type(size)}"
        )
    return None if size is None or size < 0 else size
