"""TensorBoard tag names. Namespaced (``train/``, ``eval/``, ``perf/``) so TensorBoard
groups them into sections; units live in the name's suffix (``_ms``, ``_per_s``)."""

from __future__ import annotations

__all__ = ["TAGS", "eval_tag", "tag_for"]

TAGS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "step_time_ms": "perf/step_time_ms",
    "samples_per_s": "perf/samples_per_s",
    "tokens_per_s": "perf/tokens_per_s",
}

_custom: dict[str, str] = {}
_eval: dict[str, str] = {}


def tag_for(key: str) -> str:
    """Tag of a user scalar: ``key`` as is when it has a namespace, else ``train/<key>``."""
    tag = _custom.get(key)
    if tag is None:
        tag = key if "/" in key else f"train/{key}"
        _custom[key] = tag
    return tag


def eval_tag(key: str) -> str:
    """Tag of an evaluation metric: ``eval/<key>`` unless it has a namespace already."""
    tag = _eval.get(key)
    if tag is None:
        tag = key if "/" in key else f"eval/{key}"
        _eval[key] = tag
    return tag
