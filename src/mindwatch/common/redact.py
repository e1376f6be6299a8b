"""Secrets out of everything mindwatch stores or prints: one set of rules for all of it.

Used for ``run.json`` (the command line, the config, the extra fields, every string at
write time), the config TEXT tab, the HPARAMS values, configuration errors, notifier
errors and the Prometheus push messages. What counts as a secret:

* **In a URL** (``scheme://...``, anywhere in a text): the user info (``user:pw@``
  becomes ``***@``), every query value (``?access_token=***``), the fragment, and path
  segments that look like tokens: 16 or more letters, digits, ``-`` and ``_`` with at
  least one letter and one digit (Slack's and Feishu's webhooks carry their token in the
  path). The scheme, host, port, the other path segments and the query's keys stay, so
  a message still says where. A ``user:password@host`` without a scheme (a Pushgateway
  address may be written so) loses its user info too.
* **A value under a name that says it is one** (:func:`secret_name`): a config key, an
  hparam, an option, a ``KEY=VALUE``, whose name has a word containing ``secret``,
  ``passw``, ``passphrase``, ``credential``, ``cookie``, ``webhook`` or ``authoriz``,
  or ending in ``token``, ``key``, ``pwd``, ``url``, ``uri``, ``auth`` or ``dsn``
  (``api_key``, ``accessToken``, ``--webhook-url``; not ``max_tokens``, ``tokenizer``
  or ``author``). A name ending in ``_env`` holds the name of an environment variable,
  not the secret, and stays (``url_env``). Numbers under such a name are masked too;
  ``None`` and booleans stay.
* **In a command line** (:func:`redact_argv`): the value of an option with such a name,
  as ``--token X`` or ``--token=X``; the value of a ``KEY=VALUE`` argument with such a
  key (``WEBHOOK=...``, Hydra's ``alerts.notify.0.url=...``); ``"name": value`` and
  ``name: value`` inside an argument (a JSON or YAML snippet); and every URL as above.
  Short options (``-p X``) cannot be told apart and are kept.

Not secrets: paths, the working directory, host names, numbers. mindwatch never records
the environment (``os.environ`` is read only for the variables a config names).

Configuration errors keep their stronger masking (:func:`masked`): there a bad value's
URL is replaced whole, since the user needs the key and the rule, not the address.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

__all__ = [
    "MASK",
    "masked",
    "redact_argv",
    "redact_strings",
    "redact_text",
    "redact_url",
    "redact_value",
    "secret_name",
]

MASK = "***"

# A URL in running text: it ends at white space, a quote or an angle bracket (the
# characters that end it in a repr, JSON, HTML or a log line).
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>`\\]+")
# user:password@host without a scheme (a Pushgateway address may be given so).
_BARE_USERINFO = re.compile(r"(?<![\w.+:/-])[^\s:/@=,'\"<>`\\]+:[^\s/@'\"<>`\\]*@(?=[\w\[])")
_TOKEN_SEGMENT = re.compile(r"(?=[A-Za-z0-9_-]*[A-Za-z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}")
# A word is a secret's name when it contains one of these...
_CONTAINS = ("secret", "passw", "passphrase", "credential", "cookie", "webhook", "authoriz")
# ... or ends with one (``accesstoken``, ``apikey``; not ``tokens`` nor ``author``).
_ENDS = ("token", "key", "pwd", "url", "uri", "auth", "dsn")
_WORD = re.compile(r"[^A-Za-z0-9]+")
_NAME = re.compile(r"[A-Za-z_][\w.\[\]-]*")
# ``name=value``, ``name: value``, ``"name": "value"`` inside one argument.
_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z_][\w.\[\]-]*)(?P<sep>[\"']?\s*[:=]\s*)(?P<quote>[\"']?)"
    r"(?P<value>[^\s\"',;}]+)"
)


def secret_name(name: str) -> bool:
    """True when a value stored under ``name`` is a secret (see the module's rules)."""
    words = [w.lower() for w in _WORD.split(name) if w]
    if not words or words[-1] == "env":
        return False
    return any(any(part in word for part in _CONTAINS) or word.endswith(_ENDS) for word in words)


def _masked_query(query: str) -> str:
    parts = []
    for pair in query.split("&"):
        key, eq, _value = pair.partition("=")
        parts.append(f"{key}={MASK}" if eq else MASK if key else key)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """``url`` without its secrets: user info, query values, fragment, token-like path
    segments (see the module's rules)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _BARE_USERINFO.sub(f"{MASK}@", url)
    end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found != -1:
            end = min(end, found)
    netloc, tail = rest[:end], rest[end:]
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    tail, hash_sign, _fragment = tail.partition("#")
    path, question, query = tail.partition("?")
    path = _TOKEN_SEGMENT.sub(MASK, path)
    out = f"{scheme}://{netloc}{path}"
    if question:
        out += "?" + _masked_query(query)
    if hash_sign:
        out += "#" + MASK
    return out


def _url_in_text(match: re.Match[str]) -> str:
    url = match.group(0)
    kept = url.rstrip(".,;:!?)]}")  # the sentence's punctuation, not the URL's
    return redact_url(kept) + url[len(kept) :]


def redact_text(text: str, known: Iterable[Optional[str]] = ()) -> str:
    """``text`` with every URL in it redacted (:func:`redact_url`), a bare
    ``user:password@``'s user info masked, and each of the ``known`` secrets (as given
    and URL-quoted: an exception may quote what it was given) replaced by ``***``."""
    for secret in sorted((s for s in known if s), key=len, reverse=True):
        for form in {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret)}:
            text = text.replace(form, MASK)
    if "://" in text:
        text = _URL.sub(_url_in_text, text)
    if "@" in text:
        text = _BARE_USERINFO.sub(f"{MASK}@", text)
    return text


def _mask(value: Any) -> Any:
    """What a value under a secret name becomes: ``***`` (``None`` stays, and so does a
    mask already made, as pydantic's ``**********``)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and set(value) == {"*"}:
        return value
    if isinstance(value, Mapping):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask(v) for v in value]
    return MASK


