"""Frames between the Host and one policy process.

A frame is a 4-byte little-endian length, one kind byte, and a payload. The
Host sends START (the encoded context), OBSERVATION and CLOSE; the policy
answers READY, ACTION or FAIL (a msgpack ``[status, message]``).
"""

from __future__ import annotations

import socket
import struct

from evopolicygym.values import MAX_FRAME_BYTES

__all__ = [
    "ACTION",
    "CLOSE",
    "CONTAINED",
    "FAIL",
    "MAX_PAYLOAD",
    "OBSERVATION",
    "READY",
    "START",
    "FrameReader",
    "FrameTooLarge",
    "last_chars",
    "pack",
]


def last_chars(text: str, limit: int) -> str:
    """The end of ``text`` (where a traceback names its exception), at most ``limit``
    characters of it, after a line saying how many were cut; ``text`` itself if it fits.
    A text already cut this way passes as it is."""
    if len(text) <= limit or (text.startswith("[… ") and len(text) <= limit + 64):
        return text
    return f"[… {len(text) - limit:,} earlier characters cut]\n{text[-limit:]}"


CONTAINED = ord("K")  # sent once containment is in place, before any untrusted code runs
START = ord("S")
OBSERVATION = ord("O")
CLOSE = ord("C")
READY = ord("R")
ACTION = ord("A")
FAIL = ord("F")

# One kind byte on top of the largest value frame, plus room for the FAIL envelope.
MAX_PAYLOAD = MAX_FRAME_BYTES + 64
HEADER = struct.Struct("<IB")


class FrameTooLarge(Exception):
    pass


def pack(kind: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload), kind) + payload


class FrameReader:
    """Frames out of a stream socket through one reused buffer (no allocation per step)."""

    __slots__ = ("buffer", "chunk", "sock", "view")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.chunk = bytearray(1 << 16)
        self.view = memoryview(self.chunk)

    def feed(self, flags: int = 0) -> bool:
        """One recv; False at end of stream. Raises BlockingIOError with MSG_DONTWAIT and no
        data."""
        n = self.sock.recv_into(self.chunk, 0, flags)
        if not n:
            return False
        self.buffer += self.view[:n]
        return True

    def next_frame(self) -> tuple[int, bytes] | None:
        buffer = self.buffer
        if len(buffer) < HEADER.size:
            return None
        length, kind = HEADER.unpack_from(buffer)
        if length > MAX_PAYLOAD:
            raise FrameTooLarge(length)
        end = HEADER.size + length
        if len(buffer) < end:
            return None
        payload = bytes(buffer[HEADER.size : end])
        del buffer[:end]
        return kind, payload

    def read_blocking(self) -> tuple[int, bytes] | None:
        """Policy side: the next frame; None at end of stream."""
        while True:
            frame = self.next_frame()
            if frame is not None:
                return frame
            if not self.feed():
                return None
