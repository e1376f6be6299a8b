"""Make the report screenshots in docs/img from real runs: ``python docs/gen_screenshots.py``.

Trains ``mindwatch demo`` runs (one, then seeds 0-5) in a temporary folder, writes
their interactive reports, opens each in headless Chromium with the network blocked
(the tests' WebDriver client, ``tests/chromedriver.py``), hovers an alert marker (or
the smoothed loss when the run raised none) and saves the page down to the end of the
linked charts:

* ``docs/img/report-single.png``: one run;
* ``docs/img/report-six-runs.png``: six runs overlaid.

Needs the dev install (``make test`` made it), Chromium and chromedriver. Look at the
images before committing them: they are what a reader of the README sees first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.chromedriver

from tests.chromedriver import available, browser  # noqa: E402

# Viewport pixels of the point to hover: the first alert marker, else the smoothed loss.
_TARGET = """
const gd = document.getElementById('plot-timeline');
const alerts = t => Number(t.yaxis.slice(1)) >= 100;  // markers on their own axis
let i = gd.data.findIndex(t => alerts(t) && t.x.length);
if (i < 0) i = gd.data.findIndex(t => t.customdata && t.visible !== false);  // smoothed
const t = gd.data[i], l = gd._fullLayout;
const xa = l[t.xaxis.replace('x', 'xaxis')], ya = l[t.yaxis.replace('y', 'yaxis')];
const k = alerts(t) ? 0 : Math.floor(t.x.length * 0.6);
const box = gd.getBoundingClientRect();
return [box.left + xa._offset + xa.l2p(t.x[k]), box.top + ya._offset + ya.l2p(t.y[k])];
"""


def demo(logdir: Path, seed: int, steps: int) -> None:
    mindwatch = Path(sys.executable).with_name("mindwatch")
    command = [str(mindwatch), "demo", "--logdir", str(logdir), "--seed", str(seed)]
    command += ["--steps", str(steps)]
    env = {**os.environ, "GLOG_v": "3"}
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    time.sleep(1.1)  # run folders are named by the second they start


def report(runs: Path, out: Path, lang: str) -> Path:
    mindwatch = Path(sys.executable).with_name("mindwatch")
    command = [str(mindwatch), "report", str(runs), "--out", str(out), "--format", "html"]
    subprocess.run([*command, "--lang", lang], check=True, stdout=subprocess.DEVNULL)
    return out / "report.html"


def shoot(html: Path, png: Path, profile: Path) -> None:
    """The page from the top to the end of the linked charts, one point hovered."""
    with browser(profile / "measure", width=1200, height=1000, offline=True) as page:
        page.get(html.as_uri())
        page.wait_for("return document.querySelectorAll('#plot-timeline .main-svg').length")
        bottom = page.run(
            "const f = document.getElementById('plot-timeline').closest('figure');"
            "return Math.ceil(f.getBoundingClientRect().bottom + window.scrollY + 10);"
        )
    with browser(profile / "shoot", width=1200, height=bottom + 300, offline=True) as page:
        page.get(html.as_uri())
        page.wait_for("return document.querySelectorAll('#plot-timeline .main-svg').length")
        x, y = page.run(_TARGET)
        page.pointer(("move", int(x), int(y)))
        page.wait_for("return document.querySelector('#plot-timeline .hoverlayer .hovertext')")
        time.sleep(0.5)  # the hover label's fade-in
        errors = [e for e in page.console() if e.get("level") in ("SEVERE", "WARNING")]
        if errors:
            raise SystemExit(f"{html}: console errors: {errors}")
        page.screenshot(png)
    from PIL import Image

    with Image.open(png) as image:
        image.crop((0, 0, image.size[0], bottom)).save(png)
    print(f"wrote {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    args = parser.parse_args()
    if not available():
        raise SystemExit("needs chromium and chromedriver (Debian: chromium chromium-driver)")
    suffix = "" if args.lang == "en" else f"-{args.lang}"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        demo(root / "single", 0, args.steps)
        for seed in range(6):
            demo(root / "six", seed, args.steps)
        for name, runs in (("single", "single"), ("six-runs", "six")):
            html = report(root / runs, root / f"out-{runs}", args.lang)
            shoot(html, args.out / f"report-{name}{suffix}.png", root / f"profile-{runs}")


if __name__ == "__main__":
    main()
