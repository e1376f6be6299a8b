"""Rules -> alerts -> what each alert asks for, and where alerts are written.

Runs on the pipeline's thread. For each step (or evaluation) the
:class:`~mindwatch.alerts.RuleEngine` raises alerts; each gets the sample ids of the
step's batch (when the caller logged them), then its actions:

* a rule in ``alerts.stop_on`` (warning or critical): ``action: stop training`` and a
  ``stop`` :class:`~mindwatch.alerts.Control`;
* a rule in ``alerts.last_stable_on``, when the training loop keeps checkpoints: a
  ``keep_last_stable`` control carrying the alert. The alert is written when the loop
  reports it back with the kept file (:meth:`Alerting.report`), so its line names the
  checkpoint.

Every other alert is written at once: ``alerts.jsonl`` and the log (:class:`AlertLog`),
the notifiers (a dispatcher with its own thread), and :attr:`Alerting.alerts`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from mindwatch.alerts import Alert, AlertLog, Control
from mindwatch.alerts.engine import RuleEngine
from mindwatch.common.i18n import _, set_language
from mindwatch.config import AlertSettings
from mindwatch.run.ranks import RankPlace

if TYPE_CHECKING:
    from mindwatch.alerts.notify import Dispatcher

__all__ = ["Alerting"]

log = logging.getLogger(__name__)

MAX_KEPT = 10_000  # alerts kept in memory (Monitor.alerts)
_ID_HISTORY = 1000  # steps whose batch ids are kept: rules may judge a step later


def _nowhere(control: Control) -> None:
    """Where controls go before a pipeline connects (nothing applies them)."""


class Alerting:
    """The rules of one run, and what their alerts do.

    Args:
        settings: the config's ``alerts`` section.
        run, rank: written into every alert.
        places: where the ranks run: an alert's rank gets its node and device.
        alert_log: ``<run>/alerts.jsonl``.
        dispatcher: the notifiers (None: none configured).
        control: where controls go (the pipeline's queue back to the training loop;
            the pipeline that runs these rules connects its own: :meth:`connect`).
    """

    def __init__(
        self,
        settings: AlertSettings,
        *,
        run: str,
        rank: int,
        places: Iterable[RankPlace] = (),
        alert_log: AlertLog,
        dispatcher: Optional[Dispatcher],
        control: Optional[Callable[[Control], None]] = None,
    ) -> None:
        self.settings = settings
        if settings.language is not None:  # process-wide, like the locale it overrides
            set_language(settings.language)
        self.engine: Optional[RuleEngine] = RuleEngine(settings, run=run, rank=rank, places=places)
        self.alert_log = alert_log
        self.dispatcher = dispatcher
        self._control: Callable[[Control], None] = control or _nowhere
        self.alerts: list[Alert] = []
        self.steps_per_epoch: Optional[int] = None  # for an alert's batch index
        self.keeps_checkpoints = False  # the training loop can keep a last stable one
        self._sample_ids: OrderedDict[int, list[Any]] = OrderedDict()
        self._stopping = False  # a stop was asked for (its warning is logged once)

    def connect(self, control: Callable[[Control], None]) -> None:
        """Send the controls decided from now on to ``control``."""
        self._control = control

    def note_sample_ids(self, step: int, ids: list[Any]) -> None:
        """The sample ids of ``step``'s batch, for an alert at that step."""
        self._sample_ids[step] = ids
        if len(self._sample_ids) > _ID_HISTORY:
            self._sample_ids.popitem(last=False)

    def observe(self, step: int, values: Sequence[tuple[str, float]]) -> list[Alert]:
        """Apply the rules to one step's values; write or hand back what they raise.
        Returns the alerts written now (the others come back through :meth:`report`)."""
        engine = self.engine
        if engine is None:
            return []
        spe = self.steps_per_epoch
        batch = (step - 1) % spe if spe else None
        try:
            raised = engine.observe(step, dict(values), batch=batch)
        except Exception as exc:  # a rule bug must not take training down
            log.warning("mindwatch: the anomaly rules failed at step %d: %r", step, exc)
            self.engine = None
            return []
        return [alert for alert in raised if self._act(alert)]

    def _act(self, alert: Alert) -> bool:
        """Carry out what ``alert`` asks for; True if it was written now."""
        ids = self._sample_ids.get(alert.step)
        if ids is not None:
            alert.extra["sample_ids"] = ids
        acting = alert.severity != "info"
        if acting and alert.rule in self.settings.stop_on:
            alert.action = "stop training"
            if not self._stopping:  # later ones are alerts of their own, not news
                self._stopping = True
                stopping = _("stopping training (alerts.stop_on): {alert}")
                log.warning("mindwatch: %s", stopping.format(alert=alert.line()))
            self._control(Control("stop", alert.step, alert))
        if acting and self.keeps_checkpoints and alert.rule in self.settings.last_stable_on:
            # Written when the loop reports it back, naming the checkpoint it kept.
            self._control(Control("keep_last_stable", alert.step, alert))
            return False
        self.report(alert)
        return True

    def report(self, alert: Alert) -> None:
        """Write an alert: the list, ``alerts.jsonl`` and the log, the notifiers."""
        if len(self.alerts) < MAX_KEPT:
            self.alerts.append(alert)
        self.alert_log.write(alert)
        if self.dispatcher is not None:
            self.dispatcher.submit(alert)

    def summary(self) -> dict[str, Any]:
        """What ``run.json`` says about the alerts and their notifications."""
        summary: dict[str, Any] = {"alerts": self.alert_log.count}
        d = self.dispatcher
        if d is not None:
            counts = {"sent": d.sent, "failed": d.failed, "dropped": d.dropped}
            summary["notifications"] = {**counts, "undelivered": d.undelivered}
        return summary

    def close(self, timeout: Optional[float] = None) -> None:
        """Deliver what is queued, but no longer than one alert's delivery with its
        retries (capped at 10 s): a hanging endpoint must not hold the end of training."""
        if self.dispatcher is None:
            return
        d = self.settings.delivery
        budget = min(10.0, d.timeout * (d.retries + 1) + d.backoff * 2**d.retries)
        self.dispatcher.close(timeout=budget if timeout is None else min(timeout, budget))
