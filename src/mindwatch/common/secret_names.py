"""Which names hold secrets: the name rules of :mod:`mindwatch.common.redact` (its
docstring says them, and why; the tests check every name MindFormers 1.9 has)."""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["secret_kind", "secret_name"]

# A part of a name is a secret's when a word contains one of these...
_CONTAINS = ("secret", "passw", "passphrase", "credential", "cookie", "webhook", "authoriz")
# ... or its last word ends with one of these, or is one of _LAST ...
_ENDS = ("pwd", "dsn", "url", "uri", "auth")
_LAST = frozenset({"sk"})
# ... or its last word is a token or key that the word before qualifies as a
# credential's (or it is the part's only word).
_CREDENTIAL_KINDS = frozenset(
    {"api", "access", "secret", "private", "auth", "oauth", "app", "client", "bearer"}
    | {"session", "refresh", "signing", "sign", "encryption", "encrypt", "license"}
    | {"master", "deploy", "job", "bot", "hf", "hub", "github", "gh", "gitlab", "wandb"}
    | {"swanlab", "openai", "modelscope", "openmind", "pypi", "npm", "slack", "webhook"}
    | {"dingtalk", "feishu", "lark", "wecom", "ssh", "hmac", "aes", "jwt", "csrf", "xsrf"}
)
_PASSWORD_WORDS = ("secret", "passw", "passphrase")
# password, passphrase, secret key, token, credentials: a Chinese config's own names
_CJK_SECRETS = ("密码", "口令", "密钥", "令牌", "凭证", "凭据")
_PARTS = re.compile(r"[.\[\]]+")
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _words(part: str) -> list[str]:
    words = [w.lower() for w in _WORDS.findall(part)]
    while words and words[-1].isdigit():  # api_key_2
        words.pop()
    return words


def _part_kind(part: str) -> Optional[str]:
    """Why a part of a name is a secret's: "password", "url", "other"; None if not."""
    words = _words(part)
    if (
        any(w in part for w in _CJK_SECRETS)
        or any(w in word for word in words for w in _PASSWORD_WORDS)
        or (words and words[-1].endswith("pwd"))
    ):
        return "password"
    if not words:
        return None
    if any(w in word for word in words for w in _CONTAINS):
        return "other"
    if words[-1].endswith(("url", "uri")):
        return "url"
    if words[-1].endswith(_ENDS) or words[-1] in _LAST or _credential(words):
        return "other"
    return None


def _credential(words: list[str]) -> bool:
    """Whether the last of ``words`` is a credential's token or key (the rules)."""
    last = words[-1]
    base = last[:-1] if last.endswith(("tokens", "keys")) else last
    for noun in ("token", "key"):
        if base == noun:
            if len(words) == 1:  # the part is the one word (not "tokens")
                return base == last
            return words[-2] in _CREDENTIAL_KINDS
        if base.endswith(noun) and base[: -len(noun)] in _CREDENTIAL_KINDS:
            return True  # apikey, accesstoken
    return False


def secret_kind(name: str) -> Optional[str]:
    """Why ``name`` is a secret's name ("password", "url", "other"), or None."""
    parts = [p for p in _PARTS.split(name) if p]
    if not parts or _words(parts[-1])[-1:] == ["env"]:
        return None
    kinds = {_part_kind(part) for part in parts} - {None}
    for kind in ("password", "other", "url"):
        if kind in kinds:
            return kind
    return None


def secret_name(name: str) -> bool:
    """True when a value stored under ``name`` is a secret (the rules of
    :mod:`mindwatch.common.redact`)."""
    return secret_kind(name) is not None
