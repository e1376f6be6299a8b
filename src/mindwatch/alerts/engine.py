"""``RuleEngine``: the enabled rules, their cooldowns, and alerts with their context.

The rules (:mod:`mindwatch.rules`) return findings; the engine turns each into an
:class:`Alert` with the step's context (epoch, batch, run, the outlier rank and where it
runs: node, device) and the rule's likely causes, and keeps the cooldowns."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from mindwatch.alerts.model import Alert, likely_causes, severity_rank
from mindwatch.common.i18n import _
from mindwatch.config import AlertSettings
from mindwatch.metrics.tags import tag_for
from mindwatch.rules import BUILTIN_RULES, Rule
from mindwatch.run.ranks import RankPlace

__all__ = ["RuleEngine", "build_rules"]

EPOCH_TAG = tag_for("epoch")  # train/epoch, as the monitor logs it

log = logging.getLogger(__name__)


def build_rules(settings: AlertSettings) -> list[Rule[Any]]:
    """The enabled built-in rules, configured, in the registry's order (``stall`` is
    time-based: the watcher's)."""
    rules: list[Rule[Any]] = []
    for cls in BUILTIN_RULES:
        options = settings.rule(cls)
        if cls.observes_steps and options.enabled:
            rules.append(cls(options))
    return rules


class RuleEngine:
    """Feed it steps; it returns alerts, each (rule, metric, rank) at most once per
    ``cooldown_steps`` unless its severity rises.

    A rule that raises is switched off for the rest of the run with one warning naming
    it, the step and the error; the other rules go on (``failed`` maps its name to the
    error). A bug in one rule, or a value it did not expect, must neither take training
    down nor silence the rules that still work.

    Args:
        settings: the ``alerts`` section of the config.
        run: the run's name, written into every alert.
        rank: this process's rank (an alert on a reduced metric names the outlier rank
            instead, from the ``ranks/<name>_argmax`` value of the same step).
        places: where the ranks run (the map the ranks agreed at start, or only this
            process's place): an alert whose rank is among them gets its node and
            device; one whose rank is not (the map could not be agreed) gets neither.
    """

    def __init__(
        self,
        settings: AlertSettings,
        *,
        run: Optional[str] = None,
        rank: Optional[int] = None,
        places: Iterable[RankPlace] = (),
    ) -> None:
        self.settings = settings
        self.rules = build_rules(settings)
        self.run = run
        self.rank = rank
        self.places = {place.rank: place for place in places}
        self.cooldown = settings.cooldown_steps
        self._last: dict[tuple[str, str, Optional[int]], tuple[int, int]] = {}
        self.failed: dict[str, str] = {}

    def observe(
        self,
        step: int,
        values: Mapping[str, float],
        *,
        batch: Optional[int] = None,
    ) -> list[Alert]:
        """The alerts ``values`` at ``step`` raise (after cooldowns); the alerts' epoch
        is the step's ``train/epoch`` value when it has one."""
        alerts = []
        logged_epoch = values.get(EPOCH_TAG)
        epoch = None
        if logged_epoch is not None and math.isfinite(logged_epoch):
            epoch = int(logged_epoch)
        for rule in list(self.rules):
            try:
                findings = list(rule.observe(step, values))
            except Exception as exc:
                self._switch_off(rule, step, exc)
                continue
            for finding in findings:
                rank = finding.rank
                if rank is None:
                    rank = self._rank(finding.metric, values)
                alert = Alert(
                    rule=finding.rule,
                    severity=finding.severity,  # type: ignore[arg-type]
                    metric=finding.metric,
                    value=finding.value,
                    step=step,
                    message=finding.message,
                    baseline=finding.baseline,
                    rank=rank,
                    epoch=epoch,
                    batch=batch,
                    run=self.run,
                    causes=likely_causes(finding.rule),
                    extra=dict(finding.extra),
                )
                self.locate(alert)
                if self._due(alert):
                    alerts.append(alert)
        return alerts

    def locate(self, alert: Alert) -> Alert:
        """Give ``alert`` the node and device of its rank, when the map has it."""
        place = self.places.get(alert.rank) if alert.rank is not None else None
        if place is not None:
            alert.node, alert.device, alert.device_id = place.node, place.device, place.device_id
        return alert

    def _switch_off(self, rule: Rule[Any], step: int, exc: Exception) -> None:
        self.rules.remove(rule)
        self.failed[rule.name] = repr(exc)
        message = _(
            "the {rule} rule failed at step {step} ({error}); it is off for the rest of "
            "this run, the other rules go on"
        )
        log.warning("mindwatch: %s", message.format(rule=rule.name, step=step, error=repr(exc)))

    def _rank(self, metric: str, values: Mapping[str, float]) -> Optional[int]:
        name = metric.split("/", 1)[1] if "/" in metric else metric
        outlier = values.get(f"ranks/{name}_argmax")
        if outlier is not None and math.isfinite(outlier):
            return int(outlier)
        return self.rank

    def _due(self, alert: Alert) -> bool:
        key = alert.key
        level = severity_rank(alert.severity)
        last = self._last.get(key)
        if last is not None:
            last_step, last_level = last
            quiet = 0 <= alert.step - last_step < self.cooldown
            if quiet and level <= last_level:
                return False
        self._last[key] = (alert.step, level)
        return True

    def state_dict(self) -> dict[str, Any]:
        return {
            "rules": {rule.name: rule.state_dict() for rule in self.rules},
            "last": [[[k[0], k[1], k[2]], list(v)] for k, v in self._last.items()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        by_name = {rule.name: rule for rule in self.rules}
        for name, rule_state in state.get("rules", {}).items():
            if name in by_name:
                by_name[name].load_state_dict(rule_state)
        self._last = {
            (str(k[0]), str(k[1]), None if k[2] is None else int(k[2])): (int(v[0]), int(v[1]))
            for k, v in state.get("last", [])
        }
