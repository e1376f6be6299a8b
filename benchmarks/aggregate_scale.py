"""Cost of one interval's reduction per rank at simulated world sizes (no MindSpore).

The all-reduce is simulated with numpy over ``world`` ranks' vectors; only what one rank
does is timed: its local work for the four rounds, plus rank 0's finish. Bytes are what
one rank sends and receives per interval (float32 on the wire, as MindSpore moves it).

    python benchmarks/aggregate_scale.py [--tags 20] [--steps 100]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mindwatch.aggregate.allreduce import finish, reduce_all
from mindwatch.aggregate.reductions import ReductionTable


def one(world: int, tags: int, steps: int) -> tuple[float, int]:
    names = [f"train/m{j}" for j in range(tags)]
    rows = [(s, {t: float(s + j) for j, t in enumerate(names)}) for s in range(steps)]
    table = ReductionTable()
    sent = [0]

    def all_reduce(vector: np.ndarray, op: str) -> np.ndarray:
        sent[0] += 2 * vector.size * 4  # send + receive, float32
        # The other ranks' vectors are this one's (same shape): a sum over world of them.
        return vector * world if op == "sum" else vector

    start = time.perf_counter()
    reduced, _ = reduce_all(
        all_reduce, rank=0, world=world, round_no=0, capacity=1, proposal=1,
        stop=False, rows=rows, tags=names, table=table,
    )  # fmt: skip
    finish(reduced, [(s, 0.0, list(r.items()), None, None, None) for s, r in rows], names, table)
    return time.perf_counter() - start, sent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tags", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    print("| ranks | rank-0 time / interval (median of 5) | bytes sent+received / rank |")
    print("|---|---|---|")
    for world in (2, 64, 1024, 4096):
        runs = [one(world, args.tags, args.steps) for _ in range(5)]
        secs = sorted(r[0] for r in runs)[2]
        print(f"| {world} | {secs * 1e3:.1f} ms | {runs[0][1] / 1e3:.0f} kB |")


if __name__ == "__main__":
    main()
