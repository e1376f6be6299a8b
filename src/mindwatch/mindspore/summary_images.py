"""MindSpore's ``image`` summaries as TensorBoard images, drawn as MindSpore draws them.

``SummaryRecord.add_value("image", name, value)`` takes an NCHW batch (1 or 3
channels). MindSpore puts the batch on one canvas, 8 images a row, and maps the values
to bytes by their range: values within [0, 1] times 255, any other range (a ``uint8``
batch too) linearly onto [0, 255] (``(v - min) * 255 / (max - min + 1)``). This module
does the same, so an image looks in TensorBoard as it looked in MindInsight, and
encodes the canvas as PNG with :mod:`zlib` (no imaging library needed).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from mindwatch.events.summaries import value_bytes

__all__ = ["canvas", "image_summary_value", "png_bytes"]

_COLUMNS = 8  # MindSpore's images per canvas row


def canvas(nchw: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """An NCHW batch (C = 1 or 3) as one HWC ``uint8`` RGB canvas, MindSpore's way."""
    if nchw.ndim != 4 or nchw.shape[1] not in (1, 3) or 0 in nchw.shape:
        raise ValueError(
            f"an image summary is an NCHW batch with 1 or 3 channels, got shape {nchw.shape}"
        )
    images = np.concatenate([nchw] * 3, axis=1) if nchw.shape[1] == 1 else nchw
    n, _, h, w = images.shape
    cols = min(n, _COLUMNS)
    rows = -(-n // cols)
    board = np.zeros((3, h * rows, w * cols), dtype=np.float64)
    for i in range(n):
        y, x = divmod(i, cols)
        board[:, y * h : (y + 1) * h, x * w : (x + 1) * w] = images[i]
    board = board.transpose(1, 2, 0)
    # MindSpore's mapping, on its float canvas (so a uint8 batch is mapped by its range
    # too: its uint8 branch never sees a uint8 canvas), in float32 as it computes it.
    finite = board[np.isfinite(board)]
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 0.0
    board = np.nan_to_num(board, nan=low, posinf=high, neginf=low).astype(np.float32)
    if low >= 0.0 and high <= 1.0:
        scaled = board * np.float32(255)
    else:
        scale = 255.0 / (high - low + 1.0) if high != low else 1.0
        scaled = (board - np.float32(low)) * np.float32(scale)
    return np.clip(scaled, 0, 255).astype(np.uint8)


def png_bytes(rgb: np.ndarray[Any, Any]) -> bytes:
    """A PNG file of an HWC ``uint8`` RGB array (8-bit truecolour, no filtering)."""
    height, width, _ = rgb.shape
    rows = np.concatenate(
        [np.zeros((height, 1), dtype=np.uint8), rgb.reshape(height, width * 3)], axis=1
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def image_summary_value(tag: str, nchw: np.ndarray[Any, Any]) -> bytes:
    """A serialized ``Summary.Value`` showing ``nchw`` in TensorBoard's IMAGES tab."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    rgb = canvas(nchw)
    image = Summary.Image(
        height=rgb.shape[0], width=rgb.shape[1], colorspace=3, encoded_image_string=png_bytes(rgb)
    )
    return value_bytes(Summary.Value(tag=tag, image=image))
