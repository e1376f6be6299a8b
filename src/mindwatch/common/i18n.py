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

The catalogues are ``mindwatch/locale/<lang>/LC_MESSAGES/mindwatch.po`` (the source,
edited by translators: docs/dev/translations.md); the build (``setup.py``) compiles them
to ``.mo`` next to them, which :mod:`gettext` reads. A source checkout that was never
built has only the ``.po``: it is compiled in memory with Babel when Babel is installed
(the dev extra), else the text stays English, with one warning. Each language is loaded
once; :func:`_` is then a dictionary look-up.
"""

from __future__ import annotations

import gettext
import io
import logging
import os
import threading
from pathlib import Path
from typing import Optional

__all__ = [
    "DOMAIN",
    "LANGUAGES",
    "LOCALE_DIR",
    "N_",
    "_",
    "default_language",
    "get_language",
    "ngettext",
    "set_language",
    "translations",
]

log = logging.getLogger(__name__)

LANGUAGES = ("en", "zh")
DOMAIN = "mindwatch"
LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"

_language: Optional[str] = None
_loaded: dict[str, gettext.NullTranslations] = {}
_lock = threading.Lock()


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


def translations(language: str) -> gettext.NullTranslations:
    """The catalogue of ``language``, loaded on first use and kept."""
    found = _loaded.get(language)
    if found is None:
        with _lock:
            found = _loaded.get(language)
            if found is None:
                found = _loaded[language] = _load(language)
    return found


def _load(language: str, locale_dir: Path = LOCALE_DIR) -> gettext.NullTranslations:
    if language == "en":  # the messages are English: no catalogue
        return gettext.NullTranslations()
    mo = locale_dir / language / "LC_MESSAGES" / f"{DOMAIN}.mo"
    po = mo.with_suffix(".po")
    # The .mo when it is at least as new as the .po (an edited .po in a checkout wins).
    if mo.is_file() and (not po.is_file() or mo.stat().st_mtime >= po.stat().st_mtime):
        with open(mo, "rb") as handle:
            return gettext.GNUTranslations(handle)
    if not po.is_file():
        log.warning("mindwatch: no %s message catalogue at %s; text stays English", language, po)
        return gettext.NullTranslations()
    try:
        from babel.messages.mofile import write_mo
        from babel.messages.pofile import read_po
    except ImportError:
        log.warning(
            "mindwatch: the %s messages are not compiled (%s is missing) and Babel, which "
            "could read %s, is not installed; text stays English. Reinstall mindwatch "
            "(pip install .) or pip install babel.",
            language,
            mo.name,
            po,
        )
        return gettext.NullTranslations()
    with open(po, "rb") as handle:
        catalog = read_po(handle, locale=language, domain=DOMAIN)
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


def _(message: str) -> str:
    """``message`` in the current language (English when it has no translation)."""
    return translations(_language or default_language()).gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    """``singular`` or ``plural`` for ``count``, in the current language (Chinese has
    one form)."""
    return translations(_language or default_language()).ngettext(singular, plural, count)


def N_(message: str) -> str:  # noqa: N802 - gettext's name for "mark, do not translate yet"
    """Mark ``message`` for the catalogue without translating it now."""
    return message
