"""A run of a job with noisy steps, written with :class:`mindwatch.Monitor`, for trying
``mindwatch compare`` (docs/compare.md) and for its tests:

    python examples/compare_jitter.py RUN_DIR [--seed S] [--speed F] [--jitter J]
        [--final-scale F]

600 steps of a falling loss with 30 % relative noise per step and a throughput of 5,000
samples/s with uniform per-step jitter (+-30 % by default). ``--speed 0.6`` makes the
run 40 % slower, ``--final-scale 1.25`` its last 20 % of loss 25 % worse.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import mindwatch

STEPS = 600


def written_run(
    folder: Path,
    seed: int,
    *,
    jitter: float = 0.3,
    speed: float = 1.0,
    loss_scale: float = 1.0,
    final_scale: float = 1.0,
    nan_from: int = STEPS + 1,
) -> Path:
    """One run of the job: ``speed`` scales its throughput, ``loss_scale`` its whole loss
    curve and ``final_scale`` its last 20 %; from step ``nan_from`` the loss is NaN."""
    rng = np.random.default_rng(seed)
    with mindwatch.Monitor(folder, {"print_every": 0}) as mon:
        for step in range(1, STEPS + 1):
            level = loss_scale * (0.5 + 2.0 / (1 + step / 30))
            if step > STEPS * 0.8:
                level *= final_scale
            if step >= nan_from:
                level = float("nan")
            rate = 5000.0 * speed * (1 + jitter * rng.uniform(-1, 1))
            mon.log_scalars(
                step,
                {
                    "train/loss": level * (1 + 0.3 * rng.standard_normal()),
                    "perf/samples_per_s": rate,
                    "perf/step_time_ms": 32 * 1000.0 / rate,
                },
            )
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--jitter", type=float, default=0.3)
    parser.add_argument("--final-scale", type=float, default=1.0)
    args = parser.parse_args()
    written_run(
        args.run_dir,
        args.seed,
        jitter=args.jitter,
        speed=args.speed,
        final_scale=args.final_scale,
    )


if __name__ == "__main__":
    main()
