"""``MonitorConfig``: one validated, frozen description of what mindwatch does.

Validated once, at the edge (``MonitorConfig.from_any``), with pydantic; unknown keys
are errors that name the key, so a misspelt option never silently does nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MonitorConfig"]


class MonitorConfig(BaseModel):
    """What to collect, how often, and where it goes."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    logdir: Optional[str] = Field(
        default=None,
        description="Run folder for event files, run.json and alerts. Resolved to an "
        "absolute path when the monitor is created, so a later os.chdir does not move it.",
    )
    flush_secs: float = Field(
        default=2.0,
        gt=0,
        description="Longest delay, in seconds, between logging a value and handing it to "
        "the OS (what a SIGKILL can lose at most).",
    )
    max_file_size: Optional[int] = Field(
        default=None,
        ge=1024,
        description="Start a new event file when the current one reaches this many bytes "
        "(None: never rotate).",
    )
    max_queue: int = Field(
        default=100_000,
        ge=1,
        description="Items that may wait for the background writer (bounds memory). When "
        "full, the caller waits up to max_block_secs for room.",
    )
    max_block_secs: float = Field(
        default=1.0,
        ge=0,
        description="Longest time a full queue may make the training thread wait for the "
        "writer; after that, new points are dropped (and counted) until it catches up.",
    )
    print_every: int = Field(
        default=10,
        ge=0,
        description="Print a progress line every this many steps (0: never).",
    )
    progress: Literal["auto", "bar", "line", "off"] = Field(
        default="auto",
        description="'bar': a progress bar with ETA (needs a known total); 'line': one "
        "plain line every print_every steps; 'auto': a bar on a terminal when the total "
        "is known, lines otherwise; 'off': print nothing.",
    )
    hparams: dict[str, Union[bool, int, float, str]] = Field(
        default_factory=dict,
        description="The run's hyperparameters, shown in TensorBoard's HPARAMS dashboard "
        "(the run itself is the session) and recorded in run.json. The MindSpore callback "
        "adds what it can see (optimizer, learning rate, batch size, epochs, ...); values "
        "given here win.",
    )
    total_steps: Optional[int] = Field(
        default=None,
        ge=1,
        description="Steps the run will take, for the progress bar and ETA (the MindSpore "
        "callback fills it in from the dataset and epochs).",
    )

    @classmethod
    def from_any(cls, config: Union[MonitorConfig, Mapping[str, Any], None]) -> MonitorConfig:
        """Accept a MonitorConfig, a mapping of its fields, or None (all defaults)."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        if isinstance(config, Mapping):
            return cls.model_validate(dict(config))
        raise TypeError(f"config must be a MonitorConfig or a dict, got {type(config).__name__}")
