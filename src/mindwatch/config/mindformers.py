"""MindFormers training YAMLs: their ``monitor_config``, ``tensorboard`` and
``callbacks:`` sections (1.x), and the ``monitor:`` section of a 2.x PyNative YAML, as
:class:`~mindwatch.config.MonitorConfig` fields.

Mapping (MindFormers 1.5-1.9 keys, see the design notes' study of MindFormers):

==========================================  ==========================================
MindFormers                                 mindwatch
==========================================  ==========================================
``tensorboard.tensorboard_dir``             ``logdir`` (ranks > 0 get ``rank_<r>/``)
``monitor_config.target`` / ``invert``      ``target`` / ``invert``
``monitor_config.local_norm_format``        ``layer_norms_every`` = step_interval,
                                            gradients only
``monitor_config.weight_state_format``      ``param_norm_every`` = step_interval
``monitor_config.optimizer_state_format``   ``optimizer_state_norms`` (+ the above)
(``step_interval`` paces only these, as in MindFormers; never the loss curve)
``callbacks: MFLossMonitor.per_print_times``  ``print_every``
``callbacks: CheckpointMonitor``            ``checkpoint`` (prefix, save_checkpoint_steps,
                                            keep_checkpoint_max, directory)
``callbacks: MindWatchMonitor`` (any key)   the same mindwatch key
``seed``, ``runner_config.batch_size`` ...  ``hparams`` (seed, batch_size, epochs,
                                            optimizer, learning_rate, lr_schedule)
a top-level ``mindwatch:`` section          mindwatch keys, applied last
==========================================  ==========================================

MindFormers 2.x (``mindformers.pynative``; 2.1.0's ``MonitorConfig``, read from its
wheel: docs/dev/mindformers-2.1-source.md, section 6):

================================================  ====================================
MindFormers 2.x                                   mindwatch
================================================  ====================================
``monitor.tensorboard.output_dir`` (``""``: off)  ``logdir``
``monitor.tensorboard.log_interval``              ``collect_freq``
``monitor.train_state.local_norm``                ``layer_norms_every`` = 1, gradients
(``true``: every parameter; a name or a list of   only (2.x logs them every step);
names: parameters whose name contains one)        ``target`` (each name, escaped)
``monitor.train_state.local_loss``                ``per_rank`` (each rank's own loss)
``training.global_batch_size``                    ``hparams.batch_size``
================================================  ====================================

The rest is named in the warning: ``tensorboard.queue_size`` (mindwatch's queue never
blocks), ``train_state.device_loss`` / ``device_norm`` and ``moe_monitor.*`` (not
collected yet; 2.1.0 itself records no tokens per expert), ``health_checkpoint.*`` (no
code of MindFormers 2.1.0 reads these; mindwatch's ``nonfinite`` and ``grad_explosion``
rules judge the norm), and any key 2.x does not have (2.x itself refuses those).

Keys that mean nothing here are accepted, never silently dropped: they are listed once,
with the reason, in a single warning (Ascend-only in-graph dumps, options mindwatch does
not have, TensorBoard switches whose data mindwatch always writes). The same list is
available from :func:`mindformers_notes` for tools such as ``mindwatch doctor``.

:func:`translate` is a pure mapping from the YAML's sections to mindwatch field values;
:meth:`MonitorConfig.from_mindformers <mindwatch.config.MonitorConfig.from_mindformers>`
validates them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Callable

from mindwatch.config.errors import ConfigError

__all__ = ["is_mindformers_yaml", "mindformers_notes", "translate"]

_SECTIONS = ("monitor_config", "tensorboard", "callbacks", "monitor")

_ASCEND_ONLY = "needs MindFormers' in-graph dumps on Ascend; not collected by mindwatch"
_NOT_YET = "not collected by mindwatch yet"
_ALWAYS = "mindwatch always writes this when the training provides it"
_UNUSED = "has no effect in mindwatch"

_MONITOR_NOTES = {
    "dump_path": _ASCEND_ONLY,
    "local_loss_format": _ASCEND_ONLY,
    "device_local_loss_format": _ASCEND_ONLY,
    "device_local_norm_format": _ASCEND_ONLY,
    "max_attention_logit_format": _ASCEND_ONLY,
    "stable_rank_config": _NOT_YET,
    "throughput_baseline": _NOT_YET,
    "print_struct": _UNUSED,
    "check_for_global_norm": "MindFormers' fault-recovery hook; " + _UNUSED,
    "global_norm_spike_threshold": _NOT_YET,
    "global_norm_spike_count_threshold": _NOT_YET,
}
_TENSORBOARD_NOTES = {
    "tensorboard_queue_size": "mindwatch's writer queue never blocks on a small size; "
    "see max_queue",
    "log_loss_scale_to_tensorboard": _ALWAYS,
    "log_timers_to_tensorboard": _ALWAYS,
    "log_expert_load_to_tensorboard": _NOT_YET,
}
# monitor_config.*_format keys that ask for something mindwatch records, and how. As in
# MindFormers, step_interval paces only these (TrainingStateMonitor), not the loss curve.
_INTERVAL = object()  # "every step_interval steps"
_FORMAT_KEYS: dict[str, dict[str, Any]] = {
    # per-parameter gradient norms: nearly free with a cell that returns them (local_norm)
    "local_norm_format": {"layer_norms_every": _INTERVAL, "layer_norms_of": ["gradients"]},
    "weight_state_format": {"param_norm_every": _INTERVAL},  # train/param_norm
    "optimizer_state_format": {
        "layer_norms_every": _INTERVAL,
        "layer_norms_of": ["gradients"],
        "optimizer_state_norms": True,
    },
}
_COSTLY = {
    "weight_state_format": "copies every parameter to the host each time",
    "optimizer_state_format": "copies the optimizer state of the chosen parameters to the "
    "host each time",
}
_CHECKPOINT_KEYS = ("prefix", "save_checkpoint_steps", "keep_checkpoint_max", "directory")

# MindFormers 2.x's monitor: section: its subsections and their keys (2.1.0).
_MONITOR_2X: dict[str, tuple[str, ...]] = {
    "tensorboard": ("output_dir", "log_interval", "queue_size"),
    "train_state": ("local_loss", "local_norm", "device_loss", "device_norm"),
    "moe_monitor": ("save_tokens_per_expert_interval", "target_layers"),
    "health_checkpoint": (
        "embedding_local_norm_threshold",
        "global_norm_skip_threshold",
        "global_norm_skip_time",
    ),
}
_MONITOR_2X_NOTES = {
    "tensorboard.queue_size": _TENSORBOARD_NOTES["tensorboard_queue_size"],
    "train_state.device_loss": _NOT_YET,
    "train_state.device_norm": _NOT_YET,
    "moe_monitor.save_tokens_per_expert_interval": _NOT_YET
    + " (MindFormers 2.1.0 records none either)",
    "moe_monitor.target_layers": _NOT_YET,
}
_HEALTH_2X = (
    "read by no code of MindFormers 2.1.0; mindwatch's nonfinite and grad_explosion rules "
    "judge the gradient norm (alerts.*)"
)


def is_mindformers_yaml(data: Mapping[str, Any]) -> bool:
    return any(section in data for section in _SECTIONS)


def _section(data: Mapping[str, Any], name: str, source: str, label: str = "") -> Mapping[str, Any]:
    value = data.get(name) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"invalid MindFormers config {source}:\n  - {label or name}: must be a mapping of "
            f"settings, got {type(value).__name__} {value!r:.60}"
        )
    return value


# YAML 1.1's words for booleans (what PyYAML reads unquoted) and pydantic's, so a quoted
# "False" means what it says instead of being a non-empty, hence true, string.
_TRUE = frozenset({"true", "yes", "on", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "off", "n", "f", "0", "", "none", "null", "~"})


def _switch(value: Any, key: str, source: str) -> bool:
    """A MindFormers on/off setting: a bool, 0/1, None (off) or a string spelling one
    (``"False"``, ``"off"``, ``"yes"``, any case); anything else is a ConfigError
    naming ``key``."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
    raise ConfigError(
        f"invalid MindFormers config {source}:\n  - {key} = {value!r:.60}: must be true or "
        "false (also written yes/no, on/off, 1/0)"
    )


