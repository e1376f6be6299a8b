"""Web addresses in the config, checked without ever quoting them (webhook URLs carry
their access token: an error or a log line names the key or the variable instead)."""

from __future__ import annotations

import unicodedata
import urllib.parse
from typing import Optional

__all__ = ["pushgateway_url_problem", "webhook_url_problem"]

_WEBHOOK_EXAMPLE = "e.g. https://oapi.dingtalk.com/robot/send?access_token=..."
_PUSHGATEWAY_EXAMPLE = "e.g. http://pushgateway:9091"


def pushgateway_url_problem(url: str) -> Optional[str]:
    """What makes ``url`` unusable as a Pushgateway address (the same rules as a
    webhook's, except that ``host:port`` without a scheme means ``http://host:port``, as
    prometheus_client reads it), or None. Never quotes it: it may carry a password."""
    if "://" not in url:
        url = f"http://{url}"
    return _url_problem(url, _PUSHGATEWAY_EXAMPLE, "a Pushgateway")


def webhook_url_problem(url: str) -> Optional[str]:
    """What makes ``url`` unusable as a webhook address, in words that never quote it
    (webhook URLs carry their access token), or None: the scheme must be http or https,
    with a host, a numeric port from 1 to 65535 if any, only ASCII characters (a
    zero-width space pasted from a chat, a Chinese path or host name: named by position
    and code point) and no whitespace or control characters (a pasted line break, a
    space). Used for ``url`` when the config is built and for a ``url_env`` variable's
    value when delivery starts."""
    return _url_problem(url, _WEBHOOK_EXAMPLE, "a webhook")


# Characters that come invisibly with a pasted address (from a chat, a web page, a
# document): named, since the user cannot see them.
_INVISIBLE = {
    "\u200b": "zero-width space",
    "\u200c": "zero-width non-joiner",
    "\u200d": "zero-width joiner",
    "\u2060": "word joiner",
    "\ufeff": "byte order mark (BOM)",
    "\u00a0": "no-break space",
    "\u202f": "narrow no-break space",
    "\u3000": "ideographic (full-width) space",
    "\u00ad": "soft hyphen",
}


def _not_ascii(url: str) -> Optional[str]:
    """The first character of ``url`` beyond ASCII, by position and code point (never
    the character itself, nor the URL): HTTP libraries send only ASCII, so such an
    address fails at every delivery with ``UnicodeEncodeError``."""
    for position, char in enumerate(url, 1):
        if ord(char) < 0x80:
            continue
        name = _INVISIBLE.get(char)
        if name is None and unicodedata.category(char) in ("Cf", "Zs", "Zl", "Zp", "Mn"):
            name = unicodedata.name(char, "an invisible character").lower()
        if name is not None:
            return (
                f"has an invisible character, U+{ord(char):04X} ({name}), at character "
                f"{position} of {len(url)}, which came with a copy: delete it, or paste the "
                "address again from where it was made"
            )
        return (
            f"has a character that is not ASCII, U+{ord(char):04X}, at character {position} "
            f"of {len(url)}; a web request carries only ASCII: percent-encode it "
            "(urllib.parse.quote), or write a non-ASCII host name in its xn-- form"
        )
    return None


def _characters_problem(url: str) -> Optional[str]:
    """A character no address has: beyond ASCII, white space, a control character."""
    not_ascii = _not_ascii(url)
    if not_ascii is None and any(c.isspace() or unicodedata.category(c) == "Cc" for c in url):
        return (
            "contains a space, line break or control character: paste the address alone, "
            "on one line"
        )
    return not_ascii


def _url_problem(url: str, example: str, what: str) -> Optional[str]:
    characters = _characters_problem(url)
    if characters is not None:
        return characters
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number in 0-65535
    except ValueError:
        return (
            "is not a valid web address (a port that is not a number from 1 to 65535, or "
            f"a broken [IPv6] host); {example}"
        )
    if parts.scheme not in ("http", "https"):
        return f"must start with https:// (or http://), the address of {what}; {example}"
    if not parts.hostname:
        return f"has no host name after {parts.scheme}://; {example}"
    if port == 0:
        return f"has port 0, which no server listens on: use the port of {what} (or none)"
    return None
