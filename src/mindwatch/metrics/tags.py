"""TensorBoard tag names. Namespaced (``train/``, ``eval/``, ``perf/``) so TensorBoard
groups them into sections; units live in the name's suffix (``_ms``, ``_per_s``)."""

from __future__ import annotations

__all__ = ["MINDFORMERS_TAGS", "TAGS", "eval_tag", "tag_for"]

TAGS = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "perplexity": "train/perplexity",
    "step_time_ms": "perf/step_time_ms",
    "samples_per_s": "perf/samples_per_s",
    "tokens_per_s": "perf/tokens_per_s",
}

# tag_style: mindformers -- the names MindFormers' MFLossMonitor writes (its
# "<tag> vs samples" twins are added by the monitor), so existing dashboards keep working.
MINDFORMERS_TAGS = {
    "train/loss": "loss",
    "train/lr": "learning-rate",
    "train/grad_norm": "grad-norm",
    "train/loss_scale": "loss-scale",
    "perf/step_time_ms": "iteration-time",
    "perf/samples_per_s": "throughput",
}


def tag_for(key: str) -> str:
    """Tag of a user scalar: ``key`` as is when it has a namespace, else ``train/<key>``."""
    return key if "/" in key else f"train/{key}"


def eval_tag(key: str) -> str:
    """Tag of an evaluation metric: ``eval/<key>`` unless it has a namespace already."""
    return key if "/" in key else f"eval/{key}"
