"""Secrets out of everything mindwatch stores or prints: one set of rules for all of it.

Used for ``run.json`` (the command line, the config, the extra fields, every string at
write time), the config TEXT tab, the HPARAMS values, configuration errors, notifier
errors and the Prometheus push messages. The rules must mask every secret and nothing
else: an hparam such as ``pad_token_id``, ``num_key_value_heads`` or a checkpoint's
``obs://`` path must reach TensorBoard's HPARAMS, run.json and the TEXT tab unchanged.

**A secret's name** (:func:`secret_name`, :mod:`mindwatch.common.secret_names`). A name
(a config key, an hparam, an option, a ``KEY=VALUE``) is split into parts at ``.`` and
``[]`` (``alerts.notify.0.url``) and each part into words at other punctuation and at
camelCase (``accessToken``: access, token). A name is a secret's when one of its parts
is, and a part is when:

* a word contains ``secret``, ``passw``, ``passphrase``, ``credential``, ``cookie``,
  ``webhook`` or ``authoriz`` (or the part holds 密码, 口令, 密钥, 令牌, 凭证 or 凭据); or
* its last word ends in ``pwd``, ``dsn``, ``url``, ``uri`` or ``auth`` (``db_pwd``,
  ``sentry_dsn``, ``notify_url``, ``basic_auth``; not ``author``), or is ``sk`` (the
  secret half of Huawei Cloud's AK/SK); or
* its last word is ``token`` or ``key`` (or ``tokens``, ``keys``) and either the part is
  that one word (``--token X``, ``KEY=...``) or the word before it says what kind of
  credential it is: api, access, secret, private, auth, oauth, app, client, bearer,
  session, refresh, signing, sign, encryption, encrypt, license, master, deploy, job,
  bot, user-facing services (hf, hub, github, gh, gitlab, wandb, swanlab, openai,
  modelscope, openmind, pypi, npm, slack, webhook, dingtalk, feishu, lark, wecom) and
  key kinds (ssh, hmac, aes, jwt, csrf, xsrf); or a last word that is such a compound
  (``apikey``, ``accesstoken``, ``hftoken``, ``privatekey``). So ``hf_token``,
  ``x-api-key``, ``AWS_SESSION_TOKEN`` and ``hub.token`` are secrets' names, and
  ``pad_token``, ``eos_token_id``, ``num_key_value_heads``, ``construct_args_key``,
  ``sort_key``, ``max_tokens``, ``moe_token_dispatcher_type`` and ``tokenizer`` are not
  (a word before ``token`` that is not a credential's kind makes it a vocabulary token:
  ``pad``, ``eos``, ``ignore``).

A part whose last word is ``env`` holds the name of an environment variable, not the
secret, and stays (``url_env``). Trailing numbers do not count (``api_key_2``).

**What is masked under such a name** (:func:`redact_value`): text becomes ``***``.
Numbers, booleans and ``None`` are never masked, and lists keep their numbers (a secret
is text; ``pad_token_id: 0`` was ``***`` once), except under a password's or a secret's
name (``passw``, ``passphrase``, ``pwd``, ``secret``), where YAML reads ``password:
123456`` as a number. Under a name that is a secret's only for its ``url`` / ``uri``
ending, a storage URL (``obs://``, ``s3://``, ``hdfs://``, ``gs://``, ``file://``...)
is shown by the URL rules below instead (MindFormers' ``remote_save_url``): it has no
token in its path, and its user info and query are masked all the same. (HPARAMS shows
a list as its text, so there a list under a secret's name is masked.)

**In a URL** (``scheme://...``, anywhere in a text): the user info (``user:pw@``
becomes ``***@``), every query value (``?access_token=***``) and the fragment, for
every scheme; and, for web addresses only (``http``, ``https``, ``ws``, ``wss``: the
webhooks), path segments that look like tokens: 16 or more letters, digits, ``-`` and
``_`` with at least one letter and one digit (Slack's and Feishu's webhooks carry their
token in the path). Storage URLs keep their paths (``obs://bucket/llama2_7b_20240601/``
is a folder's name). The scheme, host, port, the other path segments and the query's
keys stay, so a message still says where. A ``user:password@host`` without a scheme (a
Pushgateway address may be written so) loses its user info too.

**In a text** (:func:`redact_text`) and **a command line** (:func:`redact_argv`): a
secret's name followed by ``=`` or ``:`` (``password=...``, ``"token": "..."``,
``Authorization: Bearer ...``) has its whole value masked, as a person would read it:

* a quoted value, to its closing quote (``{"password": "hunter two"}``);
* an authorization scheme and its credential (``Bearer``, ``Basic``, ``Token``,
  ``Digest``... and what follows) as one value, to the end of the line (a Digest
  credential has commas and quotes in it): ``Authorization: ***``; under a ``Cookie``
  or ``Authorization`` name, the same (a cookie header holds ``;``);
* otherwise, in a text, to the next ``,``, ``;`` or ``}`` or the end of the line (a
  value in a sentence, a YAML line, a dict); in one command-line argument, to the end of
  the argument (``password=hunter two``: the shell kept it one argument).

``Bearer <token>`` is masked wherever it appears (``Bearer ***``). In a command line,
also the value of an option with a secret's name (``--token X``, ``--token=X``) and of
a ``KEY=VALUE`` argument with such a key (``WEBHOOK=...``, Hydra's
``alerts.notify.0.url=...``); after such an option, the next argument is its value
unless it is an option (``--lr``, ``-v``: a token may begin with ``-``). Short options
(``-p X``) cannot be told apart and are kept.

Not secrets: paths, the working directory, host names, numbers (but a password's).
mindwatch never records the environment (``os.environ`` is read only for the variables
a config names).

Configuration errors keep their stronger masking (:func:`masked`): there a bad value's
URL is replaced whole, since the user needs the key and the rule, not the address.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from numbers import Number
from typing import Any, Optional

from mindwatch.common.secret_names import secret_kind, secret_name

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
# Web addresses: the schemes whose paths may carry a webhook's token.
_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})
# Storage addresses: a path that is a folder's or a file's name, never a token.
_STORAGE_SCHEMES = frozenset(
    {"obs", "s3", "s3a", "s3n", "gs", "gcs", "hdfs", "viewfs", "file", "oss", "cos", "cosn"}
    | {"abfs", "abfss", "wasb", "wasbs", "az"}
)

_NAME = re.compile(r"[A-Za-z_][\w.\[\]-]*")
_OPTION = re.compile(r"--[A-Za-z].*|-[A-Za-z]", re.DOTALL)  # the next option, not a value

# ``name=value``, ``name: value``, ``"name": "value"``: a name and its separator; the
# value's extent is found by _value_end.
_NAME_SEP = re.compile(
    r"(?<![\w.\[\]])(?P<name>[A-Za-z_][\w.\[\]-]*)[\"']?[ \t]*(?P<sep>[:=])[ \t]*"
)
_SCHEME = re.compile(
    r"(?:Bearer|Basic|Token|Digest|Negotiate|NTLM|Bot|OAuth|ApiKey|AWS4-HMAC-SHA256)"
    r"[ \t]+(?=\S)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\bBearer[ \t]+(?!\*\*\*)[A-Za-z0-9\-._~+/]{8,}=*")
_TEXT_STOPS = re.compile(r"[,;}\r\n]")
_HEADER = re.compile(r"(?i)cookie|authoriz")  # names whose value runs to the line's end
_LINE_END = re.compile(r"[\r\n]")


def _masked_query(query: str) -> str:
    parts = []
    for pair in query.split("&"):
        key, eq, _value = pair.partition("=")
        parts.append(f"{key}={MASK}" if eq else MASK if key else key)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """``url`` without its secrets: user info, query values, fragment, and for web
    addresses token-like path segments (see the module's rules)."""
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
    if scheme.lower() in _WEB_SCHEMES:
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


def _value_end(text: str, start: int, name: str, argv: bool) -> tuple[int, int]:
    """Where the value that begins at ``start`` after ``name`` and its separator is
    masked: ``(from, to)`` (see the module's rules)."""
    first = text[start]
    if first in "\"'":  # quoted: to the closing quote (a backslash escapes one)
        pos = start + 1
        while pos < len(text):
            char = text[pos]
            if char == "\\":
                pos += 2
                continue
            if char == first:
                return start + 1, pos
            if char in "\r\n" and not argv:
                break
            pos += 1
        stop = _LINE_END.search(text, start) if not argv else None
        return start + 1, stop.start() if stop else len(text)
    # ``Bearer abc``: one value with its scheme, which may have commas (Digest).
    header = _SCHEME.match(text, start) is not None or _HEADER.search(name) is not None
    if argv:
        stop = None
    elif header:
        stop = _LINE_END.search(text, start)
    else:
        stop = _TEXT_STOPS.search(text, start)
    end = stop.start() if stop else len(text)
    while end > start and text[end - 1] in " \t":
        end -= 1
    return start, end


def _assignments(text: str, argv: bool) -> str:
    """``text`` with the value of every ``<secret's name>=value`` / ``: value`` masked."""
    out: list[str] = []
    done = 0  # text[:done] is in out
    pos = 0
    while True:
        match = _NAME_SEP.search(text, pos)
        if match is None:
            break
        pos = match.end()
        if pos >= len(text) or text[pos] in "\r\n" or not secret_name(match.group("name")):
            continue
        if match.group("sep") == ":" and text.startswith("//", match.end("sep")):
            continue  # a URL's scheme (``webhook_url://`` is none of ours)
        begin, end = _value_end(text, pos, match.group("name"), argv)
        value = text[begin:end]
        # Not masked already: pydantic's ****, ours (``?token=***`` of a URL before).
        if value and not value.startswith(MASK) and set(value) != {"*"}:
            out.append(text[done:begin])
            out.append(MASK)
            done = end
        pos = max(end, pos)
    out.append(text[done:])
    return "".join(out)


def _redact(text: str, known: Iterable[Optional[str]], argv: bool) -> str:
    for secret in sorted((s for s in known if s), key=len, reverse=True):
        for form in {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret)}:
            text = text.replace(form, MASK)
    if "://" in text:
        text = _URL.sub(_url_in_text, text)
    if "@" in text:
        text = _BARE_USERINFO.sub(f"{MASK}@", text)
    if "Bearer" in text:
        text = _BEARER.sub(lambda m: m.group(0).split()[0] + " " + MASK, text)
    if ":" in text or "=" in text:
        text = _assignments(text, argv)
    return text


