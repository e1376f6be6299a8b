"""What every rule is: a :class:`Finding` it returns, and :class:`Stateful` state.

A rule declares the attributes that are its state (:attr:`Stateful.state`); the base
class saves and restores them (:meth:`Stateful.state_dict`,
:meth:`Stateful.load_state_dict`) as JSON-able data, so the same rules run in the
training process and in ``mindwatch watch``, which keeps their state between calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

__all__ = ["Finding", "Rule", "Stateful"]


@dataclass
class Finding:
    """What a rule saw: the engine turns it into an :class:`~mindwatch.alerts.Alert`."""

    rule: str
    severity: str
    metric: str
    value: Optional[float]
    message: str
    baseline: Optional[float] = None
    rank: Optional[int] = None  # the rank to look at, when the rule knows it
    extra: dict[str, Any] = field(default_factory=dict)  # written into the alert as is


def _saved(value: Any) -> Any:
    """A state attribute as JSON-able data: deques become lists, mappings recurse."""
    if isinstance(value, deque):
        return list(value)
    if isinstance(value, Mapping):
        return {str(k): _saved(v) for k, v in value.items()}
    return value


def _restored(current: Any, saved: Any) -> Any:
    """``saved`` in the shape of ``current``: a deque keeps its maxlen, a mapping keeps
    its keys (a tag the config no longer watches is dropped), numbers their type."""
    if isinstance(current, deque):
        return deque((float(v) for v in saved), maxlen=current.maxlen)
    if isinstance(current, Mapping):
        restored = dict(current)
        for key, value in (saved or {}).items():
            if key in restored:
                restored[key] = _restored(restored[key], value)
        return restored
    if saved is None:
        return None
    if isinstance(current, bool):
        return bool(saved)
    if isinstance(current, int):
        return int(saved)
    return float(saved) if isinstance(saved, (int, float)) else saved


class Stateful:
    """What changes as values arrive, declared once: ``state`` names the attributes;
    :meth:`state_dict` saves them as JSON-able data, :meth:`load_state_dict` puts them
    back (keys it lacks keep their value). Everything else comes from settings."""

    state: ClassVar[tuple[str, ...]] = ()

    def state_dict(self) -> dict[str, Any]:
        return {name: _saved(getattr(self, name)) for name in self.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for name in self.state:
            if name in state:
                setattr(self, name, _restored(getattr(self, name), state[name]))


class Rule(Stateful):
    """Base: a name, ``observe``, and (:class:`Stateful`) state that survives a restart."""

    name = "rule"

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        raise NotImplementedError
