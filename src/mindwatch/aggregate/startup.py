"""What the ranks agree on at start, in one all-gather: rank 0's text, every rank's place.

Rank 0's text is the name of a new run folder (the other ranks' clocks, or a taken
name's ``-2`` suffix, could differ); each rank's place (:class:`~mindwatch.run.ranks.
RankPlace`: node, device kind, device id) is a fact of that rank alone, which rank 0
needs for ``run.json`` and for alerts that name another rank ("rank 13 (node-2,
NPU 5)"). Both ride in the same all-gather, once per monitor: the only collective whose
size grows with the world, and it happens before the first step.

Layout of a rank's row (float64, the same length on every rank)::

    [MAGIC, rank, text bytes, node bytes, device bytes, device id (-1: none),
     text (TEXT_BYTES), node (NODE_BYTES), device (DEVICE_BYTES)]

Bytes travel three to a float, as integers below 2^24: exact even through float32
(MindSpore's CPU collectives move some dtypes that way), and a third of the size of a
byte per float. A row whose magic or rank is wrong did not come from a mindwatch peer
(another collective ran at that moment): the whole agreement is refused
(:class:`~mindwatch.aggregate.collective.CorruptSliceError`), on every rank alike.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mindwatch.aggregate.collective import CorruptSliceError
from mindwatch.run.ranks import RankPlace

__all__ = ["TEXT_BYTES", "read_start", "start_vector"]

Floats = npt.NDArray[np.float64]

MAGIC = 19799.5  # not the reduction's MAGIC: a start-up row is never taken for a round
TEXT_BYTES = 4096
NODE_BYTES = 255  # a host name (HOST_NAME_MAX is 64 on Linux; an FQDN up to 253)
DEVICE_BYTES = 30
_HEAD = 6


def _floats(n_bytes: int) -> int:
    return -(-n_bytes // 3)


_TEXT, _NODE, _DEVICE = _floats(TEXT_BYTES), _floats(NODE_BYTES), _floats(DEVICE_BYTES)
SIZE = _HEAD + _TEXT + _NODE + _DEVICE


def _pack(data: bytes, room: int) -> Floats:
    padded = np.zeros(3 * room, dtype=np.int64)
    padded[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    triples = padded.reshape(room, 3)
    out: Floats = (triples[:, 0] << 16 | triples[:, 1] << 8 | triples[:, 2]).astype(np.float64)
    return out


def _unpack(words: Floats, n_bytes: int) -> bytes:
    whole = words.astype(np.int64)
    triples = np.stack([whole >> 16 & 255, whole >> 8 & 255, whole & 255], axis=1)
    return bytes(triples.ravel()[:n_bytes].astype(np.uint8))


def _clip(text: str, limit: int) -> bytes:
    """``text`` as UTF-8, cut to ``limit`` bytes on a character boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore").encode("utf-8")


def start_vector(rank: int, text: str, place: RankPlace) -> Floats:
    """This rank's row; ``text`` matters on rank 0 only (ValueError if too long)."""
    data = text.encode("utf-8")
    if len(data) > TEXT_BYTES:
        raise ValueError(f"text of {len(data)} bytes is longer than {TEXT_BYTES}")
    node, device = _clip(place.node, NODE_BYTES), _clip(place.device or "", DEVICE_BYTES)
    device_id = place.device_id if place.device_id is not None else -1
    head = (MAGIC, rank, len(data), len(node), len(device), device_id)
    return np.concatenate(
        [
            np.array(head, dtype=np.float64),
            _pack(data, _TEXT),
            _pack(node, _NODE),
            _pack(device, _DEVICE),
        ]
    )


def read_start(gathered: Floats, world: int) -> tuple[str, list[RankPlace]]:
    """Rank 0's text and every rank's place from the gathered ``(world, SIZE)`` rows."""
    got = np.asarray(gathered, dtype=np.float64)
    if got.shape != (world, SIZE):
        raise CorruptSliceError(f"the start-up all-gather returned shape {got.shape}")
    places = []
    for rank in range(world):
        magic, who, n_text, n_node, n_device, device_id = got[rank, :_HEAD]
        fits = (
            0 <= n_text <= TEXT_BYTES
            and 0 <= n_node <= NODE_BYTES
            and 0 <= n_device <= DEVICE_BYTES
            and -1 <= device_id < 2**24
        )
        if magic != MAGIC or who != rank or not fits:
            raise CorruptSliceError(
                f"the start-up data from rank {rank} is not mindwatch's (header "
                f"{got[rank, :_HEAD].tolist()}): another collective ran at the same time"
            )
        pos = _HEAD + _TEXT
        node = _unpack(got[rank, pos : pos + _NODE], int(n_node))
        pos += _NODE
        device = _unpack(got[rank, pos : pos + _DEVICE], int(n_device))
        places.append(
            RankPlace(
                rank,
                node.decode("utf-8", "replace"),
                device.decode("utf-8", "replace") or None,
                int(device_id) if device_id >= 0 else None,
            )
        )
    text = _unpack(got[0, _HEAD : _HEAD + _TEXT], int(got[0, 2])).decode("utf-8", "replace")
    return text, places
