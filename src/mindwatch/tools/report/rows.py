"""A run's summary as labelled rows, the same in every format (HTML, PDF, Markdown):
the summary itself, the speed statistics per tag, and the alerts table's cells; the
numbers printed by :mod:`.formatting`, the labels in the report's language."""

from __future__ import annotations

from typing import Any

from mindwatch.common.i18n import _
from mindwatch.tools.report import formatting
from mindwatch.tools.report.summary import RunSummary, excluded_reason

__all__ = ["alert_row", "summary_rows", "throughput_rows"]


def _fmt(value: Any) -> str:
    return formatting.value(value)


def _duration(seconds: Any) -> str:
    return formatting.duration(seconds)


def summary_rows(run: RunSummary) -> list[tuple[str, str]]:
    """The run summary as (label, value) rows, for HTML, PDF and Markdown alike, in the
    report's language."""
    f = run.facts
    loss = f.get("loss") or {}
    digits = formatting.LOSS_DIGITS
    rows = [
        (_("status"), _fmt(f.get("status"))),
        (_("steps"), _fmt(f.get("steps"))),
        (_("duration"), _duration(f.get("duration_s"))),
        (_("world size"), _fmt(f.get("world_size"))),
    ]
    if loss:
        rows += [
            (
                _("final loss (smoothed)"),
                _("{value} (raw {raw})").format(
                    value=formatting.number(loss.get("final"), digits),
                    raw=formatting.number(loss.get("final_raw"), digits),
                ),
            ),
            (
                _("best loss (smoothed)"),
                _("{value} at step {step} (raw minimum {raw} at step {raw_step})").format(
                    value=formatting.number(loss.get("best"), digits),
                    step=_fmt(loss.get("best_step")),
                    raw=formatting.number(loss.get("best_raw"), digits),
                    raw_step=_fmt(loss.get("best_raw_step")),
                ),
            ),
            (
                _("loss smoothing"),
                _("TensorBoard's moving average, weight {weight}").format(
                    weight=loss.get("smoothing")
                ),
            ),
            (_("non-finite losses"), _fmt(loss.get("nonfinite"))),
        ]
    throughput = f.get("throughput") or {}
    if "excluded_steps" in throughput:
        rows.append(
            (
                _("left out of speed statistics"),
                _("{count} step(s): {reason}").format(
                    count=_fmt(throughput["excluded_steps"]), reason=_excluded(throughput)
                ),
            )
        )
    if f.get("mixed_runs"):
        rows.insert(
            0,
            (_("warning"), _("{mixed}: these numbers mix them").format(mixed=f["mixed_runs"])),
        )
    if "tokens" in f:
        rows.append((_("tokens"), _fmt(round(f["tokens"]))))
    for tag, value in (f.get("eval") or {}).items():
        rows.append(
            (
                tag,
                _("{value} at step {step}").format(
                    value=formatting.number(value["last"], digits), step=_fmt(value["last_step"])
                ),
            )
        )
    return rows


def _excluded(throughput: dict[str, Any]) -> str:
    """Why warm-up steps were left out, in the report's language (older reports' facts
    have only the English sentence)."""
    if "excluded_compile_step" in throughput or not throughput.get("excluded_steps"):
        return excluded_reason(throughput, _)
    return str(throughput.get("excluded_reason", ""))


def throughput_rows(run: RunSummary) -> list[tuple[str, dict[str, str]]]:
    """Per ``perf/*`` tag its statistics (without warm-up), each with its unit."""
    rows = []
    for name, stats in (run.facts.get("throughput") or {}).items():
        if isinstance(stats, dict) and stats:
            shown = {k: formatting.metric_value(name, v) for k, v in stats.items()}
            rows.append((formatting.metric_label(name), shown))
    return rows


def alert_row(alert: dict[str, Any]) -> dict[str, str]:
    """An ``alerts.jsonl`` line as the alerts table shows it (numbers formatted)."""
    row = {k: _fmt(alert.get(k)) for k in ("step", "rank", "severity", "rule", "metric")}
    row["value"] = formatting.number(alert.get("value"), formatting.LOSS_DIGITS)
    row["message"] = str(alert.get("message", ""))
    row["severity"] = row["severity"] if row["severity"] != "-" else "info"
    return row
