"""``rank_<r>/rank.json``: which node and device a rank ran on, where no run.json says it.

Under reduction only rank 0 writes ``run.json``; a rank r > 0 writes its own values
into ``<run>/rank_<r>/`` (``per_rank``) and nothing else, so the tools that name a rank
("rank 1 (node-a, device 1)": the report's Ranks table, ``doctor``, ``watch``) would
not know where it ran. Each such rank writes this small file next to its event files
when its hardware facts are known (start-up, a change of device): ``rank``, ``host``,
``pid`` and the ``hardware`` section run.json would hold. Written atomically (a
temporary file, then a rename); a failure is one warning, never an error.

Reading it (:func:`rank_identity`) tries, in order: the folder's ``rank.json``, its
``run.json`` (a rank that writes a run of its own: no reduction), and, for rank 0, the
run's own ``run.json``; the host of the newest event file's name
(``events.out.tfevents.<time>.<host>.<pid>.<n>``) is the last resort for the node, for
a run mindwatch wrote live (one with a ``run.json``; ``mindwatch convert``'s files name
the machine that converted them).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from mindwatch.common.side_files import NotASideFileError, parse_json, read_side_file
from mindwatch.common.warn import WarnOnce
from mindwatch.run.layout import EVENT_FILE_PREFIX, RANK_FILE
from mindwatch.run.ranks import place_label
from mindwatch.run.record import read_run_file

__all__ = ["RANK_FILE", "RankIdentity", "rank_identity", "write_rank_file"]

log = logging.getLogger(__name__)

_MAX_BYTES = 1 << 20
_tmp = itertools.count()
_warn = WarnOnce(log)


def write_rank_file(folder: Path, *, rank: int, hardware: Mapping[str, Any]) -> None:
    """Write ``folder/rank.json`` (see the module); a failure is one warning."""
    data = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid()}
    data["hardware"] = dict(hardware)
    path = folder / RANK_FILE
    tmp = folder / f".{RANK_FILE}.{os.getpid()}.{next(_tmp)}.tmp"
    try:
        tmp.write_text(json.dumps(data, default=str) + "\n", "utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        _warn(
            "rank file", "mindwatch: cannot write %s (%s); tools will not name its node", path, exc
        )


@dataclass(frozen=True)
class RankIdentity:
    """Where a rank ran: its node (host name), logical device id and device kind
    (MindSpore's ``device_target``), when known."""

    node: Optional[str] = None
    device: Optional[int] = None
    kind: Optional[str] = None

    def label(self) -> str:
        """``node-a, NPU 1``, ``node-a, CPU`` (as alerts say it, :func:`place_label`;
        what is known of it; empty when nothing is)."""
        return place_label(self.node, self.kind, self.device) or ""


def _from_hardware(section: Any) -> RankIdentity:
    if not isinstance(section, Mapping):
        return RankIdentity()
    node, device = section.get("node"), section.get("device_id")
    sources = section.get("sources")
    kind = sources.get("device") if isinstance(sources, Mapping) else None
    return RankIdentity(
        node if isinstance(node, str) and node else None,
        device if isinstance(device, int) and not isinstance(device, bool) else None,
        kind if isinstance(kind, str) and kind else None,
    )


def _rank_file(folder: Path) -> RankIdentity:
    side = read_side_file(folder / RANK_FILE, _MAX_BYTES)
    if side.data is None:
        return RankIdentity()
    try:
        value, _note = parse_json(side.data)
    except NotASideFileError:
        return RankIdentity()
    return _from_hardware(value.get("hardware")) if isinstance(value, dict) else RankIdentity()


def _event_file_host(folder: Path) -> Optional[str]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(EVENT_FILE_PREFIX))
    except OSError:
        return None
    if not names:
        return None
    # <time>.<host>.<pid>.<n>: the host may hold dots itself (a FQDN)
    rest = names[-1][len(EVENT_FILE_PREFIX) :].split(".")
    if len(rest) < 4:
        return None
    return ".".join(rest[1:-2]) or None


def rank_identity(folder: Path, rank: int, run_folder: Optional[Path] = None) -> RankIdentity:
    """Rank ``rank``'s node and device, from its folder ``folder`` (``run_folder``: the
    run it belongs to, whose run.json is rank 0's); see the module for the order."""
    found = _rank_file(folder)
    if found.node is not None:
        return found
    own = read_run_file(folder, warn=False)
    found = _from_hardware(own.record.get("hardware"))
    run = read_run_file(run_folder, warn=False) if run_folder is not None else own
    if found.node is None and rank == 0:
        found = _from_hardware(run.record.get("hardware"))
    if found.node is None and (own.found or run.found):
        # Written live by mindwatch (a run.json says so), so by the rank's own process;
        # not by `mindwatch convert`, whose files name the converting machine.
        found = RankIdentity(_event_file_host(folder), found.device)
    return found
