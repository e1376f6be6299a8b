"""The front door and what it drives: :class:`Monitor` (the public API), the run it
writes (:mod:`.session`) and the route its steps take, local or reduced (:mod:`.route`).
"""

from mindwatch.monitor.front import Monitor

__all__ = ["Monitor"]
