"""One rank's buffered steps as one flat vector, so a single all-gather moves them all.

Layout of a rank's slice (float64)::

    [MAGIC, rank, round, n_tags, n_steps, needed, proposal, flags,   header
     tag ids (n_tags),                                  52-bit hashes of the tag names
     steps (n_steps), wall times (n_steps),
     values (n_steps x n_tags, row-major)]              MISSING where a step lacks a tag

Every rank sends a slice of the same, agreed capacity (an all-gather needs equal
shapes); ``needed`` says how much of it this rank filled or would need. The header
makes every slice self-checking: a slice whose magic or rank is wrong did not come from
a mindwatch peer (another rank ran a different collective at that moment), and one
whose round differs from this rank's comes from a peer that skipped or repeated a
reduction. Every rank sees every header, so all of them reach the same verdict, and the
reduction is abandoned rather than trusted.

Tags travel as hashes, not names: the names are known to rank 0, which writes the
global run, from its own steps. A metric that only other ranks log is therefore
written in their own folders (``per_rank``) but not globally.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import numpy.typing as npt

__all__ = ["HEADER", "MISSING", "Slice", "pack", "tag_id", "unpack"]

Floats = npt.NDArray[np.float64]

MAGIC = 19799.125  # "MW", version 1 (an exact float)
HEADER = 8
FLAG_STOP = 1  # this rank asks every rank to stop training (an alert's action)
# A quiet NaN with a payload no arithmetic produces: "no value at this step" stays
# distinguishable from a NaN loss after the trip through the collective.
_MISSING_BITS = np.uint64(0x7FF8_4D57_0000_0001)
MISSING = float(np.array([_MISSING_BITS]).view(np.float64)[0])

_ids: dict[str, float] = {}


def tag_id(tag: str) -> float:
    """A stable 52-bit id for ``tag`` (the same in every process), as an exact float."""
    found = _ids.get(tag)
    if found is None:
        digest = hashlib.blake2b(tag.encode("utf-8"), digest_size=8).digest()
        found = _ids[tag] = float(int.from_bytes(digest, "little") >> 12)
    return found


def is_missing(values: Floats) -> npt.NDArray[np.bool_]:
    """Where ``values`` holds the MISSING marker (not merely NaN)."""
    found: npt.NDArray[np.bool_] = np.asarray(values).view(np.uint64) == _MISSING_BITS
    return found


def needed(n_tags: int, n_steps: int) -> int:
    return HEADER + n_tags + 2 * n_steps + n_steps * n_tags


def pack(
    rank: int,
    *,
    round_no: int,
    tags: list[str],
    steps: list[int],
    walls: list[float],
    rows: list[dict[str, float]],
    capacity: int,
    proposal: int,
    flags: int = 0,
) -> Floats:
    """The slice of ``capacity`` floats this rank contributes (header only if too small)."""
    n_tags, n_steps = len(tags), len(steps)
    size = needed(n_tags, n_steps)
    out = np.zeros(capacity, dtype=np.float64)
    out[:HEADER] = (MAGIC, rank, round_no, n_tags, n_steps, size, proposal, flags)
    if size > capacity:
        return out  # the peers see `needed` and everyone retries with room for it
    pos = HEADER
    out[pos : pos + n_tags] = [tag_id(t) for t in tags]
    pos += n_tags
    out[pos : pos + n_steps] = steps
    pos += n_steps
    out[pos : pos + n_steps] = walls
    pos += n_steps
    block = np.full((n_steps, n_tags), MISSING)
    column = {tag: j for j, tag in enumerate(tags)}
    for i, row in enumerate(rows):
        for tag, value in row.items():
            block[i, column[tag]] = value
    out[pos : pos + n_steps * n_tags] = block.ravel()
    return out


class CorruptSliceError(ValueError):
    """A gathered slice that is not a mindwatch payload from the expected rank."""


@dataclass
class Slice:
    """One rank's decoded contribution."""

    rank: int
    round_no: int
    needed: int
    proposal: int
    flags: int = 0
    ids: Floats = field(default_factory=lambda: np.zeros(0))
    steps: Floats = field(default_factory=lambda: np.zeros(0))
    walls: Floats = field(default_factory=lambda: np.zeros(0))
    values: Floats = field(default_factory=lambda: np.zeros((0, 0)))
    complete: bool = False


def read_header(gathered: Floats, rank: int, round_no: Optional[int] = None) -> Slice:
    """Rank ``rank``'s header, checked (and its round against ``round_no`` if given)."""
    row = gathered[rank]
    magic, who, got_round, n_tags, n_steps, size, proposal, flags = row[:HEADER]
    if magic != MAGIC or who != rank or not 0 <= n_tags < 1e7 or not 0 <= n_steps < 1e9:
        raise CorruptSliceError(
            f"the data gathered from rank {rank} is not mindwatch's (header "
            f"{row[:HEADER].tolist()}): another collective ran at the same time"
        )
    if round_no is not None and got_round != round_no:
        raise CorruptSliceError(
            f"rank {rank} sent reduction {int(got_round)} while this rank sent {round_no}: "
            "the ranks no longer reduce at the same steps"
        )
    return Slice(
        rank=rank,
        round_no=int(got_round),
        needed=int(size),
        proposal=int(proposal),
        flags=int(flags),
    )


def unpack(gathered: Floats, rank: int) -> Slice:
    """Decode rank ``rank``'s slice of the ``(world, capacity)`` gathered array."""
    header = read_header(gathered, rank)
    row = gathered[rank]
    if header.needed > row.shape[0]:
        return header
    n_tags, n_steps = int(row[3]), int(row[4])
    pos = HEADER
    header.ids = row[pos : pos + n_tags]
    pos += n_tags
    header.steps = row[pos : pos + n_steps]
    pos += n_steps
    header.walls = row[pos : pos + n_steps]
    pos += n_steps
    header.values = row[pos : pos + n_steps * n_tags].reshape(n_steps, n_tags)
    header.complete = True
    return header
