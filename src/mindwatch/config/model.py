"""``MonitorConfig``: one validated, frozen description of what mindwatch does.

Validated once, at the edge, with pydantic; frozen afterwards. It is built from:

* a dict or a YAML file of its own fields (:meth:`MonitorConfig.from_any`,
  :meth:`MonitorConfig.from_yaml`);
* the keys users already know from MindSpore's ``SummaryCollector`` and the seeds'
  ``TensorBoard`` callback (``summary_dir``/``log_dir``, ``collect_freq``,
  ``update_time``), accepted as aliases;
* a MindFormers training YAML (its ``monitor_config``, ``tensorboard`` and ``callbacks:``
  sections; see :mod:`mindwatch.config.mindformers`).

Every mistake is reported at once, before training starts, as a
:class:`~mindwatch.config.errors.ConfigError` naming the key path, the bad value, what is
allowed and, for a misspelt key, the closest valid one. Settings MindSpore accepts
silently and then records nothing with (``collect_freq: 0``) are errors here. Keys of
the seeds' ``monitor_config`` that are not about monitoring (``save_graphs``,
``export_kwargs``, ...) are accepted and named in one warning, so that config works as it
is. ``docs/config.md`` is generated from the field descriptions below
(``python docs/gen_config_reference.py``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mindwatch.common.logdirs import local_path
from mindwatch.config.alerts import RULE_NAMES, AlertSettings
from mindwatch.config.errors import ConfigError, describe
from mindwatch.config.hardware import HardwareSettings
from mindwatch.config.mindformers import is_mindformers_yaml, translate
from mindwatch.config.prometheus import PrometheusSettings
from mindwatch.config.settings import DAY, HOUR, Settings
from mindwatch.config.yaml import load_yaml

__all__ = ["CheckpointSettings", "HistogramKind", "MonitorConfig", "ReduceKind", "canonical_key"]

log = logging.getLogger(__name__)


HistogramKind = Literal["parameters", "gradients"]
# How a metric is combined across data-parallel ranks (see mindwatch.aggregate).
ReduceKind = Literal["mean", "sum", "max", "min", "once", "per_rank"]
_HISTOGRAM_KINDS: tuple[HistogramKind, ...] = ("parameters", "gradients")
MAX_AGGREGATE_EVERY = 10_000
# Seconds between two progress lines when print_every is left at its default (a field's
# description says why this value).
PRINT_SECS = 1.0
# An hparam is the user's record, not a setting: a non-finite value (clip: .inf, "no
# clipping") is kept as it is, unlike every other float of the config.
_HParamFloat = Annotated[float, Field(allow_inf_nan=True)]


class CheckpointSettings(Settings):
    """Checkpoints saved by ``build_callbacks`` (MindSpore's ``ModelCheckpoint``)."""

    save_checkpoint_steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="Save a checkpoint every this many steps (None: no checkpoints).",
    )
    keep_checkpoint_max: int = Field(
        default=5, ge=1, description="Keep at most this many checkpoint files."
    )
    prefix: str = Field(default="checkpoint", min_length=1, description="File name prefix.")
    directory: Optional[str] = Field(
        default=None,
        description="Folder for checkpoint files (None: '<logdir>/checkpoints').",
    )


