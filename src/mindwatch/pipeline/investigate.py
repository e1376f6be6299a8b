"""``Investigator``: an alert's forensics, from the flight recorder to the run folder.

For an alert of one of ``alerts.forensics.rules`` (warning or critical), on the
pipeline's thread:

1. the recorder's window up to the alert's step is analysed
   (:func:`mindwatch.forensics.analyse`: first movers, the first non-finite gradient,
   the batch);
2. under a reduction across ranks, every rank's own analysis of that step is gathered
   (:mod:`mindwatch.forensics.exchange`, riding the next reduction) and merged: the
   layer movers of all ranks ranked together, the batch of the rank the alert names;
3. the whole analysis is written to ``<run>/forensics/step-<S>-<rule>.json``, its
   summary into the alert (``forensics`` in ``alerts.jsonl``: the first mover, the top
   movers, the non-finite gradient, the batch, the file; ``layer_norms`` with a
   ``note`` when no per-parameter norm was recorded), and the batch's sample ids
   into ``<run>/skip.json`` (:mod:`mindwatch.forensics.skiplist`), with the lines that
   make a resumed run skip them.

A failure here (a full disk, a bug) is a warning, once: the alert is written without
its forensics, never lost.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

import numpy as np

from mindwatch.alerts import Alert
from mindwatch.alerts.movers import layers_missing, no_layers_note
from mindwatch.common.json_values import json_float
from mindwatch.common.warn import WarnOnce
from mindwatch.config import ForensicsSettings
from mindwatch.forensics import FlightRecorder, analyse
from mindwatch.forensics.analysis import Direction
from mindwatch.forensics.exchange import decode, merge, order
from mindwatch.forensics.skiplist import SKIP_FILE, SkipList, resume_hint
from mindwatch.run.layout import FORENSICS_DIR

__all__ = ["FORENSICS_DIR", "Investigator"]

log = logging.getLogger(__name__)

_SUMMARY_MOVERS = 5  # movers in the alert line; the file keeps them all


class Investigator:
    """The forensics of one run's alerts (see the module docs).

    Args:
        settings: ``alerts.forensics``.
        recorder: this rank's flight recorder.
        run_dir: the run folder (``alerts.jsonl``'s).
        rank: this process's rank.
    """

    def __init__(
        self, settings: ForensicsSettings, recorder: FlightRecorder, run_dir: Path, rank: int
    ) -> None:
        self.settings = settings
        self.recorder = recorder
        self.run_dir = run_dir
        self.rank = rank
        self.skips = SkipList()
        self._warn = WarnOnce(log)

    def explains(self, alert: Alert) -> bool:
        return alert.severity != "info" and alert.rule in self.settings.rules

    def analyse(
        self, step: int, batch: Optional[int] = None, *, rule: Optional[str] = None
    ) -> dict[str, Any]:
        """This rank's analysis of ``step`` (layers that fell, for a vanishing-gradient
        alert; that grew, for the others)."""
        s = self.settings
        window = self.recorder.window(step)
        direction: Direction = "down" if rule == "grad_vanishing" else "up"
        return analyse(
            window,
            step,
            lookback=s.lookback,
            z=s.z,
            rank=self.rank,
            batch=batch,
            direction=direction,
        )

    def finish(
        self,
        alert: Alert,
        local: dict[str, Any],
        slots: Optional[np.ndarray[Any, Any]] = None,
    ) -> None:
        """Write ``alert``'s forensics (file, skip list) and put their summary in it;
        ``slots``: every rank's, when they were gathered."""
        try:
            full = self._merged(alert, local, slots)
            missing = layers_missing(full)
            if missing is not None:  # said in words too, for a reader of the file
                full["layer_norms"] = {**missing, "note": no_layers_note(missing)}
            summary = _summary(full)
            skip = self._skip(alert, full.get("batch"), full.pop("blame_onset", None))
            if skip is not None:
                summary["skip"] = full["skip"] = skip
            ids = (full.get("batch") or {}).get("sample_ids")
            if ids is not None:
                alert.extra["sample_ids"] = ids
            elif full.get("blame", self.rank) != self.rank:
                alert.extra.pop("sample_ids", None)  # this rank's batch is not the one
            path = self._file(alert)
            record = _clean({**full, "alert": alert.to_dict()})
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(record, ensure_ascii=False, indent=1, allow_nan=False)
            path.write_text(text + "\n", encoding="utf-8")
            summary["file"] = path.relative_to(self.run_dir).as_posix()
        except Exception as exc:  # the alert is written all the same
            self._warn(
                "finish",
                "mindwatch: the forensics of the %s alert at step %d could not be written: %r",
                alert.rule,
                alert.step,
                exc,
            )
        else:
            alert.extra["forensics"] = _clean(summary)

    def _merged(
        self, alert: Alert, local: dict[str, Any], slots: Optional[np.ndarray[Any, Any]]
    ) -> dict[str, Any]:
        if slots is None or slots.ndim != 2:
            return {**local, "blame_onset": local.get("loss_onset")}
        names = self.recorder.layer_names
        per_rank: list[dict[str, Any]] = []
        for r in range(slots.shape[0]):
            if r == self.rank:
                per_rank.append({**local, "rank": r})
                continue
            got = decode(slots[r], r, names)
            if got is not None:
                per_rank.append(got)
        merged = merge(alert.step, per_rank)
        # This rank's other scalars (grad norm, lr, loss scale: the job's); every rank's
        # loss comes from the merge.
        scalars = [
            m for m in local.get("movers", ()) if m["kind"] != "layer" and m["name"] != "loss"
        ]
        full = dict(local)
        full.update(
            movers=sorted(merged["movers"] + scalars, key=order),
            ranks=merged["ranks"],
            loss_onset=merged["loss_onset"],
            per_rank=per_rank,
        )
        full.pop("first_mover", None)
        for key in ("first_mover", "nonfinite"):
            if key in merged:
                full[key] = merged[key]
        # The batch of the rank the alert names when its loss departed, else of the rank
        # whose loss departed first (a grad-norm alert names no rank: the norm is the
        # all-reduced gradient's), else this rank's.
        losing = {m["rank"] for m in merged["movers"] if m["name"] == "loss"}
        blamed = alert.rank if alert.rank in losing else merged["blame"]
        if blamed is None:
            blamed = alert.rank if alert.rank is not None else self.rank
        full["blame"] = blamed
        own = next((a for a in per_rank if a["rank"] == blamed), {})
        full["blame_onset"] = own.get("loss_onset")
        batch = own.get("batch")
        if batch is not None:
            full["batch"] = {**batch, "step": alert.step, "batch": alert.batch}
        return full

    def _file(self, alert: Alert) -> Path:
        folder = self.run_dir / FORENSICS_DIR
        stem = f"step-{alert.step}-{alert.rule}"
        path = folder / f"{stem}.json"
        n = 2
        while path.exists():
            path = folder / f"{stem}-{n}.json"
            n += 1
        return path

    def _skip(
        self, alert: Alert, batch: Optional[dict[str, Any]], onset: Optional[int]
    ) -> Optional[dict[str, Any]]:
        """Add the alert's batch to ``skip.json``; the resume lines, or None."""
        if not self.settings.skip_list or not batch or not batch.get("sample_ids"):
            return None
        # The samples whose inputs were not finite, when they are known by id; else the
        # whole batch, if it is the one the loss jumped on (a loss spike is the batch's:
        # which sample is not known). An alert in a spike's aftermath (a layer still
        # outlying two steps on) blames no batch of its own.
        bad = batch.get("nonfinite_samples") or []
        named = [i for i in bad if not (isinstance(i, str) and i.startswith("#"))]
        if not named and onset != alert.step:
            return None
        entry = {
            "step": alert.step,
            "rank": batch.get("rank"),
            "epoch": alert.epoch,
            "batch": alert.batch,
            "rule": alert.rule,
            "sample_ids": named or batch["sample_ids"],
        }
        path = self.run_dir / SKIP_FILE
        if self.skips.add(entry):
            self.skips.write(path)
        return resume_hint(path, step=alert.step)


def _summary(full: dict[str, Any]) -> dict[str, Any]:
    """What the alert line carries (the file has the rest)."""
    out: dict[str, Any] = {"movers": full.get("movers", [])[:_SUMMARY_MOVERS]}
    keys = ("first_mover", "loss_onset", "nonfinite", "batch", "ranks", "blame", "layer_norms")
    for key in keys:
        if full.get(key) is not None:
            out[key] = full[key]
    return out


def _clean(value: Any) -> Any:
    """``value`` as strict JSON keeps it: numpy scalars as numbers, NaN and infinities
    as protobuf's JSON strings (``json_float``)."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return json_float(value)
    return value
