"""Notifiers: generic JSON webhook, DingTalk, Feishu/Lark, WeCom, Slack, SMTP e-mail.

Delivery runs on one daemon thread (:class:`Dispatcher`): the training thread only
enqueues. Each attempt has a timeout; a failed one (an error, HTTP 429 or 5xx) is retried
with doubling delays; a notifier that keeps failing is reported once in the log, by
its kind and where its URL came from, never by the URL. At most ``max_per_minute``
alerts per notifier are sent; the rest are counted. Cooldowns and deduplication per
(rule, metric, rank) happen before, in the rule engine.

Secrets (webhook URLs carry their access token; signing secrets; SMTP passwords) come
from environment variables or the config and are only ever put on the wire.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import os
import queue
import smtplib
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from email.message import EmailMessage
from typing import Any, Optional

from mindwatch.alerts.model import Alert, severity_label, severity_rank
from mindwatch.alerts.movers import first_mover_line
from mindwatch.common.i18n import _
from mindwatch.common.redact import redact_text
from mindwatch.common.waits import wait_seconds
from mindwatch.config import AlertSettings, DeliverySettings, NotifierSettings
from mindwatch.config.urls import webhook_url_problem

__all__ = [
    "Dispatcher",
    "Notifier",
    "build_dispatcher",
    "build_notifier",
    "dingtalk_sign",
    "feishu_sign",
]

log = logging.getLogger(__name__)


class NotifyError(RuntimeError):
    """A delivery failed; the message names the notifier, never its secrets."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(redact_text(message))  # an OS or HTTP reason may quote the URL
        self.retry = retry  # worth another attempt (not for HTTP 4xx other than 429)


def _secret(value: Any, env: Optional[str], what: str, name: str) -> Optional[str]:
    if env:
        found = os.environ.get(env)
        if not found:
            raise NotifyError(f"{name}: the variable {env} holding its {what} is not set")
        return found
    return value.get_secret_value() if value is not None else None


