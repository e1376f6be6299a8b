"""Training logs -> points: MindFormers' ``MFLossMonitor`` (1.x) and ``LossCallback`` /
``TrainStateMonitor`` / ``MaxLogitsMonitor`` (2.x PyNative), and MindSpore's
``LossMonitor`` / ``TimeMonitor`` lines, as ``msrun`` leaves them in ``worker_<i>.log``.

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

MindFormers 2.1's PyNative trainer (format strings read from its wheel:
``docs/dev/mindformers-2.1-source.md``, section 5 and 7) counts global steps::

    { step:[   53/  250], consumed_samples: 424, global_batch_size: 8, loss:   7.123456,
      per_step_time:    535ms, lr: 1.000000e-04, grad_norm:   1.234567, throughput:   6.99T }
    {"step": 53, "micro_step": 1, "local_loss": 0.89}      {"step": 53, "device_loss": 0.9}
    { "step": 53, "micro_step": 1 }                         (then one line a parameter:)
    { "local_norm": model.layers.0.attention.wq.weight:   0.123456 }
    step:[   53/  250] max_attention_logit/model.layers.0.attention.wq.weight: [12.5, 9.75]

Their ``throughput`` is TFLOPS per device (``perf/tflops_per_device``), not samples/s. A
literal ``grad_norm: NaN`` is 2.x's "no norm" (a non-last pipeline stage), not a
non-finite norm (that prints ``nan``); ``loss: N/A (...)`` likewise. ``local_norm``
becomes ``layers/grad_norm/<param>`` (the per-layer gradient norms mindwatch's layer
rules and forensics read), ``device_norm`` ``layers/device_norm/<param>``; with gradient
accumulation, micro-steps after the first keep their number (``train/local_loss/micro_2``,
``layers/local_norm_micro_2/<param>``). A per-head list of attention logits becomes its
largest value, as ``.../max`` is the largest of all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
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
_MF2 = re.compile(r"\{ step:\[\s*(?P<step>\d+)/\s*\d+\], (?P<rest>.*)\}")
_MF2_FIELDS = {
    "train/consumed_samples": re.compile(r"consumed_samples: (\d+)"),
    "train/batch_size": re.compile(r"global_batch_size: (\d+)"),
    "train/loss": re.compile(r"\bloss:\s*(" + _NUMBER + r")"),
    "perf/step_time_ms": re.compile(r"per_step_time:\s*(\d+)ms"),
    "train/load_balancing_loss": re.compile(r"load_balancing_loss:\s*(" + _NUMBER + r")"),
    "train/indexer_loss": re.compile(r"indexer_loss:\s*(" + _NUMBER + r")"),
    "train/lr": re.compile(r"\blr:\s*(" + _NUMBER + r")"),
    "train/grad_norm": re.compile(r"grad_norm:\s*(?!NaN\b)(" + _NUMBER + r")"),
    "perf/tflops_per_device": re.compile(r"throughput:\s*(" + _NUMBER + r")T"),
}
_MF2_MTP = re.compile(r"\bmtp_(\d+)_loss:\s*(" + _NUMBER + r")")
_MF2_RECORD = re.compile(r"(\{\s*\"step\".*\})\s*$")
_MF2_NORM = re.compile(r'\{ "(local_norm|device_norm)": (\S+):\s*(' + _NUMBER + r") \}")
_MF2_LOGIT = re.compile(
    r"step:\[\s*(?P<step>\d+)/\s*\d+\] (?P<tag>max_attention_logit/\S+): (?P<value>.+)$"
)
_MF2_RECORDS = {"local_loss": "train/local_loss", "device_loss": "train/device_loss"}
_MARKERS = (
    *("Epoch:[", "loss is", "epoch time:", "samples/s/p"),
    *("{ step:[", '"step"', '{ "local_norm"', '{ "device_norm"', "max_attention_logit/"),
)


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
    _norm_step: Optional[tuple[int, int]] = None  # 2.x: the step and micro-step of norms

    def feed(self, line: str) -> list[Point]:
        self.lines += 1
        if not any(marker in line for marker in _MARKERS):
            return []
        try:
            points = self._parse(line)
        except (ValueError, IndexError, KeyError, TypeError):
            points = None
        if points is None:
            self.skipped += 1
            return []
        self.parsed += 1
        return points

    def _parse(self, line: str) -> Optional[list[Point]]:
        """The points of the first format whose pattern matches and whose reader takes
        the line (a speed or time line needs the step of a loss line before it)."""
        for pattern, read in _READERS:
            match = pattern.search(line)
            points = read(self, match) if match else None
            if points is not None:
                return points
        return None

    def _after_loss(self, tag: str, text: str) -> Optional[list[Point]]:
        if self._last_step is None:
            return None
        return [Point(self._last_step, tag, float(text))]

    def _speed(self, match: re.Match[str]) -> Optional[list[Point]]:
        return self._after_loss("perf/samples_per_s", match.group(1))

    def _epoch_time(self, match: re.Match[str]) -> Optional[list[Point]]:
        return self._after_loss("perf/step_time_ms", match["step_ms"])

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

    def _mindformers2(self, match: re.Match[str]) -> Optional[list[Point]]:
        step = int(match["step"])
        rest = match["rest"]
        points = []
        for tag, pattern in _MF2_FIELDS.items():
            found = pattern.search(rest)
            if found:
                points.append(Point(step, tag, float(found.group(1))))
        points += [Point(step, f"train/mtp_{i}_loss", float(v)) for i, v in _MF2_MTP.findall(rest)]
        if not points:
            return None
        self._last_step = step
        return points

    def _record(self, match: re.Match[str]) -> Optional[list[Point]]:
        """A JSON line of 2.x's TrainStateMonitor: a loss record, or a norms header."""
        record = json.loads(match.group(1))
        step = int(record["step"])
        micro = int(record.get("micro_step", 1))
        points = []
        for key, tag in _MF2_RECORDS.items():
            if key in record:
                name = tag if micro == 1 else f"{tag}/micro_{micro}"
                points.append(Point(step, name, float(record[key])))
        if set(record) <= {"step", "micro_step"}:
            self._norm_step = (step, micro)  # the norm lines that follow are this step's
            return []
        return points or None

    def _norm(self, match: re.Match[str]) -> Optional[list[Point]]:
        if self._norm_step is None:
            return None  # a norm line without its header (the log cut before it)
        step, micro = self._norm_step
        kind, name, value = match.groups()
        if kind == "device_norm":
            folder = "layers/device_norm"
        else:
            folder = "layers/grad_norm" if micro == 1 else f"layers/local_norm_micro_{micro}"
        return [Point(step, f"{folder}/{name}", float(value))]

    def _logit(self, match: re.Match[str]) -> Optional[list[Point]]:
        values = [float(v) for v in match["value"].strip().strip("[]").split(",")]
        return [Point(int(match["step"]), match["tag"], max(values))]

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


# Each format's pattern and reader, in the order they are tried (built once, not a line).
_READERS: tuple[
    tuple[re.Pattern[str], Callable[[LogParser, re.Match[str]], Optional[list[Point]]]], ...
] = (
    (_MF, LogParser._mindformers),
    (_MF2, LogParser._mindformers2),
    (_MF2_NORM, LogParser._norm),
    (_MF2_LOGIT, LogParser._logit),
    (_MF2_RECORD, LogParser._record),
    (_MF_SPEED, LogParser._speed),
    (_MS_LOSS, LogParser._loss_monitor),
    (_MS_TIME, LogParser._epoch_time),
)