def _same(key: str) -> str:
    return key


def translate(
    data: Mapping[str, Any], source: str, *, canonical: Callable[[str], str] = _same
) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """The mindwatch fields a MindFormers YAML implies, notes on the unused keys, and
    where each field came from (for error messages in the user's own terms).

    ``canonical`` maps a mindwatch key given in the YAML (an alias such as
    ``summary_dir``) to its field name, so a later section replaces an earlier value."""
    fields: dict[str, Any] = {}
    notes: list[str] = []
    origins: dict[str, str] = {}
    monitor = _section(data, "monitor_config", source)
    tensorboard = _section(data, "tensorboard", source)
    on = _switch(monitor.get("monitor_on", False), "monitor_config.monitor_on", source)
    interval = monitor.get("step_interval", 1) if on else None
    for key, value in monitor.items():
        if key == "monitor_on":
            continue
        if not on:
            notes.append(f"monitor_config.{key}: ignored because monitor_on is off")
            continue
        if key == "step_interval":
            if not any(monitor.get(k) for k in _FORMAT_KEYS):
                notes.append(
                    "monitor_config.step_interval: paces MindFormers' TrainingStateMonitor; "
                    "no *_format key here asks mindwatch for anything at that pace"
                )
        elif key in ("target", "invert"):
            if value is not None:
                fields[key] = value
                origins[key] = f"monitor_config.{key}"
        elif key in _FORMAT_KEYS:
            if value:  # None / [] ask for nothing
                for name, setting in _FORMAT_KEYS[key].items():
                    if setting is _INTERVAL:
                        fields[name] = interval
                        origins[name] = "monitor_config.step_interval"
                    elif name == "layer_norms_of" and name in fields:
                        fields[name] = sorted(set(fields[name]) | set(setting))
                    else:
                        fields[name] = setting
                        origins[name] = f"monitor_config.{key}"
                if key in _COSTLY:
                    notes.append(
                        f"monitor_config.{key}: mapped, but it {_COSTLY[key]} (every "
                        f"step_interval = {interval} steps); MindFormers documents it as slow too"
                    )
        elif value not in (None, False, [], "") and key in _MONITOR_NOTES:
            notes.append(f"monitor_config.{key}: {_MONITOR_NOTES[key]}")
        elif key not in _MONITOR_NOTES:
            notes.append(f"monitor_config.{key}: unknown MindFormers key; {_UNUSED}")
    for key, value in tensorboard.items():
        if key == "tensorboard_dir":
            fields["logdir"] = value
            origins["logdir"] = "tensorboard.tensorboard_dir"
        elif key in _TENSORBOARD_NOTES:
            notes.append(f"tensorboard.{key}: {_TENSORBOARD_NOTES[key]}")
        else:
            notes.append(f"tensorboard.{key}: unknown MindFormers key; {_UNUSED}")
    callbacks = data.get("callbacks") or []
    if not isinstance(callbacks, list):
        raise ConfigError(
            f"invalid MindFormers config {source}:\n  - callbacks: must be a list of "
            f"'- type: Name' entries, got {type(callbacks).__name__}"
        )
    for i, entry in enumerate(callbacks):
        if not isinstance(entry, Mapping) or "type" not in entry:
            raise ConfigError(
                f"invalid MindFormers config {source}:\n  - callbacks.{i}: each callback "
                f"needs a 'type:' key, got {entry!r:.60}"
            )
        kind, args = entry["type"], {k: v for k, v in entry.items() if k != "type"}
        if kind == "MFLossMonitor" and "per_print_times" in args:
            fields["print_every"] = args.pop("per_print_times")
            origins["print_every"] = f"callbacks.{i} (MFLossMonitor).per_print_times"
        elif kind == "CheckpointMonitor":
            fields["checkpoint"] = {k: args.pop(k) for k in _CHECKPOINT_KEYS if k in args}
            origins["checkpoint"] = f"callbacks.{i} (CheckpointMonitor)"
        elif kind == "MindWatchMonitor":
            _merge(fields, origins, args, f"callbacks.{i} (MindWatchMonitor)", canonical)
            args = {}
        for key in args:
            notes.append(f"callbacks.{i} ({kind}).{key}: {_UNUSED}")
    _monitor_2x(data, source, fields, notes, origins)
    fields["hparams"] = {**_hparams(data), **(fields.get("hparams") or {})}
    extra = data.get("mindwatch")
    if isinstance(extra, Mapping):
        _merge(fields, origins, extra, "mindwatch", canonical)  # applied last: it wins
    return fields, notes, origins