def dingtalk_sign(secret: str, timestamp_ms: int) -> str:
    """DingTalk robot signature: base64(HMAC-SHA256(secret, "<timestamp>\\n<secret>"))."""
    text = f"{timestamp_ms}\n{secret}".encode()
    digest = hmac.new(secret.encode(), text, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def feishu_sign(secret: str, timestamp_s: int) -> str:
    """Feishu/Lark bot signature: base64(HMAC-SHA256(key="<timestamp>\\n<secret>", b""))."""
    key = f"{timestamp_s}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def _text(alert: Alert) -> str:
    """The alert in a few lines, in the current language: what, where, what moved first
    (when the alert has forensics), what to check."""
    severity = severity_label(alert.severity)
    if severity == alert.severity:  # English: capitals stand out in a chat
        severity = severity.upper()
    lines = [
        _("[mindwatch] {severity} {rule}: {message}").format(
            severity=severity, rule=alert.rule, message=alert.message
        )
    ]
    where = alert.where()
    if alert.run:
        where = _("run {run}, {where}").format(run=alert.run, where=where)
    lines.append(where)
    forensics = first_mover_line(alert.extra.get("forensics"))
    if forensics is not None:  # what moved first: the reader's next question
        lines.append(forensics)
    if alert.causes:
        lines.append(_("check: {causes}").format(causes=_("; ").join(alert.causes[:3])))
    return "\n".join(lines)


class Notifier:
    """One destination. ``send`` raises :class:`NotifyError` on failure."""

    def __init__(self, settings: NotifierSettings, timeout: float) -> None:
        self.settings = settings
        self.timeout = timeout
        source = f"${settings.url_env}" if settings.url_env else "the config"
        self.name = f"{settings.kind} notifier (URL from {source})"
        if settings.kind == "email":
            self.name = f"email notifier ({settings.host})"

    def wants(self, alert: Alert) -> bool:
        return severity_rank(alert.severity) >= severity_rank(self.settings.min_severity)

    def send(self, alert: Alert) -> None:
        raise NotImplementedError

    def _url(self) -> str:
        """The webhook URL, from its environment variable or the config."""
        url = _secret(self.settings.url, self.settings.url_env, "URL", self.name)
        if url is None:  # the config model requires url or url_env for webhook kinds
            raise NotifyError(f"{self.name}: no URL configured", retry=False)
        if self.settings.url_env:  # the config's own url was checked when it was built
            problem = webhook_url_problem(url)
            if problem is not None:
                raise NotifyError(
                    f"{self.name}: the URL in the variable {self.settings.url_env} {problem}; "
                    "fix the variable",
                    retry=False,
                )
        return url

    def problem(self) -> Optional[str]:
        """Why this notifier cannot send now (its URL's variable unset or malformed), or
        None; never quoting the URL."""
        if self.settings.kind == "email":
            return None
        try:
            self._url()
        except NotifyError as exc:
            return str(exc)
        return None

    def secrets(self) -> list[str]:
        """What must never appear in a message about this notifier: its URL (and the
        parts of it that carry a token), signing secret and password, as resolved now."""
        s = self.settings
        found: list[str] = []
        for value, env in (
            (s.url, s.url_env),
            (s.secret, s.secret_env),
            (s.password, s.password_env),
        ):
            text = os.environ.get(env) if env else None
            if text is None and value is not None:
                text = value.get_secret_value()
            if text:
                found.append(text)
        for url in found[:1]:
            with contextlib.suppress(ValueError):
                parts = urllib.parse.urlsplit(url)
                found += [p for p in (parts.path, parts.query, parts.netloc) if len(p) > 3]
        return found

    def _post(self, url: str, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode()
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read(65536)
        except urllib.error.HTTPError as exc:
            retry = exc.code == 429 or exc.code >= 500
            raise NotifyError(f"{self.name}: HTTP {exc.code}", retry=retry) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            what = reason if isinstance(reason, str) else type(reason).__name__
            if isinstance(reason, OSError) and reason.strerror:  # "Connection refused"
                what = f"{reason.strerror} ({what})"
            # (a str reason is urllib's own wording, never the URL; redacted all the same
            # where it is reported, in case a library quotes it)
            raise NotifyError(f"{self.name}: {what}") from None


class WebhookNotifier(Notifier):
    """Generic webhook: the alert's JSON object, as in ``alerts.jsonl``."""

    def send(self, alert: Alert) -> None:
        url = self._url()
        self._post(url, {"source": "mindwatch", **alert.to_dict()})


class DingTalkNotifier(Notifier):
    """DingTalk custom robot (markdown), signed when a secret is configured."""

    def send(self, alert: Alert) -> None:
        s = self.settings
        url = self._url()
        secret = _secret(s.secret, s.secret_env, "signing secret", self.name)
        if secret:
            stamp = int(time.time() * 1000)
            sign = urllib.parse.quote_plus(dingtalk_sign(secret, stamp))
            url += ("&" if "?" in url else "?") + f"timestamp={stamp}&sign={sign}"
        title = _("mindwatch {severity}: {rule}").format(
            severity=severity_label(alert.severity), rule=alert.rule
        )
        text = "\n\n".join(
            f"- {line}" if i else f"### {line}" for i, line in enumerate(_text(alert).split("\n"))
        )
        self._post(url, {"msgtype": "markdown", "markdown": {"title": title, "text": text}})


class FeishuNotifier(Notifier):
    """Feishu / Lark custom bot (text), signed when a secret is configured."""

    def send(self, alert: Alert) -> None:
        s = self.settings
        url = self._url()
        payload: dict[str, Any] = {"msg_type": "text", "content": {"text": _text(alert)}}
        secret = _secret(s.secret, s.secret_env, "signing secret", self.name)
        if secret:
            stamp = int(time.time())
            payload.update(timestamp=str(stamp), sign=feishu_sign(secret, stamp))
        self._post(url, payload)


class WeComNotifier(Notifier):
    """WeCom (Enterprise WeChat) group robot (markdown); its key is in the URL."""

    def send(self, alert: Alert) -> None:
        url = self._url()
        self._post(url, {"msgtype": "markdown", "markdown": {"content": _text(alert)}})


class SlackNotifier(Notifier):
    """Slack incoming webhook."""

    def send(self, alert: Alert) -> None:
        url = self._url()
        self._post(url, {"text": _text(alert)})


class EmailNotifier(Notifier):
    """SMTP e-mail, with STARTTLS, SSL from the start, or plain (a local relay)."""

    def send(self, alert: Alert) -> None:
        s = self.settings
        message = EmailMessage()
        subject = _("[mindwatch] {severity} {rule} at step {step}").format(
            severity=severity_label(alert.severity), rule=alert.rule, step=alert.step
        )
        message["Subject"] = subject + (f" ({alert.run})" if alert.run else "")
        message["From"] = s.sender or ""
        message["To"] = ", ".join(s.recipients)
        message.set_content(_text(alert) + "\n\n" + alert.to_json() + "\n")
        password = _secret(s.password, s.password_env, "password", self.name)
        try:
            if s.security == "ssl":
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(
                    s.host or "", s.port or 465, timeout=self.timeout
                )
            else:
                smtp = smtplib.SMTP(s.host or "", s.port or 587, timeout=self.timeout)
            with smtp:
                if s.security == "starttls":
                    smtp.starttls()
                if s.username and password:
                    smtp.login(s.username, password)
                smtp.send_message(message)
        except (smtplib.SMTPException, OSError) as exc:
            # The SMTP reply may echo what was sent; only its class is shown.
            raise NotifyError(f"{self.name}: {type(exc).__name__}") from None


_KINDS: dict[str, type[Notifier]] = {
    "webhook": WebhookNotifier,
    "dingtalk": DingTalkNotifier,
    "feishu": FeishuNotifier,
    "wecom": WeComNotifier,
    "slack": SlackNotifier,
    "email": EmailNotifier,
}


def build_notifier(settings: NotifierSettings, timeout: float) -> Notifier:
    return _KINDS[settings.kind](settings, timeout)


def build_dispatcher(alerts: AlertSettings) -> Optional[Dispatcher]:
    """A dispatcher for the configured notifiers, or None when there are none."""
    if not alerts.notify:
        return None
    timeout = alerts.delivery.timeout
    return Dispatcher([build_notifier(n, timeout) for n in alerts.notify], alerts.delivery)


class Dispatcher:
    """Deliver alerts to notifiers on a daemon thread, with retries and a rate limit."""

    def __init__(self, notifiers: list[Notifier], delivery: DeliverySettings) -> None:
        self.notifiers = notifiers
        self.delivery = delivery
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.undelivered = 0
        self._queue: queue.Queue[Optional[Alert]] = queue.Queue(maxsize=1000)
        self._recent: dict[int, deque[float]] = {i: deque() for i in range(len(notifiers))}
        self._reported: set[int] = set()
        # A notifier that cannot send (its url_env variable unset or not a web address) is
        # said once, now, before any alert; its alerts are then counted as failed.
        for index, notifier in enumerate(notifiers):
            problem = notifier.problem()
            if problem is not None:
                self._reported.add(index)
                log.warning(
                    "mindwatch: %s; its alerts are not delivered until then (they are in "
                    "alerts.jsonl, and counted as failed in run.json)",
                    redact_text(problem, notifier.secrets()),
                )
        self._thread = threading.Thread(target=self._run, name="mindwatch-notify", daemon=True)
        self._thread.start()

    def submit(self, alert: Alert) -> None:
        """Queue ``alert`` (never blocks; a full queue drops and counts)."""
        try:
            self._queue.put_nowait(alert)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued, waiting at most ``timeout`` seconds; what could not be
        delivered in that time is counted in :attr:`undelivered` (and logged)."""
        deadline = time.monotonic() + timeout
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=wait_seconds(timeout))
        self._thread.join(wait_seconds(deadline - time.monotonic()))
        if self._thread.is_alive():
            self.undelivered = self._queue.qsize() + 1  # the one in flight too
            log.warning(
                "mindwatch: %d alert notification(s) not delivered within %g s; they are in "
                "alerts.jsonl",
                self.undelivered,
                timeout,
            )

    def _run(self) -> None:
        while True:
            alert = self._queue.get()
            if alert is None:
                return
            for index, notifier in enumerate(self.notifiers):
                if notifier.wants(alert) and self._allowed(index):
                    self._deliver(index, notifier, alert)

    def _allowed(self, index: int) -> bool:
        now = time.monotonic()
        recent = self._recent[index]
        while recent and now - recent[0] > 60.0:
            recent.popleft()
        if len(recent) >= self.delivery.max_per_minute:
            self.dropped += 1
            return False
        recent.append(now)
        return True

    def _deliver(self, index: int, notifier: Notifier, alert: Alert) -> None:
        delay = self.delivery.backoff
        for attempt in range(self.delivery.retries + 1):
            try:
                notifier.send(alert)
            except NotifyError as exc:
                if exc.retry and attempt < self.delivery.retries:
                    time.sleep(wait_seconds(delay))
                    delay *= 2
                    continue
                self._failed(index, notifier, str(exc), attempt + 1)
                return
            except Exception as exc:  # a bug in a notifier must not kill delivery
                reason = f"{notifier.name}: {type(exc).__name__}: {exc}"
                self._failed(index, notifier, reason, attempt + 1)
                return
            self.sent += 1
            return

    def _failed(self, index: int, notifier: Notifier, reason: str, attempts: int) -> None:
        """Count a failed delivery; the first of each notifier is one warning saying
        why (secrets redacted), later ones are counted (run.json's notifications)."""
        self.failed += 1
        if index in self._reported:
            return
        self._reported.add(index)
        log.warning(
            "mindwatch: could not deliver an alert: %s (after %d attempt%s; further "
            "failures of this notifier are counted, not shown)",
            redact_text(reason, notifier.secrets())[:300],
            attempts,
            "s" * (attempts != 1),
        )
