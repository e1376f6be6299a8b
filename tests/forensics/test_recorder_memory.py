"""The flight recorder's memory is bounded by its window K, however long the run.

``benchmarks/recorder_memory.py`` feeds it a million steps of what training gives it (a
fresh vector of 200 squared norms, 32 sample ids and the step's values, each step) under
``tracemalloc``; what it holds at 10,000 steps and at 1,000,000 must be the same, and
what it holds must scale with K (a ring of K steps), not with the steps. The test soaks
300,000 steps (a ring of 256 is full after 256: flat from then on or never; the
benchmark's own million-step run is in docs/forensics.md, 94 s under tracemalloc,
too long for every CI run). A recorder that
kept every step would hold about 2.7 GB at a million steps: the soak stops as soon as
the traced memory passes the limit, so such a defect fails in seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import recorder_memory

pytestmark = pytest.mark.slow

MIB = 2**20
CHECKPOINTS = (10_000, 100_000, 300_000)


def test_a_long_soak_holds_what_the_first_ten_thousand_steps_held() -> None:
    window = 256
    samples = recorder_memory.soak_recorder(
        CHECKPOINTS[-1], window=window, checkpoints=CHECKPOINTS, limit=8 * MIB
    )
    assert [s.step for s in samples] == list(CHECKPOINTS)
    first, *rest = samples
    # What a step keeps: 200 float32 norms (800 B of data), 32 ids, a few scalars: a
    # few kilobytes, so K steps are under a MiB.
    assert 100 * window < first.traced < 4096 * window, first
    for later in rest:  # flat: not one kept step more (a step is > 1 KB)
        assert abs(later.traced - first.traced) < 16 * 1024, (first, later)


def test_what_the_recorder_holds_scales_with_its_window_not_the_steps() -> None:
    small, large = (
        recorder_memory.soak_recorder(20_000, window=k, checkpoints=(5_000, 20_000), limit=8 * MIB)
        for k in (128, 512)
    )
    held_small, held_large = small[-1].traced, large[-1].traced
    assert held_large == pytest.approx(4 * held_small, rel=0.1), (small, large)
    assert abs(small[-1].traced - small[0].traced) < 16 * 1024


def test_through_a_monitor_the_memory_stays_flat_too() -> None:
    """The recorder as training feeds it: log_step, the pipeline's thread, the rules and
    the event files running, the norms and sample ids added beside them."""
    samples = recorder_memory.soak_monitor(
        50_000, checkpoints=(10_000, 30_000, 50_000), limit=32 * MIB
    )
    first, *rest = samples
    # The pipeline's own state (queued records, the writers' buffers, the rules'
    # windows) moves by a MiB or so from checkpoint to checkpoint; a recorder keeping
    # every step would add 2.7 KB x 40,000 steps = 100 MiB.
    for later in rest:
        assert later.traced - first.traced < 4 * MIB, samples
