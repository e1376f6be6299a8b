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

An alert of a rule in ``alerts.forensics.rules`` is analysed first, from this rank's
flight recorder (:class:`~mindwatch.pipeline.investigate.Investigator`). Under a
reduction across ranks (:meth:`Alerting.gather_with`) it then waits for every rank's
analysis, which rides the next reduction (:meth:`Alerting.gathered`), at most
``alerts.forensics.gather_timeout`` seconds; then it is written with what arrived. Its
stop, if it asks for one, is not delayed: only the line waits.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from mindwatch.alerts import Alert, AlertLog, Control
from mindwatch.alerts.engine import RuleEngine
from mindwatch.common.i18n import _, set_language
from mindwatch.config import AlertSettings
from mindwatch.forensics import FlightRecorder
from mindwatch.pipeline.investigate import Investigator
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
        recorder: this rank's flight recorder (None: no forensics).
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
        recorder: Optional[FlightRecorder] = None,
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
        # Scalars logged apart from their step (log_scalars: the per-layer norms), judged
        # with it: the callback logs them before the step, reduced steps come later.
        self._scalars: OrderedDict[int, list[tuple[str, float]]] = OrderedDict()
        self._stopping = False  # a stop was asked for (its warning is logged once)
        self.investigator: Optional[Investigator] = None
        if recorder is not None and settings.forensics.enabled:
            run_dir = alert_log.path.parent
            self.investigator = Investigator(settings.forensics, recorder, run_dir, rank)
        self._gather: Optional[Callable[[int], None]] = None
        # Alerts waiting for the other ranks' forensics: (alert, analysis, deadline).
        self._held: list[tuple[Alert, dict[str, Any], float]] = []

    def connect(self, control: Callable[[Control], None]) -> None:
        """Send the controls decided from now on to ``control``."""
        self._control = control

    @property
    def holding(self) -> bool:
        """Whether alerts wait for the other ranks' forensics."""
        return bool(self._held)

    def gather_with(self, request: Callable[[int], None]) -> None:
        """Under a reduction: ``request(step)`` asks every rank for its forensics of
        ``step`` (they come back through :meth:`gathered`)."""
        self._gather = request

    def gather_off(self) -> None:
        """The reductions stopped: from now on alerts are explained from this rank only."""
        self._gather = None

    def gathered(self, step: int, slots: Any) -> list[Alert]:
        """Every rank's forensics slot of ``step``: write the alerts that waited for
        it; returns them."""
        written, waiting, self._held = [], self._held, []
        for alert, local, deadline in waiting:
            if alert.step == step:
                self._write(alert, local, slots)
                written.append(alert)
            else:
                self._held.append((alert, local, deadline))
        return written

    def expire(self, now: Optional[float] = None) -> list[Alert]:
        """Write the alerts whose wait for the other ranks is over (``None``: all of
        them, e.g. the reductions failed or the run ends); returns them."""
        if not self._held:
            return []
        written, waiting, self._held = [], self._held, []
        for alert, local, deadline in waiting:
            if now is None or now >= deadline:
                self._write(alert, local, None)
                written.append(alert)
            else:
                self._held.append((alert, local, deadline))
        return written

    def note_scalars(self, step: int, values: Sequence[tuple[str, float]]) -> None:
        """Scalars of ``step`` logged apart from it (``layers/grad_norm/<param>``): the
        rules see them with the step's own values (:meth:`observe`)."""
        self._scalars.setdefault(step, []).extend(values)
        while len(self._scalars) > _ID_HISTORY:
            self._scalars.popitem(last=False)

    def note_sample_ids(self, step: int, ids: list[Any]) -> None:
        """The sample ids of ``step``'s batch, for an alert at that step."""
        self._sample_ids[step] = ids
        if len(self._sample_ids) > _ID_HISTORY:
            self._sample_ids.popitem(last=False)

    def observe(
        self, step: int, values: Sequence[tuple[str, float]], *, logged_apart: bool = True
    ) -> list[Alert]:
        """Apply the rules to one step's values; write or hand back what they raise.
        Returns the alerts written now (the others come back through :meth:`report`)."""
        engine = self.engine
        if engine is None:
            return []
        if logged_apart:  # a training step (an evaluation's values are its own)
            apart = self._scalars.pop(step, None)
            while self._scalars and next(iter(self._scalars)) < step:
                self._scalars.popitem(last=False)  # steps the rules never saw (collect_freq)
            if apart:
                values = [*apart, *values]  # the step's own values win a shared tag
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
        """Write an alert: the list, ``alerts.jsonl`` and the log, the notifiers (after
        its forensics, when it has them: see the module docs)."""
        inv = self.investigator
        if inv is None or not inv.explains(alert) or "forensics" in alert.extra:
            self._write(alert)
            return
        try:
            local = inv.analyse(alert.step, alert.batch, rule=alert.rule)
        except Exception as exc:  # written without forensics, never lost
            log.warning("mindwatch: the forensics of step %d failed: %r", alert.step, exc)
            self._write(alert)
            return
        if self._gather is not None:
            self._gather(alert.step)
            deadline = time.monotonic() + inv.settings.gather_timeout
            self._held.append((alert, local, deadline))
            return
        self._write(alert, local)

    def _write(
        self, alert: Alert, local: Optional[dict[str, Any]] = None, slots: Any = None
    ) -> None:
        if local is not None and self.investigator is not None:
            self.investigator.finish(alert, local, slots)
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
        retries (capped at 10 s): a hanging endpoint must not hold the end of training.
        Alerts still waiting for the other ranks' forensics are written first."""
        self.expire()
        if self.dispatcher is None:
            return
        d = self.settings.delivery
        budget = min(10.0, d.timeout * (d.retries + 1) + d.backoff * 2**d.retries)
        self.dispatcher.close(timeout=budget if timeout is None else min(timeout, budget))
