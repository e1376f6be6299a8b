"""A MindSpore summary *tensor* as TensorBoard can show it.

TensorBoard has no view for a whole tensor. A one-element tensor is a scalar; a larger
one is drawn as a histogram of its values (:func:`mindwatch.events.summaries.histogram_value`)
and, up to :data:`TEXT_VALUES_LIMIT` values, listed as a text table ``<tag>/values``
(TensorBoard's TEXT tab renders markdown). ``mindwatch convert`` and
:class:`mindwatch.mindspore.SummaryRecord` both use these, so a tensor looks the same
whichever way it reached TensorBoard.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TEXT_VALUES_LIMIT", "markdown_table", "values_tag"]

# Beyond this many values a table is unreadable (and large): the histogram alone shows it.
TEXT_VALUES_LIMIT = 1000


def values_tag(tag: str) -> str:
    """The text tag that lists a tensor's values."""
    return f"{tag}/values"


def markdown_table(values: np.ndarray[Any, Any]) -> str:
    """A tensor's values as text TensorBoard renders (a table for 1-D and 2-D tensors)."""
    shape = "x".join(str(d) for d in values.shape)
    if values.ndim in (1, 2):
        rows = values.reshape(1, -1) if values.ndim == 1 else values
        header = "| " + " | ".join(str(i) for i in range(rows.shape[1])) + " |"
        rule = "|" + "---|" * rows.shape[1]
        body = ["| " + " | ".join(f"{v:.6g}" for v in row.tolist()) + " |" for row in rows]
        return "\n".join([f"shape {shape}", "", header, rule, *body])
    return f"shape {shape}\n\n```\n{np.array2string(values, precision=6)}\n```"