def redact_value(value: Any, name: str = "") -> Any:
    """``value`` (JSON-like data: a config, hparams, extra fields) with secrets masked at
    any depth: everything under a :func:`secret_name` key, and every string by
    :func:`redact_text`. Returns new containers; ``value`` is left as it was."""
    if name and secret_name(name):
        return _mask(value)
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def redact_strings(value: Any) -> Any:
    """``value`` with :func:`redact_text` applied to every string in it (keys too), the
    last pass before a file is written: the names are mindwatch's own there."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {redact_text(str(k)): redact_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_strings(v) for v in value]
    return value


def _assignments(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if not secret_name(match.group("name")) or match.group("value") == MASK:
            return match.group(0)
        return match.group(0)[: match.start("value") - match.start(0)] + MASK

    return _ASSIGNMENT.sub(replace, text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line (``sys.argv``) without its secrets (see the module's rules)."""
    out: list[str] = []
    value_is_secret = False
    for arg in argv:
        if value_is_secret and not arg.startswith("-"):
            out.append(MASK)  # ``--token X``: X
            value_is_secret = False
            continue
        value_is_secret = False
        name, eq, _value = arg.partition("=")
        bare = name.lstrip("-+~")  # ``--opt``, Hydra's ``+key`` and ``~key``
        if _NAME.fullmatch(bare) and secret_name(bare):
            if eq:  # everything after the =: a password may hold any character
                out.append(f"{name}={MASK}")
                continue
            if arg.startswith("-"):
                value_is_secret = True
        out.append(_assignments(redact_text(arg)))
    return out


def masked(value: Any, key: str = "") -> Any:
    """For an error message: ``value`` with secrets replaced at any depth, the values of
    :func:`secret_name` keys (``url``, ``secret``, ``password``...) and anything that
    looks like a URL replaced whole (a webhook URL carries its access token, and the
    host does not help fix a config)."""
    if key and secret_name(key):
        return MASK
    if isinstance(value, str):
        return _URL.sub(MASK, value)
    if isinstance(value, Mapping):
        return {k: masked(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(v) for v in value]
    return value
