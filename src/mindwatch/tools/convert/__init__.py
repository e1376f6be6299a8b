"""``mindwatch convert SOURCES DST``: MindSpore summaries or training logs as TensorBoard runs.

The flow: :func:`plan_conversion` says what the sources are and :func:`convert` carries
the plan out (:mod:`.plan`): summary files (``*_MS``) through :mod:`.summaries`, one run
per summary folder; training logs through :mod:`.logs`, whose lines :mod:`.log_lines`
parses, one run per worker plus one reduced across them.
"""

from mindwatch.tools.convert.logs import convert_logs
from mindwatch.tools.convert.plan import ConversionError, ConversionPlan, convert, plan_conversion
from mindwatch.tools.convert.summaries import convert_summaries

__all__ = [
    "ConversionError",
    "ConversionPlan",
    "convert",
    "convert_logs",
    "convert_summaries",
    "plan_conversion",
]
