"""RUN_FOLDER (mindwatch.run.layout) is what a job really writes into its run folder:
every path a job with everything on writes matches exactly one entry, and every entry
is written (docs/usage.md's "What lands on disk" is generated from the registry)."""

from __future__ import annotations

from pathlib import Path

from mindwatch.monitor import Monitor
from mindwatch.run.layout import RUN_FOLDER
from tests.aggregate.test_multirank import run_ranks


def _written(root: Path) -> list[str]:
    """Every path below ``root``, relative, a folder's with a trailing ``/``."""
    return sorted(
        p.relative_to(root).as_posix() + ("/" if p.is_dir() else "") for p in root.rglob("*")
    )


def test_a_job_writes_exactly_the_registered_files(tmp_path: Path) -> None:
    """3 simulated ranks, reduced, per_rank, and a spike on rank 1 whose batch has
    sample ids: the global run, each rank's folder, the alert, its forensics and the
    skip list."""

    def body(mon: Monitor, rank: int) -> None:
        with mon:
            for step in range(1, 61):
                loss = 1.0 + 0.01 * ((step * 7 + rank) % 5)
                if rank == 1 and step == 45:
                    loss = 500.0
                mon.log_sample_ids(step, [1000 * rank + 10 * step + k for k in range(3)])
                mon.log_step(step, loss=loss, grad_norm=loss, samples=3)

    run = tmp_path / "run"
    run_ranks(3, run, body, config={"aggregate_every": 10, "per_rank": True})
    written = _written(run)
    unregistered = [p for p in written if sum(e.matches(p) for e in RUN_FOLDER) != 1]
    assert not unregistered, (
        f"written but not in mindwatch.run.layout.RUN_FOLDER (or in it twice): {unregistered}"
    )
    unwritten = [e.path for e in RUN_FOLDER if not any(e.matches(p) for p in written)]
    assert not unwritten, f"in RUN_FOLDER but not written by the job: {unwritten}"
    assert "rank_0/rank.json" not in written  # rank 0's node and device are in run.json
    assert {"rank_1/rank.json", "rank_2/rank.json", "forensics/step-45-spike.json"} <= set(written)
