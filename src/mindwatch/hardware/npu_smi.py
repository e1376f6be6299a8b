"""Read Ascend NPU telemetry by running ``npu-smi`` (no framework imports).

Queries and why:

- ``npu-smi info -m`` once: maps the logical device id (MindSpore's ``device_id``,
  msrun's ``DEVICE_ID``) to an NPU id and chip id.  The logical id is the "Chip Logic
  ID" column; rows with ``-`` there (an MCU) are not devices.  Cached: it never changes
  while a job runs.
- ``npu-smi info`` (the summary table) per read: one call gives name, health, power,
  temperature, AICore % and HBM (or, on 310P/310B, DDR) used/total for every chip, so a
  read costs one process.  The ``-t usages/temp/power/health`` queries print
  ``Key : value`` lines; :func:`parse_key_values` reads them, but the reader does not
  call them because each is another process for values the table already holds.

Power is ``NA`` on 310P and ``-`` for the second chip of a 910 (A3) card: absent, never 0.

No NPU was available while this was written: it is tested only on recordings of real
outputs (``tests/fixtures/npu_smi/SOURCES.md``) and on stand-in executables.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Optional

logger = logging.getLogger(__name__)

HEALTH_CODES: dict[str, float] = {"OK": 0.0, "WARNING": 1.0, "ALARM": 2.0, "CRITICAL": 3.0}
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


@dataclass
class ChipRow:
    """One chip in the ``npu-smi info`` summary table."""

    npu: int
    chip: int
    name: str
    values: dict[str, float] = field(default_factory=dict)


def health_code(text: str) -> float:
    """0 OK, 1 Warning, 2 Alarm, 3 Critical, 4 anything else."""
    return HEALTH_CODES.get(text.strip().upper(), 4.0)


def _num(text: str) -> Optional[float]:
    text = text.strip()
    return float(text) if _NUMBER.match(text) else None


def parse_info_table(text: str) -> list[ChipRow]:
    """Parse the summary table; a chip is two ``|`` rows after a ``+===``/``+---`` rule."""
    rows: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("|") and line.endswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif line.startswith("+"):
            rows.append([])
    chips: list[ChipRow] = []
    for i in range(len(rows) - 1):
        first, second = rows[i], rows[i + 1]
        if len(first) != 3 or len(second) != 3 or (i > 0 and rows[i - 1]):
            continue
        head = first[0].split()
        if len(head) < 2 or not head[0].isdigit() or not second[0].split():
            continue
        chip_field = second[0].split()[0]
        if not chip_field.isdigit():
            continue
        row = ChipRow(npu=int(head[0]), chip=int(chip_field), name=" ".join(head[1:]))
        row.values["npu_health"] = health_code(first[1])
        top = first[2].split()
        if top:
            power = _num(top[0])
            if power is not None:
                row.values["npu_power_w"] = power
        if len(top) > 1 and _num(top[1]) is not None:
            row.values["npu_temp_c"] = float(top[1])
        bottom = second[2]
        aicore = _num(bottom.split()[0]) if bottom.split() else None
        if aicore is not None:
            row.values["npu_aicore_pct"] = aicore
        pairs = _PAIR.findall(bottom)
        # With an HBM column the last pair is HBM; without one (310P/310B) it is DDR.
        if pairs:
            used, total = float(pairs[-1][0]), float(pairs[-1][1])
            row.values["npu_hbm_used_mb"] = used
            row.values["npu_hbm_total_mb"] = total
            if total > 0:
                row.values["npu_hbm_used_pct"] = round(100.0 * used / total, 2)
        chips.append(row)
    return chips


def parse_mapping(text: str) -> dict[int, tuple[int, int, str]]:
    """``npu-smi info -m`` -> {logical id: (npu id, chip id, chip name)}."""
    mapping: dict[int, tuple[int, int, str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit() and parts[2].isdigit():
            mapping[int(parts[2])] = (int(parts[0]), int(parts[1]), " ".join(parts[3:]))
    return mapping


def parse_key_values(text: str) -> dict[str, str]:
    """``npu-smi info -t <type>`` prints ``Key : value`` lines; return them stripped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def find(executable: str = "npu-smi") -> Optional[str]:
    """The path of ``npu-smi`` on PATH (or the given path), or None."""
    return shutil.which(executable)


def available(executable: str = "npu-smi") -> bool:
    return find(executable) is not None


class NpuSmi:
    """Reads one logical device's values; ``read()`` never raises and never hangs."""

    def __init__(self, device_id: int, executable: str = "npu-smi", timeout: float = 5.0) -> None:
        self.device_id = device_id
        self.executable = executable
        self.timeout = timeout
        self.status = "not read"
        self.chip_name: Optional[str] = None
        self._location: Optional[tuple[int, int]] = None
        self._warned: set[str] = set()

    def _warn_once(self, cause: str, message: str) -> None:
        self.status = cause
        if cause not in self._warned:
            self._warned.add(cause)
            logger.warning(message)

    def _run(self, args: list[str]) -> Optional[str]:
        command = [self.executable, *args]
        shown = " ".join(command)
        path = find(self.executable)
        if path is None:
            if os.path.exists(self.executable):
                self._warn_once("permission", f"{shown}: permission denied; make it executable")
            else:
                self._warn_once("absent", f"{self.executable} not found: no NPU values")
            return None
        try:
            done = subprocess.run(
                [path, *args], capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except subprocess.TimeoutExpired:
            # subprocess.run kills the child before raising.
            self._warn_once("timeout", f"{shown} gave no answer in {self.timeout} s; killed")
            return None
        except PermissionError:
            self._warn_once("permission", f"{shown}: permission denied; make it executable")
            return None
        except OSError as error:
            self._warn_once("error", f"{shown} could not start: {error}")
            return None
        return done.stdout

    def _garbage(self, args: list[str], text: str) -> None:
        first = text.strip().splitlines()[0] if text.strip() else "(no output)"
        self._warn_once(
            "unparseable", f"{' '.join([self.executable, *args])} printed nothing known: {first!r}"
        )

    def read(self) -> dict[str, float]:
        try:
            return self._read()
        except Exception as error:  # never take training down
            self._warn_once("error", f"reading npu-smi failed: {error!r}")
            return {}

    def _read(self) -> dict[str, float]:
        if self._location is None:
            text = self._run(["info", "-m"])
            if text is None:
                return {}
            mapping = parse_mapping(text)
            if self.device_id not in mapping:
                self._garbage(["info", "-m"], text)
                return {}
            npu, chip, name = mapping[self.device_id]
            self._location = (npu, chip)
            self.chip_name = name
        text = self._run(["info"])
        if text is None:
            return {}
        for row in parse_info_table(text):
            if (row.npu, row.chip) == self._location:
                self.status = "ok"
                return dict(row.values)
        self._garbage(["info"], text)
        return {}
