"""``mindwatch export``: every scalar below a folder to CSV, Parquet or JSON lines."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mindwatch.common.json_values import json_float

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FORMATS", "export_scalars"]

Format = Literal["csv", "parquet", "jsonl"]
FORMATS: tuple[Format, ...] = ("csv", "parquet", "jsonl")


def export_scalars(frame: pd.DataFrame, path: Path, fmt: Format) -> None:
    """Write ``frame`` (columns run, tag, step, wall_time, value) to ``path`` as ``fmt``.

    CSV writes NaN as ``NaN`` and infinities as ``inf``/``-inf`` (what pandas and numpy
    read back); JSON lines use ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; Parquet
    keeps the floats as they are (it needs the ``pyarrow`` package).
    """
    if fmt == "csv":
        frame.to_csv(path, index=False, na_rep="NaN", float_format="%.17g")
    elif fmt == "parquet":
        if importlib.util.find_spec("pyarrow") is None:
            raise RuntimeError(
                "Parquet needs the pyarrow package: pip install pyarrow "
                "(or export --format csv / jsonl)"
            )
        frame.to_parquet(path, index=False)
    elif fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as out:
            for run, tag, step, wall, value in frame.itertuples(index=False, name=None):
                record = {
                    "run": run,
                    "tag": tag,
                    "step": int(step),
                    "wall_time": wall,
                    "value": json_float(value),
                }
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:  # pragma: no cover - the CLI validates
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
