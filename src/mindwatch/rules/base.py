"""What every rule is: a class that declares itself, the :class:`Finding` it returns,
and its :class:`Stateful` state.

A rule class declares, as class attributes, everything the rest of mindwatch needs to
know about it: its ``name`` (the key of its section in ``alerts``, and the ``rule``
field of its alerts), its ``settings_model`` (that section's pydantic model), its likely
``causes`` and its ``messages`` (``N_()``-marked templates, translated when a finding is
made). The config, the alerts' causes, the documentation and the engine read these from
the registry (:mod:`mindwatch.rules.builtin`), so a rule is written in one place.

A rule also declares the attributes that are its state (:attr:`Stateful.state`); the
base class saves and restores them (:meth:`Stateful.state_dict`,
:meth:`Stateful.load_state_dict`) as JSON-able data, so the same rules run in the
training process and in ``mindwatch watch``, which keeps their state between calls.

This package sits just above :mod:`mindwatch.common` and below the config: it imports
nothing else of mindwatch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Optional, TypeVar

from pydantic import Field

from mindwatch.common.i18n import _
from mindwatch.common.settings import Settings

__all__ = ["MAX_WINDOW", "Finding", "Rule", "RuleSettings", "Stateful", "fmt"]

# Points a rule keeps and sorts on the pipeline's thread: far above any useful window, far
# below what would slow the pipeline or fill memory.
MAX_WINDOW = 10_000


class RuleSettings(Settings):
    """The base of each rule's settings: every rule can be switched off."""

    enabled: bool = Field(default=True, description="Run this rule.")


S = TypeVar("S", bound=RuleSettings)


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


def fmt(value: float) -> str:
    """A value as the messages show it: four significant digits."""
    return f"{value:.4g}"


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


class Rule(Stateful, Generic[S]):
    """Base: the declaration (the class attributes below), ``observe``, and
    (:class:`Stateful`) state that survives a restart.

    A subclass names its settings type twice, as ``Rule[XSettings]`` (for the type
    checker: ``AlertSettings.rule(XRule)`` is an ``XSettings``) and as
    ``settings_model`` (for the config, which builds the ``alerts.<name>`` section from
    it at run time).
    """

    name: ClassVar[str] = "rule"
    """The key of the rule's section in ``alerts`` and its alerts' ``rule`` field."""
    settings_model: ClassVar[type[RuleSettings]] = RuleSettings
    """The model of ``alerts.<name>``; its docstring's first line heads the rule's
    section of docs/config.md."""
    causes: ClassVar[tuple[str, ...]] = ()
    """Likely causes, most likely first, each marked ``N_()`` (translated when used)."""
    messages: ClassVar[Mapping[str, str]] = {}
    """Message templates by key, each a whole ``N_()``-marked sentence with named
    fields (:meth:`message` translates and fills one)."""
    observes_steps: ClassVar[bool] = True
    """False for a rule checked against the clock by ``mindwatch watch`` (``stall``):
    the engine does not run it."""

    def __init__(self, settings: S) -> None:
        self.settings = settings

    def observe(self, step: int, values: Mapping[str, float]) -> list[Finding]:
        raise NotImplementedError

    def message(self, key: str, **fields: Any) -> str:
        """The template ``messages[key]`` in the current language, filled with ``fields``."""
        return _(self.messages[key]).format(**fields)

    @staticmethod
    def finite(values: Mapping[str, float], tag: str) -> Optional[float]:
        """``values[tag]`` when it was logged and is finite, else None: the rules judge
        finite values (a NaN or an infinity is the nonfinite rule's business)."""
        value = values.get(tag)
        if value is None or value - value != 0.0:  # no function call for the common case
            return None
        return value
