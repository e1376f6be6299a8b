"""Multi-card: each metric's cross-rank reduction, done in bulk with one all-gather.

Flow: ``Monitor.log_step`` -> :class:`Aggregator` buffer -> every interval, one
all-gather of packed steps (:mod:`.packing`) through a :class:`Collective` guarded by a
timeout (:mod:`.collective`) -> reduced values and the spread across ranks
(:mod:`.reductions`) -> rank 0's global writer, and each rank's own folder.
"""

from mindwatch.aggregate.aggregator import Aggregator
from mindwatch.aggregate.collective import AggregationError, Collective, CollectiveGuard
from mindwatch.aggregate.reductions import Reduction, ReductionTable

__all__ = [
    "AggregationError",
    "Aggregator",
    "Collective",
    "CollectiveGuard",
    "Reduction",
    "ReductionTable",
]
