"""How often ``mindwatch compare``'s default gate fails two healthy runs of one job, and
how close the healthy pairs come to their limits: the false-alarm rate docs/compare.md
states, measured on

* written runs (examples/compare_jitter.py, ``--written N`` seeds, 600 steps, 30 % loss
  noise per step, +-30 % uniform throughput jitter): every ordered pair, one baseline;
* real ``mindwatch demo`` runs, one folder per seed (``--demo DIR``: ``DIR/s<seed>/``,
  as ``mindwatch demo --seed S --logdir DIR/sS`` writes them): each run against ``k``
  baselines of other seeds (``--baselines 1 3 5``), every rotation.

For each check: the comparisons that failed, and the largest share of its allowed band
a healthy pair used (above 1.00 is a failure).

    python benchmarks/compare_false_alarms.py --written 20 --demo /tmp/seeds
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.compare_jitter import written_run

from mindwatch.tools.compare import Tolerances, compare_runs, load_run


def tally(pairs: list[tuple[Any, list[Any]]], label: str) -> None:
    failed: Counter[str] = Counter()
    used: dict[str, float] = defaultdict(float)
    for run, bases in pairs:
        for check in compare_runs(run, bases, Tolerances()):
            if check.status == "skipped" or check.limit is None or check.baseline is None:
                continue
            band = abs(check.limit - check.baseline)
            share = (check.run - check.baseline) / band if band else 0.0
            if check.limit < check.baseline:  # throughput: lower is worse
                share = -share
            used[check.name] = max(used[check.name], share)
            failed[check.name] += check.status == "regression"
    comparisons_failed = sum(
        any(c.status == "regression" for c in compare_runs(r, b, Tolerances())) for r, b in pairs
    )
    print(f"\n{label}: {len(pairs)} comparisons, {comparisons_failed} failed")
    print(f"  {'check':30s} {'failed':>7s} {'most of band used':>18s}")
    for name, share in used.items():
        print(f"  {name:30s} {failed[name]:7d} {share:18.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--written", type=int, default=10, help="seeds of written runs")
    parser.add_argument("--demo", type=Path, help="folder of demo runs, one s<seed>/ each")
    parser.add_argument("--baselines", type=int, nargs="+", default=[1, 3, 5])
    args = parser.parse_args()
    if args.written:
        with tempfile.TemporaryDirectory() as tmp:
            frames = [
                load_run(written_run(Path(tmp) / f"s{s}", s)).frame for s in range(args.written)
            ]
        pairs = [(frames[i], [frames[j]]) for i, j in itertools.permutations(range(len(frames)), 2)]
        tally(pairs, f"written runs, {args.written} seeds, every ordered pair")
    if args.demo:
        folders = sorted(
            (p for p in args.demo.glob("s*") if re.fullmatch(r"s\d+", p.name)),
            key=lambda p: int(p.name[1:]),
        )
        frames = [load_run(f).frame for f in folders]
        count = len(frames)
        for k in args.baselines:
            if k >= count:
                continue
            pairs = [
                (frames[i], [frames[(i + 1 + shift + t) % count] for t in range(k)])
                for i in range(count)
                for shift in range(count - 1 if k < count - 1 else 1)
                if i not in [(i + 1 + shift + t) % count for t in range(k)]
            ]
            tally(pairs, f"demo runs, {count} seeds, each against {k} other seed(s)")


if __name__ == "__main__":
    main()
