"""Training logs -> points: MindFormers' ``MFLossMonitor`` and MindSpore's ``LossMonitor`` /
``TimeMonitor`` lines, as ``msrun`` leaves them in ``worker_<i>.log``.

Formats (MindSpore 2.10, MindFormers 1.x; see ``docs/convert.md``)::

    { Epoch:[  1/  2], step:[    3/   60], loss:[13.048952/21.278730], per_step_time: 50ms,
      lr: 0.001, overflow cond: False, loss_scale: 1.0, global_norm: 10.430349
       2.5% |█    | 158.62055 samples/s/p  0:00:05 }
    epoch: 1 step: 5, loss is 2.3025851
    Train epoch time: 1234.567 ms, per step time: 12.346 ms

``step:[s/S]`` and ``epoch: e step: s`` count steps within the epoch; the global step is
``(epoch - 1) * steps_per_epoch + s``. MFLossMonitor prints ``S``; for LossMonitor lines
the steps per epoch are the largest step seen in the first epoch (give
``steps_per_epoch`` when the print interval does not divide the epoch). A line that
looks like a monitor line but does not parse is counted, never fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

__all__ = ["LogParser", "Point"]

_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf|NaN|Inf|-inf)"
_MF = re.compile(
    r"\{ Epoch:\[\s*(?P<epoch>\d+)/\s*\d+\], step:\[\s*(?P<step>\d+)/\s*(?P<steps>\d+)\], "
    r"loss:\s*\[?\s*(?P<loss>" + _NUMBER + r")(?:/\s*" + _NUMBER + r")?\]?"
    r"(?P<rest>.*)$"
)
_MF_FIELDS = {
    "per_step_time": re.compile(r"per_step_time: (" + _NUMBER + r")ms"),
    "lr": re.compile(r"\blr: (" + _NUMBER + r")"),
    "overflow": re.compile(r"overflow cond: (True|False)"),
    "loss_scale": re.compile(r"loss_scale: (" + _NUMBER + r")"),
    "global_norm": re.compile(r"global_norm: \[?(" + _NUMBER + r")"),
}
_MF_SPEED = re.compile(r"\|\s*(" + _NUMBER + r") samples/s/p")
_MS_LOSS = re.compile(
    r"epoch: (?P<epoch>\d+) step: (?P<step>\d+), loss is (?P<loss>" + _NUMBER + r")"
)
_MS_TIME = re.compile(
    r"epoch time: (?P<epoch_ms>" + _NUMBER + r") ms, "
    r"per step time: (?P<step_ms>" + _NUMBER + r") ms"
)
_MARKERS = ("Epoch:[", "loss is", "epoch time:", "samples/s/p")


@dataclass(frozen=True)
class Point:
    step: int
    tag: str
    value: float


@dataclass
class LogParser:
    """Feed lines; get points. Keeps what it needs across lines (and calls)."""

    steps_per_epoch: Optional[int] = None
    lines: int = 0
    parsed: int = 0
    skipped: int = 0
    _last_step: Optional[int] = None
    _first_epoch_max: int = 0

    def feed(self, line: str) -> list[Point]:
        self.lines += 1
        if not any(marker in line for marker in _MARKERS):
            return []
        try:
            points = self._parse(line)
        except (ValueError, IndexError):
            points = None
        if points is None:
            self.skipped += 1
            return []
        self.parsed += 1
        return points

    def _parse(self, line: str) -> Optional[list[Point]]:
        match = _MF.search(line)
        if match:
            return self._mindformers(match)
        match = _MF_SPEED.search(line)
        if match and self._last_step is not None:
            return [Point(self._last_step, "perf/samples_per_s", float(match.group(1)))]
        match = _MS_LOSS.search(line)
        if match:
            return self._loss_monitor(match)
        match = _MS_TIME.search(line)
        if match and self._last_step is not None:
            return [Point(self._last_step, "perf/step_time_ms", float(match["step_ms"]))]
        return None

    def _mindformers(self, match: re.Match[str]) -> list[Point]:
        epoch, step = int(match["epoch"]), int(match["step"])
        per_epoch = self.steps_per_epoch or int(match["steps"])
        global_step = (epoch - 1) * per_epoch + step
        self._last_step = global_step
        points = [Point(global_step, "train/loss", float(match["loss"]))]
        rest = match["rest"]
        for name, pattern in _MF_FIELDS.items():
            found = pattern.search(rest)
            if not found:
                continue
            text = found.group(1)
            if name == "overflow":
                points.append(Point(global_step, "train/overflow", float(text == "True")))
            elif name == "per_step_time":
                points.append(Point(global_step, "perf/step_time_ms", float(text)))
            elif name == "global_norm":
                points.append(Point(global_step, "train/grad_norm", float(text)))
            else:
                points.append(Point(global_step, f"train/{name}", float(text)))
        return points

    def _loss_monitor(self, match: re.Match[str]) -> Optional[list[Point]]:
        epoch, step = int(match["epoch"]), int(match["step"])
        if epoch == 1:
            self._first_epoch_max = max(self._first_epoch_max, step)
        per_epoch = self.steps_per_epoch or self._first_epoch_max
        if epoch > 1 and not per_epoch:
            return None
        global_step = (epoch - 1) * per_epoch + step
        self._last_step = global_step
        return [Point(global_step, "train/loss", float(match["loss"]))]
