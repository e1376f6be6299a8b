"""Report cost: ``mindwatch report`` on a run with 1,000,000 scalar points vs reading it.

The run: 100,000 steps x 10 tags (loss, lr, grad norm, throughput, step time and five
more). Both timings in one process, side by side: reading the points
(``read_scalars``) and the whole report in all four formats (which reads them too).
Charts draw at most 2,000 points per line (min-max per bucket); statistics use all.
Then the interactive HTML's size, and its load time in headless Chromium (network
blocked; load event, by then every chart is drawn), if Chromium and chromedriver are
installed; the script-free ``--static`` HTML's size and time for comparison.

    python benchmarks/report.py [--steps 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mindwatch
from mindwatch.tools.report import summarize, write_report


def write_run(folder: Path, steps: int, extra: int = 5) -> None:
    rng = np.random.default_rng(0)
    noise = rng.random(steps)
    with mindwatch.Monitor(folder, {"print_every": 0, "max_queue": 10**7}) as mon:
        for step in range(1, steps + 1):
            n = float(noise[step - 1])
            mon.log_scalars(
                step,
                {
                    "train/loss": 2.0 / (1 + step / 1000) + 0.05 * n,
                    "train/lr": 1e-3,
                    "train/grad_norm": 1.0 + n,
                    "perf/samples_per_s": 1000.0 + 10 * n,
                    "perf/step_time_ms": 30.0 + n,
                    **{f"train/extra{i}": n + i for i in range(extra)},
                },
            )


def load_ms(html: Path, profile: Path) -> float:
    """Milliseconds from navigation to the load event in headless Chromium, offline."""
    from tests.chromedriver import browser

    with browser(profile, offline=True) as page:
        page.get(html.as_uri())
        timing = page.run("return performance.getEntriesByType('navigation')[0].toJSON()")
        errors = [e for e in page.console() if e.get("level") == "SEVERE"]
        if errors:
            raise SystemExit(f"console errors: {errors}")
    return float(timing["loadEventEnd"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        run = Path(root, "run")
        write_run(run, args.steps)
        read_times, report_times = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            frame = mindwatch.read_scalars(run)
            read_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            frame = mindwatch.read_scalars(run)
            runs = summarize(frame, run)
            write_report(runs, run, Path(root, "out"), ("html", "pdf", "json", "md"))
            report_times.append(time.perf_counter() - start)
        read_s, report_s = statistics.median(read_times), statistics.median(report_times)
        print(f"{len(frame):,} scalar points, median of {args.repeats}")
        ratio = report_s / read_s
        print(f"  read_scalars                          {read_s:6.2f} s")
        print(f"  report (read + html, pdf, json, md)   {report_s:6.2f} s = {ratio:.2f}x the read")
        html = Path(root, "out", "report.html")
        start = time.perf_counter()
        write_report(runs, run, Path(root, "static"), ("html",), static=True)
        static_s = time.perf_counter() - start
        static = Path(root, "static", "report.html")
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' driver
        from tests.chromedriver import available

        print(f"  html, interactive: {html.stat().st_size / 1e6:.2f} MB", end="")
        if available():
            print(f", loads in {load_ms(html, Path(root, 'p1')):.0f} ms (headless Chromium)")
        else:
            print(" (no Chromium: load time not measured)")
        print(
            f"  html, --static:    {static.stat().st_size / 1e6:.2f} MB, written in "
            f"{static_s:.2f} s (from the read points)"
        )


if __name__ == "__main__":
    main()
