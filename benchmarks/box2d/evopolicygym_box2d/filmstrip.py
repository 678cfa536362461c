"""A strip of small RGB frames as one PNG (zlib and struct only: no image library)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["png_strip"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def png_strip(frames: Sequence[np.ndarray[Any, Any]], gap: int = 2) -> bytes:
    """The frames (each height x width x 3 uint8, all one size) side by side, ``gap`` black
    columns apart, as an 8-bit RGB PNG."""
    if not frames:
        raise ValueError("png_strip needs at least one frame")
    height, width, _ = frames[0].shape
    if any(f.shape != (height, width, 3) for f in frames):
        raise ValueError("png_strip: frames must all be height x width x 3")
    spacer = np.zeros((height, gap, 3), dtype=np.uint8)
    parts: list[np.ndarray[Any, Any]] = []
    for i, frame in enumerate(frames):
        if i:
            parts.append(spacer)
        parts.append(np.asarray(frame, dtype=np.uint8))
    image = np.concatenate(parts, axis=1)
    rows = np.concatenate(
        [np.zeros((height, 1), dtype=np.uint8), image.reshape(height, -1)], axis=1
    )
    header = struct.pack(">IIBBBBB", image.shape[1], height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + _chunk(b"IEND", b"")
    )
