"""What a run ran on and with, from its ``run.json``, and what changed between a run and
its baselines: MindSpore / MindFormers version, device kind, world size and the job's
config (its ``hparams``: the MindFormers YAML, the demo's settings, what
``Monitor.log_hparams`` was given), with a hash of the config to tell at a glance.

A difference is not a verdict: a baseline recorded with MindSpore 2.9 may be exactly
what a 2.10 run should be held to. ``mindwatch compare`` shows the differences above
its checks so that a failure (or a pass) is read knowing them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from mindwatch.common.i18n import N_
from mindwatch.run.record import RunRecord

__all__ = ["FACTS", "Change", "changes", "facts"]

# (key, what a person reads) of the facts that change what a run measures.
FACTS = (
    ("mindspore", N_("MindSpore version")),
    ("mindformers", N_("MindFormers version")),
    ("device", N_("device kind")),
    ("world_size", N_("world size")),
    ("config_hash", N_("config hash")),
)


def _device(record: RunRecord) -> Optional[str]:
    devices = sorted({r.device for r in record.ranks if r.device})
    if devices:
        return ",".join(devices)
    hardware = record.get("hardware")
    if isinstance(hardware, Mapping):
        sources = hardware.get("sources")
        if isinstance(sources, Mapping) and isinstance(sources.get("device"), str):
            return str(sources["device"])
    return None


def config_hash(hparams: Mapping[str, Any]) -> Optional[str]:
    """The first 12 hex digits of the SHA-256 of the config, keys sorted (None: none)."""
    if not hparams:
        return None
    text = json.dumps(dict(hparams), sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def facts(record: RunRecord) -> dict[str, Any]:
    """The run's facts (None where ``run.json`` does not say), and its config."""
    versions = record.versions
    return {
        "mindspore": versions.get("mindspore"),
        "mindformers": versions.get("mindformers"),
        "device": _device(record),
        "world_size": record.world_size,
        "config_hash": config_hash(record.hparams),
        "config": dict(record.hparams),
    }


@dataclass(frozen=True)
class Change:
    """One fact or config key whose value differs: ``kind`` is ``fact`` or ``config``;
    ``baseline`` lists the baselines' distinct values (one per value); None is a key
    that side does not have."""

    kind: str
    key: str
    baseline: tuple[Any, ...]
    run: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "baseline": list(self.baseline),
            "run": self.run,
        }


def _distinct(values: Sequence[Any]) -> tuple[Any, ...]:
    seen: list[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return tuple(seen)


_MISSING = object()  # a key one side does not have


def changes(run: Mapping[str, Any], baselines: Sequence[Mapping[str, Any]]) -> list[Change]:
    """The facts, then the config keys, whose value in ``run`` differs from a baseline's.

    A fact no run records (MindFormers in a plain MindSpore job) is not a change; one
    the run or a baseline lacks is (a key added to the config counts)."""
    found: list[Change] = []
    for key, _label in FACTS:
        if key == "config_hash":
            continue  # the config keys below say what the hash would
        values = [b.get(key) for b in baselines]
        if any(v != run.get(key) for v in values):
            found.append(Change("fact", key, _distinct(values), run.get(key)))
    run_config: Mapping[str, Any] = run.get("config") or {}
    base_configs: list[Mapping[str, Any]] = [b.get("config") or {} for b in baselines]
    keys = sorted(set(run_config).union(*base_configs))
    for key in keys:
        values = [c.get(key, _MISSING) for c in base_configs]
        new = run_config.get(key, _MISSING)
        if any(v != new for v in values):
            shown = [None if v is _MISSING else v for v in values]
            found.append(Change("config", key, _distinct(shown), None if new is _MISSING else new))
    return found
