"""Multi-card: each metric's cross-rank reduction, done in bulk with a few all-reduces.

Flow: at start, one all-gather of rank 0's run folder and every rank's place
(:mod:`.startup`); then ``Monitor.log_step`` -> :class:`Aggregator` buffer -> every
interval, four all-reduces whose size does not grow with the world (:mod:`.allreduce`)
through a :class:`Collective` guarded by a timeout (:mod:`.collective`) -> reduced
values and the spread across ranks, each metric as it declares (:mod:`.reductions`)
-> rank 0's global writer, and each rank's own folder.
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
