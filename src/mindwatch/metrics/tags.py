"""TensorBoard tag names. Namespaced (``train/``, ``eval/``, ``perf/``) so TensorBoard
groups them into sections; units live in the name's suffix (``_ms``, ``_per_s``)."""

from __future__ import annotations

__all__ = ["TAGS", "eval_tag", "tag_for"]

TAGS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "perplexity": "train/perplexity",
    "step_time_ms": "perf/step_time_ms",
    "compute_ms": "perf/compute_ms",
    "data_wait_ms": "perf/data_wait_ms",
    "samples_per_s": "perf/samples_per_s",
    "tokens_per_s": "perf/tokens_per_s",
    "tflops_per_device": "perf/tflops_per_device",
    "mfu": "perf/mfu",
}


def tag_for(key: str) -> str:
    """Tag of a user scalar: ``key`` as is when it has a namespace, else ``train/<key>``."""
    return key if "/" in key else f"train/{key}"


def eval_tag(key: str) -> str:
    """Tag of an evaluation metric: ``eval/<key>`` unless it has a namespace already."""
    return key if "/" in key else f"eval/{key}"
