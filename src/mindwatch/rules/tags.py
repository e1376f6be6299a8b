"""Which of a step's tags a rule reads, found once per set of tags.

A rule that reads every tag of a kind (``layers/grad_norm/...``, ``...max_attention_logit...``)
would test each tag of each step in Python; the tags a run logs are nearly always the
same from step to step, so :class:`MatchingTags` tests them only when the step's set of
tags differs from the previous one (a comparison that runs in C).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

__all__ = ["MatchingTags"]


class MatchingTags:
    """The tags of ``values`` that pass ``test``, cached by the set of tags."""

    def __init__(self, test: Callable[[str], bool]) -> None:
        self.test = test
        self.keys: frozenset[str] = frozenset()
        self.tags: list[str] = []

    def __call__(self, values: Mapping[str, float]) -> list[str]:
        keys = values.keys()
        if keys != self.keys:
            self.keys = frozenset(keys)
            self.tags = [tag for tag in keys if self.test(tag)]
        return self.tags
