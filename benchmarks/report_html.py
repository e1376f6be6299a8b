"""The interactive HTML report's size and load time, before and after the charting bundle
changed: the full plotly.js (4.8 MB, maps and 3-D included, what the ``plotly`` package
ships) against the vendored cartesian partial bundle the report inlines now.

Runs, written with ``Monitor`` (and the demo, when MindSpore is installed):

* 1 k points: 200 steps x 5 tags (loss, lr, grad norm, throughput, step time);
* 1 M points: 100,000 steps x 10 tags (the five and five more);
* the demo: ``mindwatch demo --steps 120`` (what the issue measured: 4.9 MB).

For each, the report's HTML is written once with the current code ("after"); "before" is
the same page with the inlined bundle swapped for the full plotly.js of the installed
``plotly`` package (same version, so the page runs unchanged). Both are opened in
headless Chromium with the network blocked, ``--repeats`` times each, in alternation,
each load in a fresh browser (as a reader opening the file): the time from navigation
to the load event (the charts are drawn by then: ``Plotly.newPlot`` runs in the page's
inline scripts) and whether every chart drew; then once more in the same browser.
Needs the ``plotly`` package (dev or bench extra), Chromium and chromedriver.

With ``--uplot`` (an unpacked ``npm pack uplot``), a third column: the same page with
uPlot (51 KB) drawing the timeline's lines only, a lower bound of what uPlot would
cost (:func:`uplot_page`).

    python benchmarks/report_html.py [--repeats 5] [--no-demo] [--uplot DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import mindwatch
from mindwatch.tools.report import summarize, write_report
from mindwatch.tools.report.plot import plotly_js

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' WebDriver client

from benchmarks.report import write_run  # noqa: E402
from tests.chromedriver import available, browser  # noqa: E402


def demo_run(folder: Path) -> bool:
    if importlib.util.find_spec("mindspore") is None:
        return False
    command = [sys.executable, "-m", "mindwatch", "demo", "--logdir", str(folder)]
    env = {**os.environ, "GLOG_v": "3"}
    subprocess.run([*command, "--steps", "120"], check=True, env=env, stdout=subprocess.DEVNULL)
    return True


def html_pair(run: Path, out: Path) -> tuple[Path, Path, int]:
    """(before, after, scalar points) for one run folder."""
    from plotly.offline import get_plotlyjs

    frame = mindwatch.read_scalars(run)
    write_report(summarize(frame, run), run, out, ("html",))
    after = out / "report.html"
    page = after.read_text(encoding="utf-8")
    bundle = plotly_js()
    if page.count(bundle) != 1:
        raise SystemExit(f"{after}: the vendored bundle is not inlined once")
    full = get_plotlyjs().replace("</script", "<\\/script")
    before = out / "before.html"
    before.write_text(page.replace(bundle, full), encoding="utf-8")
    return before, after, len(frame)


_UPLOT_DRAW = """
(function () {
  var figure = FIGURE;
  var rows = {};
  figure.data.forEach(function (t) {
    if (!t.x || !t.y || t.visible === false || Number(String(t.yaxis).slice(1)) >= 100) return;
    (rows[t.yaxis] = rows[t.yaxis] || []).push(t);
  });
  var key = uPlot.sync("timeline").key, host = document.getElementById("plot-timeline");
  Object.keys(rows).sort().forEach(function (axis) {
    var traces = rows[axis], div = document.createElement("div");
    host.appendChild(div);
    new uPlot({
      width: 1000, height: 200, scales: {x: {time: false}}, cursor: {sync: {key: key}},
      series: [{label: "step"}].concat(traces.map(function (t) {
        return {label: t.name, stroke: (t.line || {}).color || "#4e79a7", width: 1};
      })),
    }, uPlot.join(traces.map(function (t) { return [t.x, t.y]; })), div);
  });
  host.classList.add("js-plotly-plot");
  var done = document.createElement("i"); done.className = "main-svg"; host.appendChild(done);
})();
"""
_PLOT_SCRIPT = re.compile(
    r"<script>\(function \(\) \{\n  var figure = (\{.*?\});\n"
    r'  Plotly\.newPlot\("plot-([\w-]+)".*?</script>',
    re.DOTALL,
)


def uplot_page(after: Path, uplot: Path) -> Path:
    """A lower bound for uPlot: the same page with uPlot instead of plotly.js, drawing
    only the timeline's lines (cursor synced across the rows, drag to zoom, legend
    toggles and values: uPlot's defaults), without the x-axis menu, the alert axis,
    the hover texts, the gradient norm's and the layers' charts."""
    page = after.read_text(encoding="utf-8")
    script = (uplot / "dist" / "uPlot.iife.min.js").read_text(encoding="utf-8")
    style = (uplot / "dist" / "uPlot.min.css").read_text(encoding="utf-8")
    page = page.replace(plotly_js(), script.replace("</script", "<\\/script"))
    page = page.replace("</head>", f"<style>{style}</style></head>", 1)

    def draw(match: re.Match[str]) -> str:
        if match.group(2) != "timeline":
            return ""
        return "<script>" + _UPLOT_DRAW.replace("FIGURE", match.group(1)) + "</script>"

    page = _PLOT_SCRIPT.sub(draw, page)
    out = after.with_name("uplot.html")
    out.write_text(page, encoding="utf-8")
    return out


_DRAWN = """
const plots = [...document.querySelectorAll('.js-plotly-plot')];
return [plots.length, plots.filter(p => p.querySelector('.main-svg')).length];
"""


def _load(tab: Any, page: Path) -> float:
    tab.get(page.as_uri())
    timing = tab.run("return performance.getEntriesByType('navigation')[0].toJSON()")
    plots, drawn = tab.run(_DRAWN)
    if not plots or drawn != plots:
        raise SystemExit(f"{page}: {drawn} of {plots} charts drawn")
    errors = [e for e in tab.console() if e.get("level") == "SEVERE"]
    if errors:
        raise SystemExit(f"{page}: console errors: {errors}")
    return float(timing["loadEventEnd"])


def load_ms(pages: list[Path], profile: Path, repeats: int) -> list[tuple[float, float]]:
    """Per page, median milliseconds from navigation to the load event, offline: the
    first load in a browser of its own (a fresh profile: nothing compiled or cached, as
    a reader opening the file) and a second load in the same browser. The pages go in
    alternation, so that a busy moment of the shared machine hits both."""
    first: list[list[float]] = [[] for _ in pages]
    again: list[list[float]] = [[] for _ in pages]
    for repeat in range(repeats):
        for i, page in enumerate(pages):
            with browser(profile / f"{repeat}-{i}", offline=True) as tab:
                first[i].append(_load(tab, page))
                tab.get("about:blank")
                again[i].append(_load(tab, page))
    return [(statistics.median(a), statistics.median(b)) for a, b in zip(first, again)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-demo", action="store_true", help="skip the MindSpore demo run")
    parser.add_argument(
        "--uplot",
        type=Path,
        help="an unpacked npm uplot package (npm pack uplot): add uPlot's lower bound",
    )
    args = parser.parse_args()
    if not available():
        raise SystemExit("needs Chromium and chromedriver (apt-get install chromium-driver)")
    from plotly.offline import get_plotlyjs

    full, vendored = len(get_plotlyjs().encode()), len(plotly_js().encode())
    print(f"bundle: full plotly.js {full / 1e6:.2f} MB -> cartesian bundle {vendored / 1e6:.2f} MB")
    columns = ["before", "after"] + (["uPlot, lines only"] if args.uplot else [])
    with tempfile.TemporaryDirectory() as root:
        runs: list[tuple[str, Path]] = []
        if not args.no_demo and demo_run(Path(root, "demo")):
            runs.append(("demo, 120 steps", next(Path(root, "demo").iterdir())))
        write_run(Path(root, "1k"), 200, 0)
        runs.append(("1 k points", Path(root, "1k")))
        write_run(Path(root, "1m"), 100_000, 5)
        runs.append(("1 M points", Path(root, "1m")))
        print(f"{'':27}" + "".join(f"{name:^30}" for name in columns))
        print(
            f"{'run':<16}{'points':>11}"
            + f"{'size':>10}{'1st load':>10}{'reload':>10}" * len(columns)
        )
        for label, run in runs:
            folder = label.split(",")[0]
            before, after, points = html_pair(run, Path(root, "out", folder))
            pages = [before, after] + ([uplot_page(after, args.uplot)] if args.uplot else [])
            loads = load_ms(pages, Path(root, "profile", folder), args.repeats)
            cells = "".join(
                f"{page.stat().st_size / 1e6:7.2f} MB{cold:7.0f} ms{warm:7.0f} ms"
                for page, (cold, warm) in zip(pages, loads)
            )
            print(f"{label:<16}{points:>11,}{cells}")
        print(
            f"load: navigation to load event in headless Chromium, median of {args.repeats};"
            " 1st load in a fresh browser, then a reload in it"
        )


if __name__ == "__main__":
    main()