def _merge(
    fields: dict[str, Any],
    origins: dict[str, str],
    more: Mapping[str, Any],
    where: str,
    canonical: Callable[[str], str],
) -> None:
    """Add mindwatch keys given in the YAML: aliases land on their field (a later section
    replaces an earlier value instead of clashing with it), hparams are merged."""
    for key, value in more.items():
        name = canonical(key)
        merged = value
        if name == "hparams" and isinstance(value, Mapping):
            merged = {**(fields.get("hparams") or {}), **value}
        fields[name] = merged
        origins[name] = f"{where}.{key}"


def _monitor_2x(
    data: Mapping[str, Any],
    source: str,
    fields: dict[str, Any],
    notes: list[str],
    origins: dict[str, str],
) -> None:
    """MindFormers 2.x's ``monitor:`` section into ``fields`` (the table above); every
    key without a counterpart into ``notes``."""
    monitor = _section(data, "monitor", source)
    for name in monitor:
        if name not in _MONITOR_2X:
            notes.append(f"monitor.{name}: unknown MindFormers 2.x key; {_UNUSED}")
            continue
        settings = _section(monitor, name, source, label=f"monitor.{name}")
        for key, value in settings.items():
            where = f"monitor.{name}.{key}"
            if key not in _MONITOR_2X[name]:
                notes.append(f"{where}: unknown MindFormers 2.x key; {_UNUSED}")
            elif name == "health_checkpoint":
                notes.append(f"{where}: {_HEALTH_2X}")
            elif (name, key) == ("tensorboard", "output_dir"):
                if value:  # "" is 2.x's "off"
                    fields["logdir"], origins["logdir"] = value, where
            elif (name, key) == ("tensorboard", "log_interval"):
                fields["collect_freq"], origins["collect_freq"] = value, where
            elif (name, key) == ("train_state", "local_norm"):
                _local_norm(value, where, source, fields, origins)
            elif (name, key) == ("train_state", "local_loss"):
                if _switch(value, where, source):
                    fields["per_rank"], origins["per_rank"] = True, where
            elif value not in (None, False, [], ""):
                notes.append(f"{where}: {_MONITOR_2X_NOTES[f'{name}.{key}']}")