class MonitorConfig(Settings):
    """What to collect, how often, and where it goes."""

    model_config = ConfigDict(validate_default=True, populate_by_name=True)

    logdir: Optional[str] = Field(
        default=None,
        min_length=1,
        validation_alias=AliasChoices("logdir", "log_dir", "summary_dir", "tensorboard_dir"),
        description="Run folder for event files, run.json and alerts (aliases: log_dir, "
        "summary_dir, tensorboard_dir). Created with its parents; resolved to an absolute "
        "path when the monitor is created, so a later os.chdir does not move it. With "
        "run_name, it is the root below which a new run folder is made.",
    )
    run_name: Optional[str] = Field(
        default=None,
        min_length=1,
        description="Make a new run folder '<logdir>/<YYYYmmdd-HHMMSS>_<run_name>"
        "[_<key>-<value>...]' (ASCII-safe, unique) instead of writing into logdir itself.",
    )
    collect_freq: int = Field(
        default=1,
        ge=1,
        validation_alias=AliasChoices("collect_freq", "step_interval", "log_every"),
        description="Record training scalars every this many steps (aliases: step_interval, "
        "log_every). Steps in between cost one integer comparison; the recorded step's "
        "step time and throughput cover all the steps since the previous record.",
    )
    flush_secs: float = Field(
        default=2.0,
        gt=0,
        le=HOUR,
        validation_alias=AliasChoices("flush_secs", "update_time"),
        description="Longest delay, in seconds, between logging a value and handing it to "
        "the OS, i.e. what a SIGKILL can lose at most (alias: update_time). At most 3600 "
        "(an hour): a longer delay only risks more data and saves nothing, as a write "
        "costs the same whenever it happens.",
    )
    max_file_size: Optional[int] = Field(
        default=None,
        ge=1024,
        description="Start a new event file when the current one reaches this many bytes "
        "(None: never rotate).",
    )
    filename_suffix: str = Field(
        default="",
        max_length=200,
        description="Appended to the name of every event file the run writes "
        "(events.out.tfevents.<stamp>.<host>.<pid>.<n><suffix>), as torch's "
        "SummaryWriter(filename_suffix=...) does; no '/', '\\' or NUL.",
    )
    max_queue: int = Field(
        default=100_000,
        ge=1,
        description="Steps that may wait for the background thread, and items for the "
        "writer (bounds memory). When full, the caller waits up to max_block_secs for room.",
    )
    max_block_secs: float = Field(
        default=1.0,
        ge=0,
        le=600,
        description="Longest time a full queue may make the training thread (or, for the "
        "writer's, the background thread) wait for room; after that, new points are dropped "
        "(and counted) until it catches up. At most 600 (ten minutes): a disk that takes "
        "longer is hung, and training must go on without it.",
    )
    print_every: int = Field(
        default=10,
        ge=0,
        description="Print a progress line every this many steps, and at the last step (0: "
        "never); print_secs paces them in time too.",
    )
    print_secs: float = Field(
        default=PRINT_SECS,
        ge=0,
        le=HOUR,
        description="At least this many seconds between two progress lines (or updates of "
        "the bar), judged by the steps' own times; the last step is always printed. When "
        "print_every is left at its default this is 1 s, so a loop of fast steps prints "
        "about a line a second, not one every 10 steps (tqdm redraws its bar in place at "
        "most every 0.1 s, but a line stays in the log); when print_every is set it is 0 "
        "unless given, so print_every means every that many steps exactly. At most 3600.",
    )
    progress: Literal["auto", "bar", "line", "off"] = Field(
        default="auto",
        description="'bar': a progress bar with ETA (needs a known total); 'line': one "
        "plain line every print_every steps; 'auto': a bar on a terminal when the total "
        "is known, lines otherwise; 'off': print nothing. Bar and lines fit the width, "
        "dropping the least important values first (the step count and ETA stay): a "
        "terminal's width, else COLUMNS when set, else the whole line (logs, CI).",
    )
    target: list[str] = Field(
        default_factory=lambda: [".*"],
        description="Regular expressions (re.search) on parameter names choosing the "
        "parameters for per-layer norms and histograms, as MindFormers' monitor_config.",
    )
    invert: bool = Field(
        default=False,
        description="Choose the parameters target does NOT match instead.",
    )
    layer_norms_every: Optional[int] = Field(
        default=None,
        ge=1,
        description="Every this many steps, write layers/param_norm/<param> for the chosen "
        "parameters, and layers/grad_norm/<param> when the train cell returns them "
        "(TrainOneStepWithGradNormCell and build_model by default, MindFormers' "
        "local_norm=True). Other steps do no extra work. None: off, except that the "
        "gradient norms of a train cell built asking for them "
        "(TrainOneStepWithGradNormCell(layer_norms=True), local_norm=True) are written "
        "every step.",
    )
    layer_norms_of: list[HistogramKind] = Field(
        default_factory=lambda: list(_HISTOGRAM_KINDS),
        description="What layer_norms_every writes: 'gradients' (layers/grad_norm/<param>, "
        "nearly free with TrainOneStepWithGradNormCell, which returns them) and/or "
        "'parameters' (layers/param_norm/<param>, a host copy of each chosen parameter).",
    )
    optimizer_state_norms: bool = Field(
        default=False,
        description="With layer_norms_every: also write the L2 norm of the optimizer's "
        "state per chosen parameter, layers/adam_m_norm/<param> and "
        "layers/adam_v_norm/<param> (Adam, AdamWeightDecay, Lamb) or "
        "layers/momentum_norm/<param> (Momentum), like MindFormers' "
        "optimizer_state_format. Costs a host copy of that state on recorded steps.",
    )
    param_norm_every: Optional[int] = Field(
        default=None,
        ge=1,
        description="Every this many steps, write train/param_norm, the global L2 norm of "
        "all trainable parameters (None: off).",
    )
    memory_every: Optional[int] = Field(
        default=100,
        ge=1,
        description="Every this many steps, the MindSpore callback writes this process's "
        "peak host memory (perf/host_peak_rss_mb) and, on Ascend/GPU, MindSpore's peak device "
        "memory (perf/device_peak_memory_mb); per rank under data parallelism (None: off).",
    )
    histogram_interval: Optional[int] = Field(
        default=None,
        ge=1,
        description="Every this many epochs (at the epoch's last step), write histograms of "
        "the chosen parameters and gradients (TensorBoard's HISTOGRAMS and DISTRIBUTIONS "
        "tabs). None: off, unless the config names histograms_of / collect_specified_data "
        "(see histogram_every_steps).",
    )
    histogram_every_steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="The same, every this many steps instead of epochs. A config that names "
        "histograms_of / collect_specified_data and neither interval gets histograms every "
        "collect_freq steps, as SummaryCollector collects them (every 10 steps, its "
        "default, when collect_freq is not given either); set either interval, or "
        "histogram_every_steps: null, to choose otherwise.",
    )
    histograms_of: list[HistogramKind] = Field(
        default_factory=lambda: list(_HISTOGRAM_KINDS),
        validation_alias=AliasChoices("histograms_of", "collect_specified_data"),
        description="What the histograms show (alias: collect_specified_data). Gradient "
        "histograms cost one extra forward and backward pass of the recorded step's batch, "
        "on recorded steps only, at the weights after that step's update (not in dataset "
        "sink mode, where callbacks never see the batch: one warning says so). 'inputs' and "
        "'outputs' (SummaryCollector's) are dropped with one warning: they cost GBs of "
        "device memory.",
    )
    perplexity: bool = Field(
        default=False,
        description="Language models: also write train/perplexity = exp(train/loss) and "
        "eval/perplexity = exp(eval/loss); the loss must be the mean token cross-entropy "
        "in nats.",
    )
    tokens_per_sample: Optional[int] = Field(
        default=None,
        ge=1,
        description="Tokens in each sample (the sequence length), so perf/tokens_per_s is "
        "written from the samples per step the MindSpore callback knows (the batch size).",
    )
    flops_per_sample: Optional[float] = Field(
        default=None,
        gt=0,
        description="Model FLOPs of one sample's forward and backward pass (e.g. 6 x "
        "parameters x sequence length for a transformer), for perf/tflops_per_device and "
        "perf/mfu. None: the MindSpore callback takes MindSpore's count of the compiled "
        "train graph in GRAPH mode (docs/mindformers.md).",
    )
    peak_tflops: Optional[float] = Field(
        default=None,
        gt=0,
        description="Peak dense TFLOPS of one device at the training precision, for "
        "perf/mfu = perf/tflops_per_device / peak_tflops. None: mindwatch's table when it "
        "knows the device (Ascend 910: 256), else no perf/mfu.",
    )
    tag_style: Literal["mindwatch", "mindformers"] = Field(
        default="mindwatch",
        description="'mindwatch': namespaced tags (train/loss, train/lr, perf/...); "
        "'mindformers': also MindFormers' own names with MindFormers' definitions (loss, "
        "learning-rate, grad-norm, loss-scale, batch-size, iteration-time, throughput per "
        "device, B-samples-per-day, model-flops-throughput-per-npu) and their "
        "'<tag>_vs_samples' twins, so existing dashboards keep working.",
    )
    hparams: dict[str, Union[bool, int, _HParamFloat, str]] = Field(
        default_factory=dict,
        description="The run's hyperparameters, shown in TensorBoard's HPARAMS dashboard "
        "(the run itself is the session) and recorded in run.json. The MindSpore callback "
        "adds what it can see (optimizer, learning rate, batch size, epochs, ...); values "
        "given here win. Non-finite numbers (.inf, .nan) are kept as they are; an integer "
        "too large for a float is shown as its digits.",
    )
    name_hparams: list[str] = Field(
        default_factory=list,
        description="hparams whose values go into the run folder name, e.g. ['lr', 'bs'].",
    )
    total_steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="Steps the run will take, for the progress bar and ETA (the MindSpore "
        "callback fills it in from the dataset and epochs).",
    )
    aggregate_every: Union[int, Literal["auto"]] = Field(
        default="auto",
        description="Multi-card: reduce the buffered per-step values of all ranks together "
        "every this many steps (one collective per interval; every step still gets its "
        "exact point). 'auto' starts at 10 and then picks the interval that keeps the "
        "collective under 0.5 % of the step time (at most 200 steps); 0 turns reduction "
        "off (rank 0 writes its own values). At most 10000: the steps of an interval "
        "wait in memory until it completes. Ignored in a single process.",
    )
    aggregate_timeout: float = Field(
        default=300.0,
        gt=0,
        le=DAY,
        description="Multi-card: seconds one reduction may wait for the other ranks. It only "
        "tells a dead or hung rank from a live one, so it must be longer than any pause a "
        "single rank takes between steps while the others wait (an evaluation or "
        "checkpoint on one rank only). After a timeout every rank writes its own values "
        "and nothing more is reduced (a warning says why; training is never stopped). "
        "The one exchange at start (the ranks agree on the run folder) waits at least 60 "
        "s, as ranks reach their Monitor at different times. At most 86400 (a day): no "
        "pause of one rank is longer, and a hung rank must still be told apart.",
    )
    per_rank: bool = Field(
        default=False,
        description="Multi-card: every rank also writes '<run>/rank_<r>/' with its own "
        "values of the metrics that differ between ranks (local loss, step time, "
        "throughput, ...); TensorBoard shows them as sub-runs.",
    )
    reductions: dict[str, ReduceKind] = Field(
        default_factory=dict,
        description="Multi-card: how your own metrics combine across ranks, by name or tag, "
        "e.g. {accuracy: mean, memory_mb: per_rank}: mean (weighted by tokens or samples "
        "when log_step gets them), sum, max, min, once (already global: rank 0's value) or "
        "per_rank (only the spread across ranks is written globally). Metrics not listed "
        "are averaged; built-in metrics declare their own (docs/multicard.md).",
    )
    loss_source_rank: Optional[int] = Field(
        default=None,
        description="Multi-card: take train/loss from this rank only (negative counts from "
        "the last rank: -1 is the last). None: the mean over all ranks, or over the last "
        "pipeline stage's ranks when MindSpore's pipeline_stages > 1.",
    )
    alerts: AlertSettings = Field(
        default_factory=AlertSettings,
        description=f"Anomaly rules ({', '.join(RULE_NAMES)}), each with its thresholds; "
        "alerts go to '<run>/alerts.jsonl' and the log (docs/alerts.md).",
    )
    checkpoint: CheckpointSettings = Field(
        default_factory=CheckpointSettings,
        description="Checkpoints saved by mindwatch.mindspore.build_callbacks: "
        "save_checkpoint_steps, keep_checkpoint_max, prefix, directory.",
    )
    hardware: HardwareSettings = Field(
        default_factory=HardwareSettings,
        description="Per-rank hardware telemetry sampled on mindwatch's own thread: host "
        "CPU, memory, disk and network, MindSpore's device memory, and Ascend NPUs through "
        "npu-smi (docs/dev/cluster-health.md).",
    )
    prometheus: Optional[PrometheusSettings] = Field(
        default=None,
        description="Prometheus metrics of the run (off when None): port, host, prefix, "
        "labels, per_rank, push (docs/prometheus.md). Served by rank 0 from the "
        "background thread, never the training thread.",
    )

    @model_validator(mode="before")
    @classmethod
    def _print_pacing(cls, data: Any) -> Any:
        """``print_secs`` left out: 0 when ``print_every`` is given (the user chose the
        steps), else the default pacing (see the field)."""
        if isinstance(data, Mapping) and data.get("print_secs") is None:
            chosen = data.get("print_every") is not None
            data = {**data, "print_secs": 0.0 if chosen else PRINT_SECS}
        return data

    @model_validator(mode="before")
    @classmethod
    def _drop_foreign_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        foreign = [key for key in data if key in _FOREIGN_KEYS]
        if foreign:
            log.warning(
                "mindwatch: accepted but not used: %s",
                "; ".join(f"{key}: {_FOREIGN_KEYS[key]}" for key in foreign),
            )
        data = {k: v for k, v in data.items() if k not in _FOREIGN_KEYS}
        given: dict[str, str] = {}
        for key in data:  # one field under two names is a mistake, not a silent pick
            field = canonical_key(key)
            if field in given and given[field] != key:
                raise ValueError(
                    f"'{given[field]}' and '{key}' are the same setting ({field}); keep one"
                )
            given[field] = key
        return _histograms_as_named(data, given)

    @field_validator("logdir")
    @classmethod
    def _local_logdir(cls, value: Optional[str]) -> Optional[str]:
        # A URL of a remote store would silently become a local folder named 's3:'.
        return None if value is None else local_path(value)

    @field_validator("filename_suffix")
    @classmethod
    def _file_name_part(cls, value: str) -> str:
        if any(c in value for c in "/\\\0"):
            raise ValueError(
                f"{value!r} would put the event files in another folder; use a suffix "
                "without '/', '\\' or NUL, such as '.rank0'"
            )
        return value

    @field_validator("collect_freq", mode="before")
    @classmethod
    def _positive_frequency(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ValueError(
                "must be >= 1: a frequency of 0 or less would record nothing (MindSpore's "
                "SummaryCollector accepts it silently); use 1 to record every step"
            )
        return value

    @field_validator("aggregate_every", mode="before")
    @classmethod
    def _aggregate_every(cls, value: Any) -> Any:
        if value == "auto":
            return value
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError("must be 'auto', 0 (no reduction) or a number of steps >= 1")
        if value > MAX_AGGREGATE_EVERY:
            raise ValueError(
                f"must be at most {MAX_AGGREGATE_EVERY} steps (an interval's steps wait in "
                "memory until it completes); 'auto' picks at most 200"
            )
        return value

    @field_validator("target")
    @classmethod
    def _valid_regexes(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
        return value

    @field_validator("name_hparams")
    @classmethod
    def _name_hparams_known(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if "hparams" not in info.data:
            return value  # hparams itself is invalid: that error says enough
        hparams = info.data["hparams"]
        missing = [key for key in value if key not in hparams]
        if missing:
            raise ValueError(
                f"lists {missing}, which are not in hparams ({sorted(hparams) or 'empty'}); "
                "add them to hparams or drop them"
            )
        return value

    # ------------------------------------------------------------------ building

    @classmethod
    def from_any(
        cls, config: Union[MonitorConfig, Mapping[str, Any], str, Path, None]
    ) -> MonitorConfig:
        """A MonitorConfig from itself, a mapping of its fields, a YAML path, or None."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        if isinstance(config, (str, Path)):
            return cls.from_yaml(config)
        if isinstance(config, Mapping):
            return cls.from_dict(config)
        raise TypeError(
            f"config must be a MonitorConfig, a dict or a YAML file path, "
            f"got {type(config).__name__}"
        )

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        source: str = "config",
        key_names: Optional[Mapping[str, str]] = None,
    ) -> MonitorConfig:
        """Validate ``data``; every problem is reported in one :class:`ConfigError`.

        ``key_names`` renames top-level keys in messages (a MindFormers YAML's
        ``tensorboard.tensorboard_dir`` rather than mindwatch's ``logdir``).
        """
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise ConfigError(describe(exc, source, key_names or {}, cls)) from None

    @classmethod
    def from_yaml(cls, path: Union[str, Path]) -> MonitorConfig:
        """Read a YAML file: mindwatch's own fields, a ``mindwatch:`` section, or a
        MindFormers training YAML (``monitor_config`` / ``tensorboard`` / ``callbacks``)."""
        data = load_yaml(path)
        if is_mindformers_yaml(data):
            return cls.from_mindformers(data, source=str(path))
        if "mindwatch" in data and isinstance(data["mindwatch"], Mapping):
            return cls.from_dict(data["mindwatch"], source=f"{path}: mindwatch")
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_mindformers(
        cls, data: Mapping[str, Any], *, source: str = "MindFormers YAML"
    ) -> MonitorConfig:
        """The config a MindFormers training YAML (already loaded) implies; keys that mean
        nothing to mindwatch are named once in one warning."""
        fields, notes, origins = translate(data, source, canonical=canonical_key)
        config = cls.from_dict(fields, source=source, key_names=origins)
        if notes:
            log.warning(
                "mindwatch: %s: %d MindFormers setting(s) accepted but not used:\n  %s",
                source,
                len(notes),
                "\n  ".join(notes),
            )
        return config


def canonical_key(key: str) -> str:
    """The field a top-level key names (an alias such as ``summary_dir`` -> ``logdir``)."""
    for name, field in MonitorConfig.model_fields.items():
        alias = field.validation_alias
        if key == name or (isinstance(alias, AliasChoices) and key in alias.choices):
            return name
    return key


# Keys of the seeds' monitor_config (MindSpore's SummaryCollector and context) that mean
# nothing to a monitor: accepted, so that config works as it is, and reported once.
_FOREIGN_KEYS = {
    "keep_default_action": "SummaryCollector's switch; mindwatch's defaults are always on",
    "save_graphs": "a MindSpore context option (ms.set_context), not a monitoring one",
    "save_graphs_path": "a MindSpore context option (ms.set_context), not a monitoring one",
    "export_kwargs": "model export is not part of monitoring",
}


# SummaryCollector's own default collect_freq: the pace of the histograms it collects
# when a config names them (collect_specified_data) and gives no interval at all.
SUMMARY_COLLECTOR_FREQ = 10
_NOT_COLLECTED = ("inputs", "outputs")


def _histograms_as_named(data: dict[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    """A config that names what to collect (``collect_specified_data`` /
    ``histograms_of``) gets it, or is told why not, once:

    * with no ``histogram_interval`` or ``histogram_every_steps``, the histograms are
      collected every ``collect_freq`` steps, SummaryCollector's meaning (its default,
      10, when collect_freq is not given either);
    * ``inputs`` and ``outputs`` (SummaryCollector's heavy items) are dropped with one
      warning naming the key and the fix.
    """
    key = given.get("histograms_of")
    if key is None:
        return data
    named = data[key]
    if isinstance(named, (list, tuple)):
        dropped = [item for item in named if item in _NOT_COLLECTED]
        if dropped:
            kept = [item for item in named if item not in _NOT_COLLECTED]
            log.warning(
                "mindwatch: %s: %s not collected: a histogram of every step's inputs or "
                "outputs costs GBs of device memory (the seeds measured +1.2 GB on "
                "ResNet-50); collecting %s. Remove %s from %s to silence this.",
                key,
                " and ".join(repr(item) for item in dropped),
                kept or "nothing",
                " and ".join(repr(item) for item in dropped),
                key,
            )
            data = {**data, key: kept}
            named = kept
    paced = "histogram_interval" in given or "histogram_every_steps" in given
    if paced or not named:
        return data
    freq_key = given.get("collect_freq")
    freq = data[freq_key] if freq_key is not None else SUMMARY_COLLECTOR_FREQ
    if isinstance(freq, str) and freq.strip().isdigit():
        freq = int(freq)
    if isinstance(freq, bool) or not isinstance(freq, int) or freq < 1:
        return data  # collect_freq's own error says what is wrong
    log.info(
        "mindwatch: %s without histogram_interval or histogram_every_steps: histograms "
        "every %d steps (%s, as MindSpore's SummaryCollector does)",
        key,
        freq,
        f"{freq_key}" if freq_key is not None else "SummaryCollector's default collect_freq",
    )
    return {**data, "histogram_every_steps": freq}
