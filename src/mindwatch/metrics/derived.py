"""Values derived from what the training reports: small pure functions, and the one
stateful processor that applies them to a step.

A step arrives with its raw counts: the wall time the step(s) took (``timing``, from
:class:`~mindwatch.metrics.timing.StepClock`), samples and tokens per step.
:class:`StepRates` turns them into ``perf/step_time_ms``, ``perf/samples_per_s``,
``perf/tokens_per_s``, ``perf/tflops_per_device`` and ``perf/mfu``. Under data
parallelism this runs per rank, before the reduction; :func:`perplexity` runs after it,
on the (reduced) loss.

:data:`DERIVED_TAGS` are the tags derived here. A value the caller logs under one of them
is the one written: from that step on, the derived value of that tag is not (one point
per tag per step; see :class:`~mindwatch.metrics.steps.LocalSteps`).
"""

from __future__ import annotations

import math
from typing import Optional

from mindwatch.metrics.flops import mfu, tflops
from mindwatch.metrics.tags import TAGS

__all__ = ["DERIVED_TAGS", "StepRates", "Timing", "Values", "perplexity", "with_perplexity"]

_MAX_EXP = 709.0  # math.exp overflows beyond this
_LOSS, _PERPLEXITY = TAGS["loss"], TAGS["perplexity"]
_STEP_TIME, _SAMPLES, _TOKENS = TAGS["step_time_ms"], TAGS["samples_per_s"], TAGS["tokens_per_s"]
_TFLOPS, _MFU = TAGS["tflops_per_device"], TAGS["mfu"]
DERIVED_TAGS = frozenset((_STEP_TIME, _SAMPLES, _TOKENS, _TFLOPS, _MFU, _PERPLEXITY))

Values = list[tuple[str, float]]
Timing = tuple[float, int]  # (seconds, steps) since the previous recorded step


def perplexity(loss: float) -> float:
    """``exp(loss)`` for a mean token cross-entropy in nats; inf past float range, NaN kept."""
    if math.isnan(loss):  # NaN stays NaN, so the non-finite counter sees it
        return loss
    return math.exp(loss) if loss < _MAX_EXP else math.inf


def with_perplexity(values: Values, *, loss: str = _LOSS, into: str = _PERPLEXITY) -> Values:
    """``values`` plus perplexity of their loss (if any): ``train/perplexity`` of
    ``train/loss`` by default, or ``into`` of ``loss`` (an evaluation's)."""
    for tag, value in values:
        if tag == loss:
            return [*values, (into, perplexity(value))]
    return values


class StepRates:
    """Rates of a step from its timing: step time, samples/s, tokens/s, TFLOPS, MFU.

    Args:
        tokens_per_sample: tokens in each sample, when the caller gives only samples.
        flops_per_sample: model FLOPs of one sample (the config's); wins over a count
            given later with :meth:`set_flops_per_step`.
        peak_tflops: the device's peak, for ``perf/mfu``.

    The FLOPs and the peak may be set while steps are derived on another thread: each
    is one attribute, read once per step.
    """

    def __init__(
        self,
        *,
        tokens_per_sample: Optional[int] = None,
        flops_per_sample: Optional[float] = None,
        peak_tflops: Optional[float] = None,
    ) -> None:
        self.tokens_per_sample = tokens_per_sample
        self.flops_per_sample = flops_per_sample
        self.flops_per_step: Optional[float] = None
        self.peak_tflops = peak_tflops

    def step_flops(self, samples: Optional[float]) -> Optional[float]:
        """Model FLOPs of one step on this device: the per-sample count times the
        samples, else the per-step count, else None."""
        if self.flops_per_sample is not None:
            return None if samples is None else self.flops_per_sample * samples
        return self.flops_per_step

    def tokens(self, samples: Optional[float], tokens: Optional[float]) -> Optional[float]:
        """Tokens per step: as given, else samples x ``tokens_per_sample``."""
        if tokens is None and samples is not None and self.tokens_per_sample:
            return samples * self.tokens_per_sample
        return tokens

    def derive(
        self, timing: Optional[Timing], samples: Optional[float], tokens: Optional[float]
    ) -> Values:
        """The rates of one interval of ``timing = (seconds, steps)`` (none without it)."""
        if timing is None:
            return []
        seconds, steps = timing
        out = [(_STEP_TIME, seconds * 1000.0 / steps)]
        if samples is not None:
            out.append((_SAMPLES, samples * steps / seconds))
        if tokens is not None:
            out.append((_TOKENS, tokens * steps / seconds))
        flops = self.step_flops(samples)
        if flops is not None:
            achieved = tflops(flops, seconds / steps)
            out.append((_TFLOPS, achieved))
            if self.peak_tflops is not None:
                out.append((_MFU, mfu(achieved, self.peak_tflops)))
        return out
