"""The documentation stays true to the code and the two languages stay in step.

The site itself is built strict by `make test` (`make docs`: a broken link or anchor,
a page missing from the nav, any warning fails it). Here:

* every Chinese page's code blocks are code blocks of its English page: the same
  commands and code, the same config keys (comments and program output may be
  translated); the pages translated whole have the same blocks in the same order;
* every `mindwatch ...` command the README and the pages show parses with the real
  command line (the command exists and takes those options), every Python block
  compiles, and every YAML block that is a mindwatch config validates as one (the
  README and the pages moved out of it are also run, block by block, against what they
  show: tests/mindspore/test_docs_run.py);
* the README is a landing page: under 250 lines.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import NamedTuple

import click
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Chinese page -> English page; True: translated whole (the same blocks, in order).
CHINESE = {
    ROOT / "README.zh-CN.md": (ROOT / "README.md", True),
    DOCS / "quickstart.zh.md": (DOCS / "quickstart.md", True),
    DOCS / "tensorboard.zh.md": (DOCS / "tensorboard.md", True),
    DOCS / "mindformers.zh.md": (DOCS / "mindformers.md", False),
    DOCS / "multicard.zh.md": (DOCS / "multicard.md", False),
    DOCS / "alerts.zh.md": (DOCS / "alerts.md", False),
    DOCS / "report.zh.md": (DOCS / "report.md", False),
    DOCS / "compare.zh.md": (DOCS / "compare.md", False),
}
ENGLISH = [ROOT / "README.md", *sorted(p for p in DOCS.glob("*.md") if ".zh." not in p.name)]
_FENCE = re.compile(r"^(\s*)(```|~~~)\s*([\w+-]*)")
_CODE = {"bash", "sh", "shell", "python", "py", "yaml", "yml", "toml"}


class Block(NamedTuple):
    """A fenced block of a Markdown page: its language, its text, and the lines (from 1)
    of its opening and closing fences."""

    lang: str
    text: str
    first: int
    last: int


def fenced(path: Path) -> list[Block]:
    """Each fenced block of a Markdown page (also indented ones, in a list)."""
    found: list[Block] = []
    lines: list[str] = []
    lang, fence, indent, first = "", "", 0, 0
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        match = _FENCE.match(line)
        if not fence and match:
            indent, fence, lang = len(match.group(1)), match.group(2), match.group(3)
            lines, first = [], number
        elif fence and line.strip() == fence:
            found.append(Block(lang, "\n".join(lines), first, number))
            fence = ""
        elif fence:
            lines.append(line[indent:])
    return found


def blocks(path: Path) -> list[tuple[str, str]]:
    """``(language, text)`` of each fenced block of a Markdown page."""
    return [(block.lang, block.text) for block in fenced(path)]


def comparable(lang: str, text: str) -> str:
    """What a translation keeps of a block: code without comments, or an output's
    commands (the ``$ `` lines; what a program printed may be in the other language)."""
    if lang in _CODE:
        code = [re.sub(r"(^|\s+)#(?![!{]).*$", "", line).rstrip() for line in text.split("\n")]
        return "\n".join(line for line in code if line)
    return "\n".join(line for line in text.split("\n") if line.startswith("$ "))


@pytest.mark.parametrize("chinese", list(CHINESE), ids=lambda p: p.name)
def test_chinese_pages_show_the_english_pages_commands_and_code(chinese: Path) -> None:
    english, whole = CHINESE[chinese]
    theirs = [comparable(*b) for b in blocks(english)]
    ours = [comparable(*b) for b in blocks(chinese)]
    assert ours, f"{chinese.name} has no code blocks"
    missing = [b for b in ours if b not in theirs]
    assert not missing, f"{chinese.name}: blocks not in {english.name} (update both): {missing}"
    if whole:
        assert ours == theirs, f"{chinese.name} must show {english.name}'s blocks, in order"


def test_the_chinese_pages_a_newcomer_needs_exist_and_are_chinese() -> None:
    for chinese in CHINESE:
        text = chinese.read_text(encoding="utf-8")
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        han = len(re.findall(r"[\u4e00-\u9fff]", prose))
        assert han > 300, f"{chinese.name}: {han} Chinese letters"


def test_the_readme_is_a_landing_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 250
    assert (ROOT / "README.zh-CN.md").read_text(encoding="utf-8").count("\n") < 250


def _commands() -> list[tuple[str, str]]:
    """``(page, command line)`` of every mindwatch command a page shows."""
    found = []
    for page in ENGLISH:
        for lang, text in blocks(page):
            for raw in text.replace("\\\n", " ").split("\n"):
                if lang not in _CODE and not raw.startswith("$ "):
                    continue  # program output
                line = re.sub(r"^\$ ", "", raw.strip())
                line = re.sub(r"^(\w+=\S+ )+", "", line)  # LANG=zh_CN.UTF-8 ...
                line = re.sub(r"\s+#.*$", "", line)
                if re.match(r"^(\.venv/bin/)?mindwatch \w", line):
                    found.append((page.name, line))
    return found


COMMANDS = _commands()


def test_the_pages_show_mindwatch_commands() -> None:
    assert len(COMMANDS) > 40
    shown = {shlex.split(line)[1] for _, line in COMMANDS}
    from mindwatch.cli import main

    assert shown == set(main.commands), "a command the docs never show, or one that is gone"


@pytest.mark.parametrize(("page", "line"), COMMANDS, ids=[f"{p}: {c[:60]}" for p, c in COMMANDS])
def test_each_command_shown_parses_with_the_real_cli(page: str, line: str) -> None:
    from mindwatch.cli import main

    words = shlex.split(re.split(r" \| | && | > | &$|; ", line)[0])  # the command itself
    if "[" in line or "..." in words or "SRC" in words or "LOGDIR" in words:  # a synopsis
        name = words[1]
        assert name in main.commands, f"{page}: no command {name!r}"
        options = {o for p in main.commands[name].params for o in getattr(p, "opts", [])}
        for option in re.findall(r"(?<![\w-])(--[\w-]+)", line):
            assert option in options, f"{page}: {name} has no option {option}"
        return
    try:
        main.make_context("mindwatch", words[1:], resilient_parsing=False)
        command = main.commands[words[1]]
        command.make_context(words[1], words[2:])
    except click.exceptions.Exit:
        pass  # --help / --version
    except click.UsageError as error:
        if "does not exist" in str(error) or "Path" in str(error):
            return  # a folder of the example, not on this machine: the options parsed
        pytest.fail(f"{page}: `{line}`: {error}")


def test_python_blocks_compile_and_config_blocks_validate() -> None:
    from mindwatch import ConfigError, MonitorConfig
    from mindwatch.config.errors import accepted_keys

    keys = set(accepted_keys(MonitorConfig))
    compiled = validated = 0
    for page in ENGLISH:
        for lang, text in blocks(page):
            if lang in ("python", "py") and not text.lstrip().startswith(">>>"):
                compile(text, f"{page.name} block", "exec")
                compiled += 1
            elif lang in ("yaml", "yml"):
                data = yaml.safe_load(text)
                if isinstance(data, dict) and set(data) <= keys and "callbacks" not in data:
                    try:
                        MonitorConfig.from_dict(data)
                    except ConfigError as error:
                        if "environment variable" not in str(error):
                            pytest.fail(f"{page.name}: a config that does not validate: {error}")
                    validated += 1
    assert compiled > 10
    assert validated > 5
