"""MkDocs hooks of the documentation site (``mkdocs.yml``; ``make docs``).

* The home page is the README: ``docs/index.md`` is rendered from ``README.md`` and
  ``docs/index.zh.md`` from ``README.zh-CN.md``, so the landing page has one home and
  the site's home and the repository's front page never drift apart.
* Links are checked where MkDocs cannot: a link to a file of the repository outside
  ``docs/`` (an example, a test, the deploy files) must name a file that exists, or the
  build fails naming the page and the link; it is then written as a plain relative link
  to that file, which works where the site is browsed next to its checkout (``site/``
  lands in the repository's root, as ``docs/`` is). Links into ``docs/`` are left to
  MkDocs' own strict validation (pages and anchors).
* A Chinese page covers what a newcomer needs first and links to the English page for
  the rest. In the Chinese build a link to a page that has a Chinese version goes to
  that version (mkdocs-static-i18n); when the anchor it names is a section only the
  English page has, the link goes to the English page instead, and the build fails if
  that page has no such section either.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from pymdownx.slugs import slugify

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HOMES = {"index.md": "README.md", "index.zh.md": "README.zh-CN.md"}
_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*(?:\{#([^}\s]+)\})?\s*$")
_ID = re.compile(r'<a id="([^"]+)"></a>')  # the English section's anchor on a translation
_HOME_PAGES = {"README.md": "index.html", "README.zh-CN.md": "zh/index.html"}
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef"  # CJK letters and full-width punctuation
# A line break between two Chinese letters is no space in Chinese (Markdown makes it one).
_CJK_BREAK = re.compile(f"(?<=[{_CJK}])\n(?=[{_CJK}])")
_SLUG = slugify(case="lower")  # mkdocs.yml's toc slugify: GitHub's anchors


@cache  # a page is read once per build, however many links name it
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown page: its headings' (``{#id}`` where one is given) and
    those of ``<a id="..."></a>`` lines, which give a translated section the English
    section's anchor (GitHub would show a heading's ``{#id}`` as text)."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if not fenced:
            found.update(_ID.findall(line))
        if match:
            text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1))
            found.add(match.group(2) or _SLUG(text, "-"))
    return frozenset(found)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    src = page.file.src_uri
    home = HOMES.get(src)
    if home is not None:
        markdown = (ROOT / home).read_text(encoding="utf-8")
    site = Path(config["site_dir"]).resolve()
    links = _Links(
        base=ROOT if home is not None else (DOCS / src).parent,
        page_dir=(DOCS / src).parent,
        dest=(site / page.file.dest_uri).parent,
        site=site.parent if site.name == "zh" else site,
        shown=home or f"docs/{src}",
        chinese=page.file.dest_uri.startswith("zh/") or site.name == "zh",
    )
    out: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        fence = bool(_FENCE.match(line.lstrip()))
        if fenced or fence:
            if not fenced and prose:  # a code block begins: the prose before it is done
                out.append(_CJK_BREAK.sub("", "\n".join(prose)))
                prose = []
            fenced = fenced != fence
            out.append(line)
        else:
            prose.append(_LINK.sub(links.rewrite, line))
    if prose:
        out.append(_CJK_BREAK.sub("", "\n".join(prose)))
    return "\n".join(out)


@dataclass
class _Links:
    base: Path  # what the page's links are relative to (the repository's root for a README)
    page_dir: Path  # the page's folder below docs/
    dest: Path  # the folder its HTML is written to
    site: Path  # the site's root (the English build's)
    shown: str  # the page, as errors name it
    chinese: bool

    def rewrite(self, match: re.Match[str]) -> str:
        bang, text, target = match.groups()
        if target.startswith("#") or _SCHEME.match(target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (self.base / path).resolve()
        if resolved.parent == ROOT and resolved.name in _HOME_PAGES:  # the other language's
            return self._anchor(self.site / _HOME_PAGES[resolved.name], anchor, text)
        if resolved == DOCS or DOCS in resolved.parents:
            return self._page(match, resolved, anchor, target)
        if not resolved.exists():
            raise PluginError(f"{self.shown}: the link {target!r} names {resolved}: no such file")
        if bang:
            href = os.path.relpath(resolved, self.dest).replace(os.sep, "/")
            return f'<img alt="{text}" src="{href}">'
        return self._anchor(resolved, anchor, text)

    def _page(self, match: re.Match[str], page: Path, anchor: str, target: str) -> str:
        """A link to a page of the site: left to MkDocs, made relative to the page."""
        bang, text, _ = match.groups()
        if self.chinese and anchor and self._english_only(page, anchor, target):
            english = self.site / page.relative_to(DOCS).with_suffix(".html")
            return self._anchor(english, anchor, text)
        if self.base == self.page_dir:
            return match.group(0)
        new = os.path.relpath(page, self.page_dir).replace(os.sep, "/")
        return f"{bang}[{text}]({new}{'#' + anchor if anchor else ''})"

    def _english_only(self, page: Path, anchor: str, target: str) -> bool:
        """Whether ``page#anchor`` is a section that only the English page has."""
        chinese = page.with_name(page.name[: -len(".md")] + ".zh.md")
        if page.name.endswith(".zh.md") or not chinese.exists() or anchor in anchors(chinese):
            return False
        if anchor not in anchors(page):
            raise PluginError(f"{self.shown}: the link {target!r}: no such section")
        return True

    def _anchor(self, target: Path, anchor: str, text: str) -> str:
        href = os.path.relpath(target, self.dest).replace(os.sep, "/")
        text = re.sub(r"`([^`]*)`", r"<code>\1</code>", text)
        return f'<a href="{href}{"#" + anchor if anchor else ""}">{text}</a>'
