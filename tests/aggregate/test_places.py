"""Every rank's node and device, learnt once at start in the run folder's all-gather.

Simulated ranks (threads sharing ``mindwatch.testing.LocalGroup``); the msrun test in
``tests/mindspore/test_multicard.py`` checks the same with real workers.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mindwatch import Monitor
from mindwatch.aggregate import startup
from mindwatch.aggregate.aggregator import Aggregator
from mindwatch.aggregate.collective import CorruptSliceError
from mindwatch.aggregate.reductions import ReductionTable
from mindwatch.aggregate.startup import SIZE, read_start, start_vector
from mindwatch.common.i18n import set_language
from mindwatch.run.ranks import RankPlace
from mindwatch.testing import LocalGroup
from tests.aggregate.test_multirank import QUIET

HOST = socket.gethostname()

PLACES = [
    RankPlace(0, "node-0", "Ascend", 0),
    RankPlace(1, "node-0", "Ascend", 7),
    RankPlace(2, "节点-2.cluster.example", None, None),  # non-ASCII; nothing said of a device
    RankPlace(3, "n" * 300, "CPU", 3),  # longer than a host name can be: cut to 255 bytes
]


def test_every_rank_learns_rank_0s_text_and_every_place_in_one_all_gather() -> None:
    world = len(PLACES)
    group = LocalGroup(world, timeout=30)
    got: dict[int, Any] = {}

    def rank_main(rank: int) -> None:
        aggregator = Aggregator(group.member(rank), ReductionTable(), every=5, timeout=30)
        text = "/runs/20261202_exp-2" if rank == 0 else f"not rank 0's {rank}"
        got[rank] = aggregator.agree_on_start(text, PLACES[rank])
        aggregator.close(communicate=False)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert group.calls == 1  # one collective: the folder and the places together
    expected = [*PLACES[:3], RankPlace(3, "n" * 255, "CPU", 3)]
    for rank in range(world):
        text, places = got[rank]
        assert text == "/runs/20261202_exp-2"
        assert places == expected


def test_the_start_up_row_is_a_third_of_a_byte_per_float_and_exact_in_float32() -> None:
    row = start_vector(0, "é" * 2048, PLACES[2])  # 4096 bytes: the longest text
    assert row.shape == (SIZE,)
    assert SIZE < 1500  # the text alone took 4099 floats at a byte per float
    through_float32 = row.astype(np.float32).astype(np.float64)
    text, (place,) = read_start(through_float32[None, :], 1)
    assert (text, place) == ("é" * 2048, RankPlace(0, "节点-2.cluster.example", None, None))
    with pytest.raises(ValueError, match="longer than 4096"):
        start_vector(0, "x" * 4097, PLACES[0])


def test_rows_from_another_collective_are_refused() -> None:
    good = start_vector(0, "run", PLACES[0])
    other = np.full_like(good, 7.0)
    with pytest.raises(CorruptSliceError, match="from rank 1 is not mindwatch's"):
        read_start(np.stack([good, other]), 2)
    with pytest.raises(CorruptSliceError, match="shape"):
        read_start(good[None, :-1], 1)


def test_run_json_lists_every_rank_and_alerts_name_the_ranks_node_and_device(
    tmp_path: Path,
) -> None:
    set_language("en")

    group = LocalGroup(2)
    monitors: dict[int, Monitor] = {}

    def rank_main(rank: int) -> None:
        config = {**QUIET, "aggregate_every": 5}
        device = {"device": "Ascend", "device_id": 4 + rank}
        with Monitor(tmp_path, config, collective=group.member(rank), **device) as mon:
            monitors[rank] = mon
            for step in range(1, 31):
                mon.log_step(step, loss=math.nan if (rank == 1 and step == 12) else 1.0)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["ranks"] == [
        {"rank": 0, "node": HOST, "device": "Ascend", "device_id": 4},
        {"rank": 1, "node": HOST, "device": "Ascend", "device_id": 5},
    ]
    (alert,) = monitors[0].alerts
    assert alert.line() == (
        f"[critical] nonfinite at step 12, rank 1 ({HOST}, NPU 5): train/loss is NaN"
    )
    (line,) = (tmp_path / "alerts.jsonl").read_text().splitlines()
    written = json.loads(line)
    assert (written["rank"], written["node"], written["device"], written["device_id"]) == (
        1,
        HOST,
        "Ascend",
        5,
    )


class _NoGather:
    """A collective whose start-up all-gather fails (a backend error, a dead peer)."""

    rank, world_size = 0, 2

    def all_gather(self, vector: np.ndarray) -> np.ndarray:
        raise RuntimeError("the gather failed")

    def all_reduce(self, vector: np.ndarray, op: str) -> np.ndarray:
        raise AssertionError("no reduction after a failed start")


def test_a_failed_gather_costs_a_warning_and_leaves_only_this_ranks_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_language("en")
    monkeypatch.delenv("DEVICE_ID", raising=False)
    caplog.set_level(logging.WARNING, logger="mindwatch")
    with Monitor(tmp_path, {**QUIET, "aggregate_every": 5}, collective=_NoGather()) as mon:
        for step in range(1, 8):
            mon.log_step(step, loss=math.inf if step == 6 else 1.0)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["ranks"] == [{"rank": 0, "node": HOST}]  # DEVICE_ID unset, device not given
    (alert,) = mon.alerts
    assert alert.where() == f"step 6, rank 0 ({HOST})"  # its own values, its own place
    warnings = [r.getMessage() for r in caplog.records if "could not agree" in r.getMessage()]
    assert len(warnings) == 1
    assert "alerts name no other rank's node or device" in warnings[0]


def test_a_single_process_lists_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVICE_ID", "3")
    with Monitor(tmp_path, QUIET, device="CPU") as mon:
        mon.log_step(1, loss=1.0)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["ranks"] == [{"rank": 0, "node": HOST, "device": "CPU", "device_id": 3}]


def test_ranks_without_a_collective_each_know_only_themselves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEVICE_ID", raising=False)
    for rank in (0, 1):
        with Monitor(tmp_path, {**QUIET, "run_name": "exp"}, rank=rank, world_size=2) as mon:
            mon.log_step(1, loss=1.0)
    folders = sorted(p for p in tmp_path.iterdir())  # <date>_exp, <date>_exp_rank1
    for folder, rank in zip(folders, (0, 1)):
        info = json.loads((folder / "run.json").read_text())
        assert info["ranks"] == [{"rank": rank, "node": HOST}]


def test_device_ids_up_to_24_bits_are_read_and_larger_ones_refused() -> None:
    """A device id travels as one float, exact below 2^24 (through float32 too); one at
    or above that cannot be a real device's and marks data that is not mindwatch's."""
    ids = [None, 0, 7, 2**24 - 1]
    rows = np.stack(
        [start_vector(r, "run", RankPlace(r, "n", "NPU", d)) for r, d in enumerate(ids)]
    )
    _, places = read_start(rows.astype(np.float32).astype(np.float64), len(ids))
    assert [p.device_id for p in places] == ids
    for too_big in (2**24, 2**24 + 1, 2**25 - 1):
        rows[2, 5] = too_big
        with pytest.raises(CorruptSliceError, match="from rank 2 is not mindwatch's"):
            read_start(rows, len(ids))


def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    """Every string of a start-up row (rank 0's text, each rank's node and device) is
    sent as valid UTF-8; bytes that arrive otherwise, under a valid header, still read
    as text (U+FFFD for each bad byte) rather than end the agreement with an error."""
    bad = b"ok\xff\xfe!"
    row = start_vector(0, "run", RankPlace(0, "node", "NPU", 1))
    row[2:5] = len(bad)  # the lengths of text, node and device
    pos = startup._HEAD
    for room in (startup._TEXT, startup._NODE, startup._DEVICE):
        row[pos : pos + room] = startup._pack(bad, room)
        pos += room
    text, (place,) = read_start(row[None, :], 1)
    assert text == "ok\ufffd\ufffd!"
    assert place == RankPlace(0, "ok\ufffd\ufffd!", "ok\ufffd\ufffd!", 1)
