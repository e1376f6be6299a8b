"""The message catalogues: every message in both languages, placeholders intact, and
the language chosen by the config, the locale or set_language."""

from __future__ import annotations

import gettext
import importlib.util
import json
import math
import os
import shutil
import string
from pathlib import Path
from typing import Any

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

import mindwatch
from mindwatch.alerts.engine import RuleEngine
from mindwatch.common import i18n
from mindwatch.common.i18n import _, get_language, set_language
from mindwatch.config import AlertSettings, ConfigError, MonitorConfig

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "mindwatch"
ZH_PO = PACKAGE / "locale" / "zh" / "LC_MESSAGES" / "mindwatch.po"


def source_messages() -> dict[str, str]:
    """Every _("...") / N_("...") / ngettext("...", "...") in the package, as `make
    messages` extracts it (Babel's own extractors, with the same mapping file), and where
    it is; a plural message by its singular."""
    with open(ROOT / "babel.cfg", encoding="utf-8") as handle:
        from babel.messages.frontend import parse_mapping_cfg

        method_map, options_map = parse_mapping_cfg(handle)
    found = {}
    for filename, lineno, message, _comments, _context in extract_from_dir(
        str(ROOT), method_map, options_map
    ):
        singular = message[0] if isinstance(message, tuple) else message
        found[singular] = f"{filename}:{lineno}"
    return found


def placeholders(text: str) -> list[tuple[str, str]]:
    """The ``{name:spec}`` fields of a str.format template, sorted."""
    return sorted(
        (name, spec or "") for _t, name, spec, _c in string.Formatter().parse(text) if name
    )


def test_the_extractor_finds_the_alert_messages() -> None:
    found = source_messages()
    assert len(found) >= 50
    assert "{tag} is NaN" in found  # a rule's message
    assert "a bad batch at this step" in found  # a likely cause (N_ in a table)
    assert "check: {causes}" in found  # a notifier's payload


def test_every_message_in_the_source_has_a_chinese_translation() -> None:
    """Fails when a string is added or changed without `make messages` and a translation."""
    with open(ZH_PO, "rb") as handle:
        catalog = read_po(handle, locale="zh")
    missing = []
    for message, where in source_messages().items():
        entry = catalog.get(message)
        if entry is None or not all(_forms(entry.string)) or entry.fuzzy:
            missing.append(f"{where}: {message!r}")
    assert not missing, "untranslated (run `make messages`, then translate):\n" + "\n".join(missing)


def test_translations_keep_every_placeholder_and_are_chinese() -> None:
    with open(ZH_PO, "rb") as handle:
        catalog = read_po(handle, locale="zh")
    assert not list(catalog.check())  # Babel's own checks (python-format and the like)
    entries = [m for m in catalog if m.id]
    assert entries
    for entry in entries:
        english = _forms(entry.id)
        for text in _forms(entry.string):  # Chinese has one plural form
            assert placeholders(text) == placeholders(english[0]), entry.id
            # A format call must not fail on the translated text.
            values = {name: 1.5 for name, _spec in placeholders(english[0])}
            text.format(**values)
            # Chinese characters or full-width punctuation (U+3000 and above): not English.
            assert any(ord(c) >= 0x3000 for c in text), (entry.id, text)


def _forms(text: Any) -> tuple[str, ...]:
    """A catalogue entry's text: one string, or a plural's forms."""
    return tuple(text) if isinstance(text, (tuple, list)) else (text,)


def test_chinese_alert_messages_causes_and_lines() -> None:
    set_language("zh")
    engine = RuleEngine(AlertSettings(), run="exp", rank=0)
    for step in range(1, 41):
        engine.observe(step, {"train/loss": 1.0 + 0.01 * (step % 3)})
    (spike,) = engine.observe(41, {"train/loss": 40.0})
    assert spike.message.startswith("train/loss 突增至 40，是近期中位数")
    assert spike.causes[0] == "异常批次：标签损坏或有离群样本（检查这一步、这个 rank 的批次）"
    (nan,) = engine.observe(42, {"train/loss": math.nan})
    assert nan.line() == "[严重] nonfinite（第 42 步，rank 0）：train/loss 为 NaN"
    assert json.loads(nan.to_json())["severity"] == "critical"  # values stay English


def test_english_is_the_messages_themselves() -> None:
    set_language("en")
    engine = RuleEngine(AlertSettings(), run="exp", rank=0)
    (nan,) = engine.observe(1, {"train/loss": math.inf})
    assert nan.line() == "[critical] nonfinite at step 1, rank 0: train/loss is infinite"
    assert nan.causes[0] == "a NaN or Inf in the input batch (check the data at this step)"


def test_the_default_language_comes_from_the_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGUAGE", raising=False)
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert get_language() == "zh"
    assert _("critical") == "严重"
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert (get_language(), _("critical")) == ("en", "critical")
    set_language("zh")  # the config's alerts.language wins over the locale
    assert _("critical") == "严重"


def test_alerts_language_in_the_config_chooses_the_monitors_language(tmp_path: Path) -> None:
    config = {"print_every": 0, "alerts": {"language": "zh"}}
    with mindwatch.Monitor(tmp_path, config) as mon:
        mon.log_step(1, loss=math.nan)
    (line,) = (tmp_path / "alerts.jsonl").read_text(encoding="utf-8").splitlines()
    alert = json.loads(line)
    assert alert["message"] == "train/loss 为 NaN"
    assert alert["causes"][0] == "输入批次中有 NaN 或 Inf（检查这一步的数据）"


def test_an_unknown_language_is_refused_with_the_key_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"alerts\.language.*'zh'.*'en'"):
        MonitorConfig.from_any({"alerts": {"language": "fr"}})
    with pytest.raises(ValueError, match="language must be one of en, zh, got 'fr'"):
        set_language("fr")


def test_a_checkout_that_was_never_built_reads_the_po(tmp_path: Path) -> None:
    """No .mo (a source checkout run with PYTHONPATH=src): Babel reads the .po."""
    folder = tmp_path / "zh" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    shutil.copy(ZH_PO, folder)
    assert i18n._load("zh", tmp_path).gettext("critical") == "严重"


def test_the_build_step_compiles_what_gettext_reads(tmp_path: Path) -> None:
    """setup.py's compile step (pip install, wheels, editable installs) gives a .mo that
    gettext reads, and the loader prefers it."""
    folder = tmp_path / "zh" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    shutil.copy(ZH_PO, folder)
    spec = importlib.util.spec_from_file_location("mindwatch_setup", ROOT / "setup.py")
    assert spec is not None
    assert spec.loader is not None
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    (mo,) = setup.compile_catalogues(tmp_path, tmp_path)
    assert mo == folder / "mindwatch.mo"
    with open(mo, "rb") as handle:
        assert gettext.GNUTranslations(handle).gettext("warning") == "警告"
    po = folder / "mindwatch.po"
    po.write_text("this is not a catalogue", encoding="utf-8")
    os.utime(po, (1, 1))  # older than the .mo: the .mo is what is read
    assert i18n._load("zh", tmp_path).gettext("info") == "提示"
