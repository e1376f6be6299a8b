"""``<run>/skip.json``: the batches explained alerts blamed, for a resumed run to skip.

The format (``"format": "mindwatch.skip/1"``)::

    {
      "format": "mindwatch.skip/1",
      "samples": [40961, 40962, ...],          # every sample id below, sorted, once
      "steps": [                               # one entry per explained alert's batch
        {"step": 1200, "rank": 1, "epoch": 3, "batch": 176,
         "rule": "spike", "sample_ids": [40961, 40962, ...]}
      ]
    }

``samples`` holds ids as the dataset's id column gave them (numbers or strings).
``steps`` is there for the cases ids cannot serve: a run without an id column can still
resume past a step (MindFormers' ``data_skip_steps`` skips a *prefix* of steps, not one
step in the middle: the YAML line mindwatch prints resumes after the bad step).

Resuming a MindSpore dataset without those samples takes two lines, before ``batch``::

    from mindwatch.forensics import SkipList
    dataset = dataset.filter(SkipList.load("RUN/skip.json").keep, input_columns=["id"])

The file is rewritten whole (to a temporary file, then renamed) each time an alert adds
a batch, so a reader never sees half of it and a crash loses no batch written before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from mindwatch.run.layout import SKIP_FILE

__all__ = ["SKIP_FILE", "SkipList", "resume_hint"]

FORMAT = "mindwatch.skip/1"


def _plain(value: Any) -> Any:
    """A sample id as JSON keeps it (numpy scalars, bytes from a string column)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


class SkipList:
    """The samples and steps to skip (see the module docs).

    ``keep`` is the predicate for ``dataset.filter``: MindSpore calls it with each row's
    id column as a numpy array (a scalar or a one-element array)."""

    def __init__(
        self, samples: Iterable[Any] = (), steps: Optional[Sequence[dict[str, Any]]] = None
    ) -> None:
        self.samples: set[Any] = {_plain(s) for s in samples}
        self.steps: list[dict[str, Any]] = list(steps or [])

    @classmethod
    def load(cls, path: Union[str, os.PathLike[str]]) -> SkipList:
        """Read a skip list; a missing, unreadable or foreign file raises ValueError
        naming it (a resumed run must not silently train on what it meant to skip)."""
        file = Path(path)
        if file.is_dir():
            file = file / SKIP_FILE
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(
                f"no skip list at {file}: give the run folder or its {SKIP_FILE} "
                "(written when an explained alert names a batch)"
            ) from None
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the skip list {file}: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{file} is not a mindwatch skip list (format {FORMAT!r})")
        return cls(data.get("samples", ()), data.get("steps", ()))

    def keep(self, sample_id: Any) -> bool:
        """Whether the row with ``sample_id`` stays in the dataset."""
        value = np.asarray(sample_id).reshape(-1)
        return not any(_plain(v) in self.samples for v in value.tolist())

    def add(self, entry: dict[str, Any]) -> bool:
        """Add one batch (``step``, ``rank``, ``sample_ids``...); False if already there."""
        ids = [_plain(i) for i in entry.get("sample_ids") or ()]
        key = (entry.get("step"), entry.get("rank"))
        if any((s.get("step"), s.get("rank")) == key for s in self.steps):
            return False
        self.steps.append({**entry, "sample_ids": ids})
        self.samples.update(ids)
        return True

    def to_json(self) -> dict[str, Any]:
        ordered = sorted(self.samples, key=lambda v: (isinstance(v, str), v))
        return {"format": FORMAT, "samples": ordered, "steps": self.steps}

    def write(self, path: Path) -> None:
        """Replace ``path`` atomically (raises OSError: the caller warns)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n")
        os.replace(part, path)


def resume_hint(path: Path, *, column: str = "id", step: Optional[int] = None) -> dict[str, Any]:
    """The lines that make a resumed run skip what ``path`` lists: ``python`` (a
    MindSpore dataset with an id column named ``column``) and ``yaml`` (MindFormers:
    resume after ``step``, the last bad one)."""
    python = [
        "from mindwatch.forensics import SkipList",
        f'dataset = dataset.filter(SkipList.load("{path}").keep, input_columns=["{column}"])',
    ]
    hint: dict[str, Any] = {"file": str(path), "python": python}
    if step is not None:
        hint["yaml"] = ["resume_training: True", f"data_skip_steps: {step}"]
    return hint
