"""Values derived from what the training reports: small pure functions."""

from __future__ import annotations

import math

__all__ = ["perplexity"]

_MAX_EXP = 709.0  # math.exp overflows beyond this


def perplexity(loss: float) -> float:
    """``exp(loss)`` for a mean token cross-entropy in nats; inf past float range, NaN kept."""
    if math.isnan(loss):  # NaN stays NaN, so the non-finite counter sees it
        return loss
    return math.exp(loss) if loss < _MAX_EXP else math.inf
