"""Web addresses in the config, checked without ever quoting them (webhook URLs carry
their access token: an error or a log line names the key or the variable instead)."""

from __future__ import annotations

import unicodedata
import urllib.parse
from typing import Optional

__all__ = ["webhook_url_problem"]

_WEBHOOK_EXAMPLE = "e.g. https://oapi.dingtalk.com/robot/send?access_token=..."


def webhook_url_problem(url: str) -> Optional[str]:
    """What makes ``url`` unusable as a webhook address, in words that never quote it
    (webhook URLs carry their access token), or None: the scheme must be http or https,
    with a host, a numeric port from 1 to 65535 if any, and no whitespace or control
    characters (a pasted line break, a space). Used for ``url`` when the config is built
    and for a ``url_env`` variable's value when delivery starts."""
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in url):
        return (
            "contains a space, line break or control character: paste the address alone, "
            "on one line"
        )
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number in 0-65535
    except ValueError:
        return (
            "is not a valid web address (a port that is not a number from 1 to 65535, or "
            f"a broken [IPv6] host); {_WEBHOOK_EXAMPLE}"
        )
    if parts.scheme not in ("http", "https"):
        return (
            f"must start with https:// (or http://), the address of a webhook; {_WEBHOOK_EXAMPLE}"
        )
    if not parts.hostname:
        return f"has no host name after {parts.scheme}://; {_WEBHOOK_EXAMPLE}"
    if port == 0:
        return "has port 0, which no server listens on: use the port of the webhook (or none)"
    return None
