"""Which rank this process is, before any framework is asked, and where it runs."""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass
from typing import Any, Optional

__all__ = [
    "RankPlace",
    "env_device_id",
    "env_rank_and_world",
    "rank_folder",
    "rank_of_run",
    "this_place",
]

log = logging.getLogger(__name__)

_RANK_RUN = re.compile(r"(?:^|/)rank_(\d+)$")


def rank_folder(rank: int) -> str:
    """The name of rank ``rank``'s own folder inside a run (a TensorBoard sub-run)."""
    return f"rank_{rank}"


def rank_of_run(name: str) -> Optional[int]:
    """The rank a run name (``job/rank_3``) is the folder of, or None."""
    match = _RANK_RUN.search(name)
    return int(match.group(1)) if match else None


def env_rank_and_world() -> tuple[int, int]:
    """``(rank, world_size)`` from the launcher's environment, else ``(0, 1)``.

    ``msrun`` (and MindSpore's older launch scripts) export ``RANK_ID`` and
    ``RANK_SIZE`` to every worker; ``MS_WORKER_NUM`` is the world size when only it is
    set. A malformed or inconsistent value is ignored with a warning rather than guessed.
    """
    rank_text = os.environ.get("RANK_ID", "0")
    size_text = os.environ.get("RANK_SIZE") or os.environ.get("MS_WORKER_NUM") or "1"
    try:
        rank, size = int(rank_text), int(size_text)
    except ValueError:
        log.warning(
            "mindwatch: RANK_ID=%r / RANK_SIZE=%r are not integers; logging as a single process",
            rank_text,
            size_text,
        )
        return 0, 1
    if size < 1 or not 0 <= rank < size:
        log.warning(
            "mindwatch: RANK_ID=%d is not a rank of RANK_SIZE=%d; logging as a single process",
            rank,
            size,
        )
        return 0, 1
    return rank, size


def env_device_id() -> Optional[int]:
    """This worker's logical device id from ``DEVICE_ID`` (what msrun exports), or None."""
    raw = os.environ.get("DEVICE_ID", "").strip()
    return int(raw) if raw.isdigit() else None


@dataclass(frozen=True)
class RankPlace:
    """Where one rank runs: its node (host name) and device.

    ``device`` is the device kind as the framework names it (MindSpore's
    ``device_target``: ``Ascend``, ``GPU``, ``CPU``), None when nobody said (a custom
    loop); ``device_id`` the logical device id (``DEVICE_ID``), None when unknown.
    """

    rank: int
    node: str
    device: Optional[str] = None
    device_id: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        """The place as ``run.json`` lists it (``ranks``): unknown fields left out."""
        data: dict[str, Any] = {"rank": self.rank, "node": self.node}
        if self.device is not None:
            data["device"] = self.device
        if self.device_id is not None:
            data["device_id"] = self.device_id
        return data


# How people name a device of each kind (MindSpore's device_target): an Ascend device
# is an NPU (npu-smi's name for it).
_DEVICE_NAMES = {"Ascend": "NPU", "GPU": "GPU"}


def device_label(device: Optional[str], device_id: Optional[int]) -> Optional[str]:
    """``NPU 5``, ``GPU 0``, ``CPU`` (a CPU rank's ``DEVICE_ID`` names no device, so no
    number), ``device 3`` (kind unknown), or None when neither is known."""
    from mindwatch.common.i18n import _

    if device == "CPU":
        return "CPU"
    name = _DEVICE_NAMES.get(device or "", device)
    if device_id is None:
        return name
    if name is None:
        return _("device {id}").format(id=device_id)
    return f"{name} {device_id}"


def place_label(
    node: Optional[str], device: Optional[str], device_id: Optional[int]
) -> Optional[str]:
    """Where a rank runs, as alerts, ``doctor``, ``watch`` and the report say it:
    ``node-2, NPU 5``, ``host-a, CPU``, the node alone when the device is unknown, the
    device alone when the node is; None when neither is known."""
    from mindwatch.common.i18n import _

    label = device_label(device, device_id)
    if node is None or label is None:
        return node if node is not None else label
    return _("{node}, {device}").format(node=node, device=label)


def this_place(
    rank: int, device: Optional[str] = None, device_id: Optional[int] = None
) -> RankPlace:
    """This process's place: its host name, ``device``, and ``device_id`` (by default
    :func:`env_device_id`)."""
    found = device_id if device_id is not None else env_device_id()
    return RankPlace(rank, socket.gethostname(), device, found)
