"""Metric names and the pure calculators that derive values from raw counts."""

from mindwatch.metrics.tags import TAGS, tag_for
from mindwatch.metrics.timing import StepClock, StepTiming

__all__ = ["TAGS", "StepClock", "StepTiming", "tag_for"]
