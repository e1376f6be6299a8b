"""Which folder a rank r > 0 writes without a collective (``claim_run_dir``): rank 0 of
its own job opens its event file a moment before it writes ``run.json``; a rank that
looks in between must not take those files for an earlier run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mindwatch.run.claim import claim_run_dir

EVENTS = "events.out.tfevents.1764990000.vm.1234.0"


def _folder(tmp_path: Path, age_s: float) -> Path:
    folder = tmp_path / "plain"
    folder.mkdir()
    event = folder / EVENTS
    event.write_bytes(b"")
    if age_s:
        then = time.time() - age_s
        os.utime(event, (then, then))
    return folder


@pytest.mark.parametrize("rank", [1, 3, 7])
def test_event_files_written_since_this_process_began_are_rank_0s(
    tmp_path: Path, rank: int
) -> None:
    folder = _folder(tmp_path, age_s=0)
    claim = claim_run_dir(folder, resume=False, rank=rank, world_size=8)
    assert (claim.folder, claim.own_run_folder) == (folder, False)


@pytest.mark.parametrize("rank", [1, 3, 7])
def test_older_event_files_are_an_earlier_run(tmp_path: Path, rank: int) -> None:
    folder = _folder(tmp_path, age_s=3600)  # before this process started
    claim = claim_run_dir(folder, resume=False, rank=rank, world_size=8)
    assert (claim.folder, claim.own_run_folder) == (tmp_path / f"plain-rank{rank}", True)


def test_one_older_file_among_fresh_ones_is_an_earlier_run(tmp_path: Path) -> None:
    folder = _folder(tmp_path, age_s=3600)
    (folder / EVENTS.replace(".0", ".1")).write_bytes(b"")  # fresh
    claim = claim_run_dir(folder, resume=False, rank=1, world_size=2)
    assert claim.folder == tmp_path / "plain-rank1"


def test_rank_0_never_joins_event_files_it_did_not_write(tmp_path: Path) -> None:
    folder = _folder(tmp_path, age_s=0)
    claim = claim_run_dir(folder, resume=False, rank=0, world_size=2)
    assert claim.folder == tmp_path / "plain-2"
