"""`mindwatch tensorboard` on a real demo run: a live TensorBoard over HTTP, and its first
screen in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import chromedriver

pytestmark = pytest.mark.slow

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))
URL = re.compile(r"^\s+(http://\S+)$")


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    result = subprocess.run(
        [MINDWATCH, "demo", "--logdir", str(root), "--steps", "60"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert f"mindwatch tensorboard {root}" in result.stdout
    return root


def start_board(*args: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start `mindwatch tensorboard ARGS`; its URL and the lines printed before it."""
    proc = subprocess.Popen(
        [MINDWATCH, "tensorboard", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    timer = threading.Timer(180, proc.kill)  # never hang the suite on a stuck start
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            match = URL.match(line.rstrip("\n"))
            if match:
                return proc, match.group(1), lines
    finally:
        timer.cancel()
    raise AssertionError(f"no URL printed; output: {lines}")


def stop_board(proc: subprocess.Popen[str]) -> str:
    """Ctrl-C, as a user stops it; the rest of its output."""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return out


@pytest.fixture(scope="module")
def board(demo_root: Path) -> Iterator[tuple[str, list[str]]]:
    proc, url, lines = start_board(str(demo_root))
    try:
        yield url, lines
    finally:
        rest = stop_board(proc)
        assert "Stopping TensorBoard." in rest


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_it_serves_the_run_and_the_first_screen_layout(
    board: tuple[str, list[str]], demo_root: Path
) -> None:
    url, lines = board
    (run,) = (p.name for p in demo_root.iterdir())
    assert lines[0] == f"TensorBoard serves {demo_root} (1 run) at:"
    base, fragment = url.split("#")
    assert fragment == "custom_scalars"  # no per-rank folders: no run filter
    assert _get(base + "data/runs") == [run]
    assert _get(base + "data/environment")["version"]
    layout = _get(base + "data/plugin/custom_scalars/layout")
    first = layout["category"][0]
    assert first["title"] == "Is training healthy?"
    assert not first.get("closed")
    titles = [chart["title"] for chart in first["chart"]]
    assert titles == ["train/loss", "eval", "train/lr", "train/grad_norm", "perf/samples_per_s"]
    assert first["chart"][0]["multiline"]["tag"] == ["^train/loss$"]
    drawn = json.dumps(layout)
    assert "epoch" not in drawn
    assert "argmax" not in drawn
    # The charts' data, through the plugin's own route.
    query = urllib.parse.urlencode({"run": run, "tag": "^train/loss$"})
    points = _get(base + f"data/plugin/custom_scalars/scalars?{query}")
    assert [p[1] for p in points["tag_to_events"]["train/loss"]] == list(range(1, 61))


# Every element whose tag starts with a prefix, through shadow roots, with its box.
CARDS = r"""
const prefix = arguments[0];
const found = [];
function deepText(node) {
  let text = '';
  for (const child of node.childNodes) {
    if (child.nodeName === 'STYLE') continue;
    text += child.nodeType === 3 ? child.textContent : deepText(child);
  }
  return node.shadowRoot ? text + deepText(node.shadowRoot) : text;
}
function walk(root) {
  for (const el of root.querySelectorAll('*')) {
    if (el.tagName.toLowerCase().startsWith(prefix)) {
      const box = el.getBoundingClientRect();
      const text = deepText(el).replace(/\s+/g, ' ');
      found.push({title: el.title || '', top: box.top, left: box.left,
                  width: box.width, height: box.height, text: text});
    }
    if (el.shadowRoot) walk(el.shadowRoot);
  }
}
walk(document);
return found;
"""

FIRST_CARD = f"""
const cards = (function() {{ {CARDS} }}).apply(null, arguments)
  .filter(c => c.width > 0 && c.height > 0 && c.top < window.innerHeight);
cards.sort((a, b) => (a.top - b.top) || (a.left - b.left));
return cards;
"""


def visible_cards(page: chromedriver.Browser, prefix: str) -> list[dict[str, Any]]:
    return list(page.run(FIRST_CARD, prefix))


@pytest.mark.skipif(
    not chromedriver.available(),
    reason="needs chromium and chromedriver: apt-get install chromium chromium-driver",
)
def test_chromium_shows_the_training_loss_as_the_first_chart(
    board: tuple[str, list[str]], tmp_path: Path
) -> None:
    url, _ = board
    with chromedriver.browser(tmp_path / "profile") as page:
        page.get(url)
        # Wait until the first chart has drawn its line: the card lists its one match.
        page.wait_for(
            "const c = (function() {"
            + FIRST_CARD
            + "}).call(null, 'tf-custom-scalar-multi-line-chart-card');"
            "return c.length > 0 && c[0].title === 'train/loss'"
            " && c[0].text.includes('Matches (1)');",
        )
        cards = visible_cards(page, "tf-custom-scalar-m")  # multi-line and margin cards
        shot = page.screenshot(tmp_path / "tensorboard.png")
        saved = os.environ.get("MINDWATCH_SCREENSHOT_DIR")
        if saved:  # for looking at it by eye
            Path(saved, "tensorboard-first-screen.png").write_bytes(shot.read_bytes())
        tab = page.run("return location.hash")
    assert tab.startswith("#custom_scalars")
    assert cards[0]["title"] == "train/loss"
    assert [c["title"] for c in cards[:4]] == ["train/loss", "eval", "train/lr", "train/grad_norm"]
    assert _nonblank(shot) > 0.05


def _nonblank(png: Path) -> float:
    from matplotlib.image import imread

    pixels = imread(str(png))[..., :3]
    return float((pixels.mean(axis=2) < 0.95).mean())


def test_a_missing_or_empty_logdir_is_a_clear_error(tmp_path: Path) -> None:
    missing = subprocess.run(
        [MINDWATCH, "tensorboard", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr
    empty = subprocess.run([MINDWATCH, "board", str(tmp_path)], capture_output=True, text=True)
    assert empty.returncode == 2
    assert "no runs below" in empty.stderr
    assert "mindwatch doctor" in empty.stderr
