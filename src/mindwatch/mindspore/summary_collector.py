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
                           at the start of the name (``re.match``, as MindSpore; None:
                           the first five parameters), every ``collect_freq`` steps
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

Every argument is checked as MindSpore 2.10 checks it, in its order, and a misuse
raises MindSpore's exception with MindSpore's message
(:mod:`mindwatch.mindspore.summary_checks`); ``collect_landscape`` is checked in full
though no landscape is recorded. What mindwatch does otherwise, on purpose, is listed in
``docs/coming-from-summarycollector.md``.
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
from mindwatch.mindspore.summary_checks import (
    DEFAULT_SPECIFIED_DATA,
    check_collect_landscape,
    check_custom_lineage,
    check_positive,
    check_value_type,
    make_directory,
    match_anchored,
    process_export_options,
    process_specified_data,
)
from mindwatch.mindspore.summary_record import SummaryRecord
from mindwatch.mindspore.summary_values import (
    drop_network_summaries,
    note_small_file_size,
    with_file_size,
)

__all__ = ["SummaryCollector"]

log = logging.getLogger(__name__)

_UNRECORDED = ("collect_input_data", "collect_dataset_graph", "collect_landscape")
# MindSpore's histograms without histogram_regular: the first five parameters.
_DEFAULT_HISTOGRAM_PARAMS = 5
# MindSpore's TensorSummary budget without collect_tensor_freq: this many steps a run.
_TENSOR_STEPS = 20


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

    Raises:
        TypeError, ValueError, NotADirectoryError: what MindSpore raises for the same
            arguments, with its messages (:mod:`mindwatch.mindspore.summary_checks`);
            ValueError when training (or evaluation) begins with two SummaryCollectors in
            the callback list, as in MindSpore.
    """

    # MindSpore's name and value (its own tests read it; a change here changes what
    # keep_default_action adds, as in MindSpore).
    _DEFAULT_SPECIFIED_DATA = DEFAULT_SPECIFIED_DATA

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
        # MindSpore's checks, in its order, with its exceptions and messages.
        make_directory(summary_dir, "summary_dir")
        check_positive("collect_freq", collect_freq)
        check_positive("collect_tensor_freq", collect_tensor_freq, allow_none=True)
        check_positive("max_file_size", max_file_size, allow_none=True)
        self._export_options = process_export_options(export_options)
        check_value_type("keep_default_action", keep_default_action, bool)
        seeds_list = isinstance(collect_specified_data, (list, tuple))
        chosen: dict[str, Any] = {}
        if not seeds_list:
            chosen = process_specified_data(collect_specified_data, keep_default_action)
            check_collect_landscape(chosen.get("collect_landscape"))
        # MindSpore's name: the processed dict (what its own tests read).
        self._collect_specified_data: Any = list(collect_specified_data) if seeds_list else chosen
        lineage = check_custom_lineage(custom_lineage_data)
        note_small_file_size(max_file_size, log)
        settings: dict[str, Any] = dict(config or {})
        settings["logdir"] = os.fspath(summary_dir)
        settings["collect_freq"] = collect_freq
        hparams = {**lineage, **dict(settings.get("hparams") or {})}
        if hparams:
            settings["hparams"] = hparams
        self._collect_graph = False
        first: Optional[int] = None
        if seeds_list:
            # The seeds' form: mindwatch's histograms_of (the config paces and checks it).
            settings["collect_specified_data"] = list(collect_specified_data)
        else:
            self._collect_graph = bool(chosen.get("collect_graph"))
            if "histogram_regular" in chosen:  # MindSpore: no key, no histograms
                settings.setdefault("histograms_of", ["parameters"])
                regular = chosen["histogram_regular"]
                if regular is not None:
                    settings["target"] = [match_anchored(regular)]
                else:
                    first = _DEFAULT_HISTOGRAM_PARAMS
            self._tell_unrecorded(collect_specified_data or {})
        cfg = with_file_size(MonitorConfig.from_any(settings), max_file_size)
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

    def _check_callbacks(self, cb_params: Any) -> None:
        """MindSpore's rule: one SummaryCollector a callback list (by class name, so
        MindSpore's and mindwatch's count together). Two would write two runs of the
        same training, each half what MindSpore users expect of one."""
        callbacks = cb_params.get("list_callback") or ()
        name = type(self).__name__
        if sum(type(callback).__name__ == name for callback in callbacks) > 1:
            raise ValueError(
                f"There are more than one {name} instance in callback list,"
                f"but expected only one {name} instance."
            )

    def on_eval_begin(self, run_context: Any) -> None:
        self._check_callbacks(run_context.original_args())
        super().on_eval_begin(run_context)

    def on_train_begin(self, run_context: Any) -> None:
        self._check_callbacks(run_context.original_args())
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
