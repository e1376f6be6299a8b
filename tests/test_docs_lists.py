"""The lists of rules, sinks, notifiers and run-folder files in the pages follow their
registries (docs/development.md, "Lists that follow a registry").

A list that is a table or a tree of one registry is generated from it
(``docs/gen_lists.py``; here: the generated parts are up to date). A list that stays
written by hand, inside sentences or beside other text, is marked on its page:

    ... and the log: <!-- list: rules -->`nonfinite`, `spike`, ...<!-- /list --> ...

and checked here both ways, in English and Chinese: a name in the registry the list
leaves out fails, and so does an item of the list that names nothing in the registry.
Each failure names the page, the list (its kind, number on the page and line) and the
missing or extra names. The number of marked lists of each kind on each page is pinned
below, so a list cannot lose its markers unnoticed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Callable, NamedTuple, get_args

import pytest

from mindwatch.alerts import notify
from mindwatch.config.alerts import NotifierKind
from mindwatch.rules import RULE_NAMES
from mindwatch.run.layout import RUN_FOLDER
from mindwatch.sinks import (
    SINK_KINDS,
    MindFormersView,
    ProgressSink,
    PrometheusSink,
    TensorBoardSink,
)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# How each page names a registry's members, in both languages: a list item must hold
# exactly one of these (a new notifier kind or sink needs its words here first).
NOTIFIER_WORDS = {
    "webhook": r"\bwebhooks?\b",
    "dingtalk": r"\bDingTalk\b|钉钉",
    "feishu": r"\bFeishu\b|飞书",
    "wecom": r"\bWeCom\b|企业微信",
    "slack": r"\bSlack\b",
    "email": r"\be-mail\b|邮件",
}
SINK_WORDS = {
    TensorBoardSink: r"\bTensorBoard\b",
    MindFormersView: r"\bMindFormers view\b",
    ProgressSink: r"\bconsole\b",
    PrometheusSink: r"\bPrometheus\b",
}

# page -> {kind: how many marked lists of that kind it has}
MARKED = {
    "README.md": {"notifiers": 1},
    "README.zh-CN.md": {"notifiers": 1},
    "docs/alerts.md": {"rules": 2, "notifiers": 2},
    "docs/alerts.zh.md": {"rules": 1, "notifiers": 3},
    "docs/forensics.md": {"notifiers": 1},
    "docs/multicard.md": {"run-folder": 1},
    "docs/dev/architecture.md": {"sinks": 1},
}

_SPAN = re.compile(r"<!-- list: ([\w-]+) -->(.*?)<!-- /list -->", re.S)
_SEPARATORS = re.compile(r"[,;、，；]|\s+or\s+|\s+and\s+|或|和")
_FENCED = re.compile(r"^```[\w-]*\n(.*?)^```$", re.S | re.M)


class Marked(NamedTuple):
    page: str
    kind: str
    number: int  # from 1, among the page's lists of that kind
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.page}, list of {self.kind} #{self.number} (line {self.line})"


def _marked() -> list[Marked]:
    found = []
    for page in MARKED:
        text = (ROOT / page).read_text(encoding="utf-8")
        seen: dict[str, int] = {}
        for match in _SPAN.finditer(text):
            kind = match.group(1)
            seen[kind] = seen.get(kind, 0) + 1
            line = text.count("\n", 0, match.start()) + 1
            found.append(Marked(page, kind, seen[kind], line, match.group(2)))
    return found


LISTS = _marked()


# -- what a list names, by kind --------------------------------------------------------


def _rules(text: str) -> tuple[set[str], list[str]]:
    """Backticked names; in a table, the first cell of each row only."""
    lines = text.split("\n")
    cells = [line.split("|")[1] if line.startswith("|") else line for line in lines]
    cells = [c for c in cells if not re.fullmatch(r"\s*-+\s*|\s*rule\s*", c)]
    names = re.findall(r"`([^`]+)`", "\n".join(cells))
    return {n for n in names if n in RULE_NAMES}, [n for n in names if n not in RULE_NAMES]


def _worded(words: dict[str, str]) -> Callable[[str], tuple[set[str], list[str]]]:
    def read(text: str) -> tuple[set[str], list[str]]:
        fenced = _FENCED.search(text)
        if fenced:  # a config example: the kinds it configures
            kinds = re.findall(r"^\s*- kind: (\w+)", fenced.group(1), re.M)
            return {k for k in kinds if k in words}, [k for k in kinds if k not in words]
        named, extra = set(), []
        for item in _SEPARATORS.split(" ".join(text.split())):
            if not item.strip():
                continue
            hits = [key for key, word in words.items() if re.search(word, item)]
            if len(hits) == 1:
                named.add(hits[0])
            else:
                extra.append(item.strip())
        return named, extra

    return read


def _run_folder(text: str) -> tuple[set[str], list[str]]:
    """A tree (``runs/exp/``, then indented entries, 2 spaces a level): each path,
    relative to the run, with ``<...>`` and ``*`` made concrete, matched against
    RUN_FOLDER's patterns."""
    block = _FENCED.search(text)
    assert block, "a run-folder list is a fenced tree"
    lines = block.group(1).split("\n")
    root = lines[0].split()[0]
    parents: list[str] = [""]
    named, extra = set(), []
    for line in lines[1:]:
        token = line.split()[0] if line.strip() else ""
        indent = len(line) - len(line.lstrip(" "))
        if not re.fullmatch(r"[\w.<>*{}/-]+", token) or not ("." in token or "/" in token):
            continue  # a description's next line
        if indent == 0:  # another folder of the run, written out
            relative, parents = token[len(root) :], [token[len(root) :]]
        else:
            parents = parents[: indent // 2]
            relative = parents[-1] + token
        if relative.endswith("/"):
            parents.append(relative)
        concrete = re.sub(r"<[^>]+>", "1", relative).replace("*", "x")
        hits = [entry.path for entry in RUN_FOLDER if entry.matches(concrete)]
        if len(hits) == 1:
            named.add(hits[0])
        else:
            extra.append(relative)
    return named, extra


KINDS: dict[str, tuple[list[str], Callable[[str], tuple[set[str], list[str]]]]] = {
    "rules": (list(RULE_NAMES), _rules),
    "notifiers": (list(get_args(NotifierKind)), _worded(NOTIFIER_WORDS)),
    "sinks": (
        [kind.__name__ for kind in SINK_KINDS],  # type: ignore[attr-defined]
        _worded({kind.__name__: word for kind, word in SINK_WORDS.items()}),
    ),
    "run-folder": ([entry.path for entry in RUN_FOLDER], _run_folder),
}


# -- the tests -------------------------------------------------------------------------


def test_the_words_cover_each_registry() -> None:
    """A notifier kind or sink added to its registry needs its words here (and then in
    the lists): the test names it."""
    kinds = get_args(NotifierKind)
    assert set(kinds) == set(notify._KINDS), "NotifierKind and notify._KINDS disagree"
    assert set(NOTIFIER_WORDS) == set(kinds), f"words for the notifier kinds {kinds}"
    assert set(SINK_WORDS) == set(SINK_KINDS), f"words for the sinks {SINK_KINDS}"


@pytest.mark.parametrize("page", list(MARKED))
def test_each_page_keeps_its_marked_lists(page: str) -> None:
    counts: dict[str, int] = {}
    for marked in LISTS:
        if marked.page == page:
            counts[marked.kind] = counts.get(marked.kind, 0) + 1
    assert counts == MARKED[page], f"{page}: marked lists {counts}, expected {MARKED[page]}"


@pytest.mark.parametrize("marked", LISTS, ids=lambda m: f"{m.page}:{m.kind}#{m.number}")
def test_each_list_names_its_whole_registry_and_nothing_else(marked: Marked) -> None:
    assert marked.kind in KINDS, f"{marked}: no such kind of list (one of {list(KINDS)})"
    registry, read = KINDS[marked.kind]
    named, extra = read(marked.text)
    missing = [name for name in registry if name not in named]
    problems = []
    if missing:
        problems.append(f"missing (in the registry, not in the list): {missing}")
    if extra:
        problems.append(f"extra (in the list, naming no {marked.kind[:-1]}): {extra}")
    assert not problems, f"{marked}: " + "; ".join(problems)


def test_the_generated_lists_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(DOCS / "gen_lists.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
