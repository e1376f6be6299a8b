"""``Settings``, the base of every section, lives in :mod:`mindwatch.common.settings`
(the rules' settings, which sit below the config, derive from it too); here for the
config's modules and for code that imported it from here."""

from mindwatch.common.settings import DAY, HOUR, INT64, Settings

__all__ = ["DAY", "HOUR", "INT64", "Settings"]
