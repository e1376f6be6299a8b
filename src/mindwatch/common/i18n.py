"""User-facing text in English and Chinese (gettext message catalogues, Babel).

Every sentence a person reads (alert messages and likely causes, notifier payloads,
console lines, CLI summaries) is written in English in the code and wrapped in
:func:`_` where it is made::

    from mindwatch.common.i18n import _

    message = _("{tag} jumped to {value}").format(tag=tag, value=value)

Format the *translated* string (placeholders by name), never translate a formatted one.
Text defined at import time (tables, constants) is marked with :func:`N_` and translated
with :func:`_` where it is used.

The language is process-wide: :func:`set_language` (``alerts.language: zh | en``), by
default from the locale (``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``, ``LANG``: ``zh*``
gives Chinese).
"""

from __future__ import annotations

import os
from typing import Optional

__all__ = ["LANGUAGES", "N_", "_", "default_language", "get_language", "set_language"]

LANGUAGES = ("en", "zh")

_language: Optional[str] = None


def default_language() -> str:
    """``zh`` when the locale says Chinese, else ``en``."""
    for key in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(key)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def set_language(language: Optional[str]) -> None:
    """Use ``language`` (one of :data:`LANGUAGES`; None: the locale's) from now on."""
    global _language
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
    _language = language


def get_language() -> str:
    return _language or default_language()


def _(message: str) -> str:
    """``message`` in the current language (English when it has no translation)."""
    return message


def N_(message: str) -> str:  # noqa: N802 - gettext's name for "mark, do not translate yet"
    """Mark ``message`` for the catalogue without translating it now."""
    return message