def _local_norm(
    value: Any, where: str, source: str, fields: dict[str, Any], origins: dict[str, str]
) -> None:
    """2.x's ``local_norm``: ``true`` (every parameter), a name or a list of names (the
    parameters whose name contains one of them), or off (false, ``""``, ``[]``)."""
    names: list[str] = []
    if value is None or isinstance(value, bool):
        on = bool(value)
    elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        on = _switch(value, where, source)
    elif isinstance(value, str):
        on, names = True, [value]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        names = [v for v in value if v]
        on = bool(names)
    else:
        raise ConfigError(
            f"invalid MindFormers config {source}:\n  - {where} = {value!r:.60}: must be "
            "true or false, a parameter name, or a list of parameter names"
        )
    if not on:
        return
    fields["layer_norms_every"], origins["layer_norms_every"] = 1, where
    fields["layer_norms_of"], origins["layer_norms_of"] = ["gradients"], where
    if names:  # 2.x matches a name as a substring; target is a regex (re.search)
        fields["target"], origins["target"] = [re.escape(n) for n in names], where


def _hparams(data: Mapping[str, Any]) -> dict[str, Any]:
    def section(name: str) -> Mapping[str, Any]:
        value = data.get(name)
        return value if isinstance(value, Mapping) else {}

    runner, optimizer, schedule, training = (
        section("runner_config"),
        section("optimizer"),
        section("lr_schedule"),
        section("training"),  # MindFormers 2.x
    )
    found = {
        "seed": data.get("seed"),
        "batch_size": runner.get("batch_size", training.get("global_batch_size")),
        "epochs": runner.get("epochs"),
        "optimizer": optimizer.get("type"),
        "learning_rate": schedule.get("learning_rate", optimizer.get("learning_rate")),
        "lr_schedule": schedule.get("type"),
    }
    return {k: v for k, v in found.items() if isinstance(v, (bool, int, float, str))}


def mindformers_notes(data: Mapping[str, Any], source: str = "YAML") -> list[str]:
    """The keys of a MindFormers YAML that mindwatch accepts but does not use, and why."""
    return translate(data, source)[1]
