"""Make the PDF report's page images in docs/img from real runs: ``python docs/gen_pdf_pages.py``.

Trains ``mindwatch demo`` runs in a temporary folder (one run, then seeds 0-5 filed
under long, sweep-like names: the tables must wrap them), writes each folder's PDF
report and renders the pages that hold tables (the cover and the run summaries; found
with pdfplumber by their ruled cells) with poppler's ``pdftoppm`` at 70 dpi:

* ``docs/img/report-pdf-single-<page>.png``: one run;
* ``docs/img/report-pdf-six-runs-<page>.png``: six runs.

Needs the dev install (MindSpore, pdfplumber) and poppler-utils. Look at the images
before committing them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MINDWATCH = Path(sys.executable).with_name("mindwatch")
# what a sweep's runs are called in practice: long, few spaces, separators inside
SIX = [
    "lr-sweep/mlp-64-128-128-10_momentum0.9_lr0.05_warmup30_cosine_seed0",
    "lr-sweep/mlp-64-128-128-10_momentum0.9_lr0.05_warmup30_cosine_seed1",
    "lr-sweep/mlp-64-128-128-10_momentum0.9_lr0.05_warmup30_cosine_seed2",
    "ablation/seed3",
    "ablation/seed4_with_a_much_longer_name_that_has_no_break_in_it_at_all",
    "ablation/seed5",
]


def demo(logdir: Path, seed: int, steps: int) -> Path:
    command = [str(MINDWATCH), "demo", "--logdir", str(logdir), "--seed", str(seed)]
    before = set(logdir.iterdir()) if logdir.exists() else set()
    env = {**os.environ, "GLOG_v": "3"}
    subprocess.run(
        [*command, "--steps", str(steps)], check=True, env=env, stdout=subprocess.DEVNULL
    )
    time.sleep(1.1)  # run folders are named by the second they start
    (made,) = set(logdir.iterdir()) - before
    return made


def pdf(logdir: Path, out: Path, lang: str) -> Path:
    command = [str(MINDWATCH), "report", str(logdir), "--out", str(out), "--format", "pdf"]
    subprocess.run([*command, "--lang", lang], check=True, stdout=subprocess.DEVNULL)
    return out / "report.pdf"


def table_pages(document: Path) -> list[int]:
    """The 1-based numbers of the pages with table cells (rectangles ruled #cccccc)."""
    import pdfplumber

    with pdfplumber.open(document) as opened:
        return [
            number
            for number, page in enumerate(opened.pages, 1)
            if any(r.get("stroke") and r["stroking_color"] in (0.8, (0.8,)) for r in page.rects)
        ]


def render(document: Path, name: str, out: Path, dpi: int) -> None:
    for old in out.glob(f"report-pdf-{name}-*.png"):
        old.unlink()
    for number in table_pages(document):
        stem = out / f"report-pdf-{name}-{number}"
        command = ["pdftoppm", "-png", "-r", str(dpi), "-f", str(number), "-l", str(number)]
        subprocess.run([*command, "-singlefile", str(document), str(stem)], check=True)
        print(f"wrote {stem}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    parser.add_argument("--dpi", type=int, default=70)
    args = parser.parse_args()
    suffix = "" if args.lang == "en" else f"-{args.lang}"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        demo(root / "single", 0, args.steps)
        for seed, name in enumerate(SIX):
            made = demo(root / "raw", seed, args.steps)
            (root / "six" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(made), root / "six" / name)
        for name, runs in (("single", "single"), ("six-runs", "six")):
            render(
                pdf(root / runs, root / f"out-{runs}", args.lang), name + suffix, args.out, args.dpi
            )


if __name__ == "__main__":
    main()
