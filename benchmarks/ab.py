"""Paired A/B of a benchmark script: this checkout's code against another commit's.

Runs ``SCRIPT ARGS...`` alternately with the package of each side on ``PYTHONPATH``
(``A`` = this checkout's ``src``, ``B`` = ``--base``'s, extracted with ``git archive``
into a temporary folder), ``--rounds`` times each, A B A B ..., so both share the
machine's drift. Every line of the script's output that has a label and numbers (a
table row) is paired by its label between the two sides; per column it prints A's and
B's medians and the median of the per-round ratios A/B (below 1: A is faster where
the figure is a time). The script's own output of the last round is printed first.

    python benchmarks/ab.py --base da9c1dd --rounds 3 benchmarks/write.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
_COLUMNS = re.compile(r"\s{2,}(?=[-(\d])")  # where a table row's label ends


def extract(rev: str, into: Path) -> Path:
    """``rev``'s ``src`` folder under ``into`` (no worktree, nothing left behind)."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.12, and 3.9.17+ backports
            tar.extractall(into, filter="data")
        else:  # our own repository's archive: nothing to guard against
            tar.extractall(into)
    return into / "src"


def rows(output: str) -> dict[str, list[float]]:
    """Table rows: label (the text before the first run of two or more spaces that
    leads to a number, or a markdown row's first cell) -> every number after it
    (``1.24%`` and ``(0.99-1.13)`` count as numbers: 1.24, 0.99, 1.13). A label seen
    again gets `` [2]``."""
    table: dict[str, list[float]] = {}
    for line in output.splitlines():
        if line.startswith("|"):  # a markdown table: its first cell is the label
            label, _, rest = line.strip("|").partition("|")
        else:
            split = _COLUMNS.search(line)
            if split is None:
                continue
            label, rest = line[: split.start()], line[split.end() :]
        label = " ".join(label.split())
        if not label:
            continue
        numbers = [float(m.group().replace(",", "")) for m in _NUMBER.finditer(rest)]
        if not numbers:
            continue
        numbered, k = label, 1
        while numbered in table:
            k += 1
            numbered = f"{label} [{k}]"
        table[numbered] = numbers
    return table


def run(script: list[str], src: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.setdefault("GLOG_v", "3")  # MindSpore's warnings off, as in the tests
    done = subprocess.run(
        [sys.executable, *script], env=env, capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(script)} failed ({src}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare with (B)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--save", type=Path, help="also write each run's output here")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="benchmark script and args")
    args = parser.parse_args()
    if not args.script:
        parser.error("give the benchmark script to run, e.g. benchmarks/write.py")
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"A": ROOT / "src", "B": extract(args.base, Path(tmp))}
        outputs: dict[str, list[dict[str, list[float]]]] = {"A": [], "B": []}
        last = ""
        for _ in range(args.rounds):
            for side, src in sides.items():
                text = run(args.script, src)
                outputs[side].append(rows(text))
                if args.save is not None:
                    args.save.mkdir(parents=True, exist_ok=True)
                    (args.save / f"{side}{len(outputs[side])}.txt").write_text(text)
                if side == "A":
                    last = text
    print(last)
    print(f"A = this checkout, B = {args.base}; {args.rounds} rounds, A B A B ...")
    print(f"{'row':60} {'col':>3} {'A median':>12} {'B median':>12} {'A/B':>7}")
    print("(col: the row's numeric columns from 0, in the script's own order)")
    for label, first in outputs["A"][0].items():
        pairs = [(a.get(label), b.get(label)) for a, b in zip(outputs["A"], outputs["B"])]
        if any(b is None or a is None or len(a) != len(b) for a, b in pairs):
            continue
        for col in range(len(first)):
            a_values = [a[col] for a, _ in pairs]  # type: ignore[index]
            b_values = [b[col] for _, b in pairs]  # type: ignore[index]
            if not any(b_values) or all(a == b for a, b in zip(a_values, b_values)):
                continue  # a count or a constant (steps, tags): nothing to compare
            ratios = [a / b for a, b in zip(a_values, b_values) if b]
            print(
                f"{label[:60]:60} {col:3d} {statistics.median(a_values):12.4g} "
                f"{statistics.median(b_values):12.4g} {statistics.median(ratios):7.3f}"
            )


if __name__ == "__main__":
    main()
