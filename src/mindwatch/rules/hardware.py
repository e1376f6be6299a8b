"""The device rules: ``npu_temperature``, ``hbm_full`` and ``npu_health``.

Each reads one npu-smi value (:mod:`mindwatch.hardware.npu_smi`) and judges it at a
warning and a critical level, sustained over samples and training time
(:class:`~mindwatch.rules.sustained.LevelRule`). Under data parallelism every tag here
is reduced with ``max`` (``hw/npu_hbm_total_mb`` with ``min``), so rank 0 judges the
job's worst rank, and ``ranks/<name>_argmax`` names it: each finding carries that rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Optional

from pydantic import Field, ValidationInfo, field_validator

from mindwatch.common.i18n import N_
from mindwatch.rules.base import fmt
from mindwatch.rules.sustained import LevelRule, Sustained, SustainedSettings

__all__ = [
    "HbmFullRule",
    "HbmFullSettings",
    "NpuHealthRule",
    "NpuHealthSettings",
    "NpuTemperatureRule",
    "NpuTemperatureSettings",
]


# ---------------------------------------------------------------- npu_temperature


def _at_least(value: float, info: ValidationInfo, warning: str) -> float:
    """A critical level below its warning level is refused, naming both."""
    floor = info.data.get(warning)
    if floor is not None and value < floor:
        raise ValueError(
            f"{info.field_name} ({value}) must be at least {warning} ({floor}): raise "
            f"{info.field_name} or lower {warning}"
        )
    return value


class NpuTemperatureSettings(SustainedSettings):
    """``npu_temperature``: an NPU chip as hot as ``warning_c`` or ``critical_c``, sustained.

    Defaults from Huawei's own figures: the Atlas 200 AI module's hardware guide
    (Ascend 310, support.huawei.com EDOC1100223191, "散热设计") gives the chip's junction
    temperature, as its sensor reports it, a maximum of 105 °C and asks that it never
    exceed 100 °C, the long-term limit. No such public figure was found for the 910
    family; its npu-smi recordings show 40-50 °C idle, and monitoring guides for Ascend
    name 80-85 °C as the start of throttling risk. So: a warning at 85 °C (15 °C of
    margin, time to look at the fans or the air flow) and critical at 95 °C (5 °C from
    the long-term limit: the chip may throttle or the driver shut it down). A warm
    burst of a few seconds is neither: 3 samples spanning 20 s."""

    warning_c: float = Field(default=85.0, gt=0, le=200, description="Warning at or above (°C).")
    critical_c: float = Field(default=95.0, gt=0, le=200, description="Critical at or above (°C).")

    @field_validator("critical_c")
    @classmethod
    def _ordered(cls, value: float, info: ValidationInfo) -> float:
        return _at_least(value, info, "warning_c")


class NpuTemperatureRule(LevelRule[NpuTemperatureSettings]):
    """``hw/npu_temp_c`` (the hottest rank's chip) at or above ``warning_c`` or
    ``critical_c`` for ``samples`` samples spanning ``seconds``."""

    name = "npu_temperature"
    settings_model = NpuTemperatureSettings
    tag = "hw/npu_temp_c"
    causes = (
        N_("the server's fans, air flow or liquid cooling (a failed fan, a blocked inlet)"),
        N_("a hot machine room or a neighbouring card's exhaust"),
        N_("sustained full load on a card with worn thermal paste or a loose heat sink"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "hot": N_(
            "NPU chip temperature {value} °C, at or above {threshold} °C for {count} "
            "samples ({seconds} s)"
        ),
    }

    def levels(self) -> tuple[float, float]:
        return self.settings.warning_c, self.settings.critical_c

    def describe(
        self, severity: str, value: float, run: Sustained, values: Mapping[str, float]
    ) -> tuple[str, float]:
        threshold = self.threshold(severity)
        message = self.message(
            "hot",
            value=fmt(value),
            threshold=fmt(threshold),
            count=run.count,
            seconds=f"{run.span_s:.0f}",
        )
        return message, threshold


# ---------------------------------------------------------------- hbm_full

_HBM_PCT, _HBM_USED, _HBM_TOTAL = "hw/npu_hbm_used_pct", "hw/npu_hbm_used_mb", "hw/npu_hbm_total_mb"


class HbmFullSettings(SustainedSettings):
    """``hbm_full``: an NPU's HBM (device memory) nearly full, sustained.

    npu-smi's HBM usage is what the card has given out, and MindSpore's memory pool
    holds what it took (it starts at 2 GB and grows by 2 GB as needed, up to
    ``max_size``, and does not give memory back while training: see
    ``mindspore.runtime.set_memory``). So the usage climbs to the job's high-water mark
    and stays there; near the total, the next growth of the pool (a longer sequence, a
    larger batch, an evaluation) fails with an out-of-memory error. 95 % leaves about
    3 GB of a 64 GB card; 99 % less than 1 GB."""

    warning_pct: float = Field(
        default=95.0, gt=0, le=100, description="Warning at or above this % of HBM used."
    )
    critical_pct: float = Field(
        default=99.0, gt=0, le=100, description="Critical at or above this %."
    )

    @field_validator("critical_pct")
    @classmethod
    def _ordered(cls, value: float, info: ValidationInfo) -> float:
        return _at_least(value, info, "warning_pct")


class HbmFullRule(LevelRule[HbmFullSettings]):
    """``hw/npu_hbm_used_pct`` (the fullest rank's card; else used / total) at or above
    ``warning_pct`` or ``critical_pct`` for ``samples`` samples spanning ``seconds``."""

    name = "hbm_full"
    settings_model = HbmFullSettings
    tag = _HBM_PCT
    causes = (
        N_("the batch size, sequence length or model is too large for the card"),
        N_("another process holds memory on the same card"),
        N_("MindSpore's memory pool grew to its limit (mindspore.runtime.set_memory max_size)"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "full": N_(
            "NPU HBM at {value}%, {used} of {total} MB used: at or above {threshold}%, "
            "for {count} samples ({seconds} s)"
        ),
    }

    def value(self, values: Mapping[str, float]) -> Optional[float]:
        pct = self.finite(values, _HBM_PCT)
        if pct is not None:
            return pct
        used, total = self.finite(values, _HBM_USED), self.finite(values, _HBM_TOTAL)
        if used is None or total is None or total <= 0:
            return None
        return 100.0 * used / total

    def levels(self) -> tuple[float, float]:
        return self.settings.warning_pct, self.settings.critical_pct

    def describe(
        self, severity: str, value: float, run: Sustained, values: Mapping[str, float]
    ) -> tuple[str, float]:
        threshold = self.threshold(severity)
        used, total = self.finite(values, _HBM_USED), self.finite(values, _HBM_TOTAL)
        message = self.message(
            "full",
            value=f"{value:.1f}",
            used=f"{used:.0f}" if used is not None else "?",
            total=f"{total:.0f}" if total is not None else "?",
            threshold=fmt(threshold),
            count=run.count,
            seconds=f"{run.span_s:.0f}",
        )
        return message, threshold


# ---------------------------------------------------------------- npu_health

# mindwatch.hardware.npu_smi.health_code: 0 OK, 1 Warning, 2 Alarm, 3 Critical, 4 other.
_HEALTH = {1: ("Warning", "warning"), 2: ("Alarm", "critical"), 3: ("Critical", "critical")}
_UNKNOWN = ("unknown", "warning")


class NpuHealthSettings(SustainedSettings):
    """``npu_health``: npu-smi reports an NPU's health other than OK.

    npu-smi's Health column is the driver's own verdict: Warning (a minor alarm, e.g. an
    ECC error corrected), Alarm (a major one) and Critical (the chip may fail or has
    failed). mindwatch maps Warning and a state it does not know to a warning, Alarm and
    Critical to critical. The driver decides when a state begins, so one sample is
    enough by default."""

    samples: int = Field(
        default=1,
        ge=1,
        le=10_000,
        description="Samples in a row that must show it (the driver's verdict: one is enough).",
    )
    seconds: float = Field(
        default=0.0,
        ge=0,
        le=7 * 86_400,
        description="... also spanning at least this many seconds. At most 604800 (a week).",
    )


class NpuHealthRule(LevelRule[NpuHealthSettings]):
    """``hw/npu_health`` (the sickest rank's chip; 0 is OK) not OK for ``samples``
    samples: Warning or an unknown state is a warning, Alarm or Critical critical."""

    name = "npu_health"
    settings_model = NpuHealthSettings
    tag = "hw/npu_health"
    causes = (
        N_("a hardware fault the driver detected (memory ECC errors, a link, the power)"),
        N_("the chip is overheating or its power is capped"),
        N_("a driver or firmware problem: `npu-smi info -t health -i <id>` shows the alarm"),
    )
    messages: ClassVar[Mapping[str, str]] = {
        "sick": N_("NPU health is {state} (code {code}, 0 is OK) for {count} samples"),
        "unknown": N_("a state mindwatch does not know"),
    }

    @staticmethod
    def _state(value: float) -> tuple[str, str]:
        return _HEALTH.get(int(value), _UNKNOWN) if value == int(value) else _UNKNOWN

    def level(self, value: float) -> Optional[str]:
        return None if value == 0 else self._state(value)[1]

    def describe(
        self, severity: str, value: float, run: Sustained, values: Mapping[str, float]
    ) -> tuple[str, float]:
        state = self._state(value)[0]
        shown = self.message("unknown") if state == "unknown" else state  # npu-smi's word
        return self.message("sick", state=shown, code=f"{value:g}", count=run.count), 0.0

    def details(self, value: float) -> dict[str, Any]:
        return {"state": self._state(value)[0]}
