"""Make the README's and the docs site's screenshots: ``python docs/gen_site_screenshots.py``.

* ``docs/img/tensorboard-first-screen.png``: the first screen ``mindwatch tensorboard``
  opens on a fresh 300-step ``mindwatch demo`` run (the README's screenshot);
* ``docs/img/site-home-{en,zh}-{1280,390}.png``: the built site's home page
  (``make docs`` first) in English and Chinese, 1280 px wide and at a phone's 390 px.

Needs the dev install (``make test`` made it), Chromium and chromedriver (the tests'
WebDriver client, ``tests/chromedriver.py``). Look at the images before committing them.
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

MINDWATCH = str(Path(sys.executable).with_name("mindwatch"))


def tensorboard_screen(out: Path, tmp: Path) -> None:
    # The test of that screen starts and stops the board and finds its cards.
    from tests.mindspore.test_tensorboard_command import FIRST_CARD, start_board, stop_board

    runs = tmp / "runs"
    env = {**os.environ, "GLOG_v": "3"}
    command = [MINDWATCH, "demo", "--logdir", str(runs), "--steps", "300"]
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    board, url, _ = start_board(str(runs))
    try:
        with browser(tmp / "profile-board", width=1400, height=1000) as page:
            page.get(url)
            # The first chart has drawn its line once its card lists its one match.
            page.wait_for(
                "const c = (function() {"
                + FIRST_CARD
                + "}).call(null, 'tf-custom-scalar-multi-line-chart-card');"
                "return c.length > 1 && c[0].text.includes('Matches (1)');"
            )
            time.sleep(2)  # the charts' lines are drawn after their cards
            page.screenshot(out / "tensorboard-first-screen.png")
    finally:
        stop_board(board)
    print(f"wrote {out / 'tensorboard-first-screen.png'}")


def cjk_fonts(tmp: Path) -> None:
    """Let Chromium find a Chinese font: the Noto Sans CJK SC subset vendored with
    mindwatch (for the PDF report), through a fontconfig file that adds it to the
    system's fonts. A machine without any CJK font (a CI image) would draw the Chinese
    page as boxes."""
    from mindwatch.tools.report.charts import VENDORED_CJK

    fonts = VENDORED_CJK.parent
    conf = tmp / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
        f"<include ignore_missing='yes'>/etc/fonts/fonts.conf</include><dir>{fonts}</dir>"
        f"<cachedir>{tmp / 'fontcache'}</cachedir></fontconfig>"
    )
    os.environ["FONTCONFIG_FILE"] = str(conf)  # chromedriver and Chromium inherit it


def site_home(out: Path, tmp: Path) -> None:
    site = ROOT / "site"
    if not (site / "index.html").exists():
        raise SystemExit("no site/index.html: run `make docs` first")
    cjk_fonts(tmp)
    for lang, page_path in (("en", site / "index.html"), ("zh", site / "zh" / "index.html")):
        for width, height in ((1280, 900), (390, 844)):
            png = out / f"site-home-{lang}-{width}.png"
            profile = tmp / f"profile-{lang}-{width}"
            with browser(profile, width=width, height=height, phone=width < 500) as page:
                page.get(page_path.as_uri())
                page.wait_for("return document.readyState === 'complete'")
                time.sleep(0.5)
                page.screenshot(png)
            print(f"wrote {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--only", choices=("tensorboard", "site"))
    args = parser.parse_args()
    if not available():
        raise SystemExit("needs chromium and chromedriver (Debian: chromium chromium-driver)")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "tensorboard"):
            tensorboard_screen(args.out, Path(tmp))
        if args.only in (None, "site"):
            site_home(args.out, Path(tmp))


if __name__ == "__main__":
    main()