def redact_text(text: str, known: Iterable[Optional[str]] = ()) -> str:
    """``text`` with every URL in it redacted (:func:`redact_url`), a bare
    ``user:password@``'s user info masked, the value after every secret's name
    (``password=...``, ``Authorization: Bearer ...``) masked, and each of the ``known``
    secrets (as given and URL-quoted: an exception may quote what it was given)
    replaced by ``***``."""
    return _redact(text, known, argv=False)


def _mask(value: Any, kind: str) -> Any:
    """What a value under a secret's name (``kind``: why it is one) becomes."""
    if (
        value is None
        or isinstance(value, bool)
        or (isinstance(value, Number) and kind != "password")  # a secret is text
    ):
        return value
    if isinstance(value, str):
        return _masked_text(value, kind)
    if isinstance(value, Mapping):
        return {k: _mask(v, kind) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask(v, kind) for v in value]
    return MASK  # bytes, an object whose text may be the secret


def _masked_text(value: str, kind: str) -> str:
    if set(value) == {"*"}:  # a mask already made, as pydantic's **********
        return value
    scheme, sep, _rest = value.partition("://")
    if kind == "url" and sep and scheme.lower() in _STORAGE_SCHEMES:
        return redact_url(value)
    return MASK


def redact_value(value: Any, name: str = "") -> Any:
    """``value`` (JSON-like data: a config, hparams, extra fields) with secrets masked at
    any depth: the text under a :func:`secret_name` key, and every string by
    :func:`redact_text`. Returns new containers; ``value`` is left as it was."""
    kind = secret_kind(name) if name else None
    if kind is not None:
        return _mask(value, kind)
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


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line (``sys.argv``) without its secrets (see the module's rules)."""
    out: list[str] = []
    value_is_secret = False
    for arg in argv:
        if value_is_secret and not _OPTION.fullmatch(arg):
            out.append(MASK)  # ``--token X``: X (also ``-x9Y...``: a token, not options)
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
        out.append(_redact(arg, (), argv=True))
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
