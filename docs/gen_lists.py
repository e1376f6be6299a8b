"""Generate the parts of the pages that list a registry, from the registry itself.

    python docs/gen_lists.py          # rewrite each generated part
    python docs/gen_lists.py --check  # exit 1 naming each part that is stale

A generated part sits between ``<!-- generated: NAME (docs/gen_lists.py) -->`` and
``<!-- end generated: NAME -->`` on a page; the rest of the page is written by hand.
``tests/test_docs_lists.py`` runs the check, and checks the lists that stay prose
(inside sentences, in both languages) against their registries.

* ``run-folder`` (docs/usage.md): the run folder's files and folders, from
  :data:`mindwatch.run.layout.RUN_FOLDER`.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path
from typing import Callable

from mindwatch.run.layout import RUN_FOLDER

DOCS = Path(__file__).resolve().parent
WIDTH = 100  # the tree's lines, as the page's other blocks


def run_folder() -> str:
    """The tree of a run folder (``runs/exp1/``), each entry with what it holds; an
    entry inside a folder entry is indented below it."""
    rows = []
    for entry in RUN_FOLDER:
        parent, _, name = entry.path.rstrip("/").rpartition("/")
        depth = 2 if parent else 1
        rows.append(("  " * depth + name + ("/" if entry.path.endswith("/") else ""), entry.what))
    column = max(len(name) for name, _ in rows) + 3
    lines = ["runs/exp1/"]
    for name, what in rows:
        wrapped = textwrap.wrap(what, WIDTH - column) or [""]
        lines.append(name.ljust(column) + wrapped[0])
        lines += [" " * column + more for more in wrapped[1:]]
    return "```text\n" + "\n".join(lines) + "\n```"


# name -> (page, what renders it)
PARTS: dict[str, tuple[Path, Callable[[], str]]] = {
    "run-folder": (DOCS / "usage.md", run_folder),
}


def _region(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- generated: {re.escape(name)} \(docs/gen_lists\.py\) -->\n)(.*?)"
        rf"(\n<!-- end generated: {re.escape(name)} -->)",
        re.S,
    )


def rendered(name: str) -> tuple[str, str]:
    """(the page's text now, the page's text with the part ``name`` generated)."""
    page, render = PARTS[name]
    text = page.read_text(encoding="utf-8")
    if not _region(name).search(text):
        raise SystemExit(f"{page}: no generated part {name!r} (its two marker lines)")
    return text, _region(name).sub(lambda m: m.group(1) + render() + m.group(3), text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stale = []
    for name, (page, _) in PARTS.items():
        now, fresh = rendered(name)
        if now != fresh:
            stale.append(f"{page.relative_to(DOCS.parent)} ({name})")
            if not args.check:
                page.write_text(fresh, encoding="utf-8")
    if args.check and stale:
        print(f"stale: {', '.join(stale)}: run python docs/gen_lists.py", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
