"""The ``native`` stream format: what our own agents print.

Our own agents (``reference``, ``chat``, ``command``) print ``Message`` JSON, one per
line. A line that decodes (strictly) as a ``Message`` object is that message, exactly
as ``agents/process.py`` reads it today; anything else is counted under ``"text"``.
"""

from __future__ import annotations

import msgspec

from evopolicygym.agents.streams.common import count_kind
from evopolicygym.transcript import Message

__all__ = ["NativeParser"]

_DECODE_MESSAGE = msgspec.json.Decoder(Message)


class NativeParser:
    """Our own agents' lines: ``Message`` JSON, decoded as ``agents/process.py`` does."""

    def __init__(self) -> None:
        self.unknown: dict[str, int] = {}

    def feed(self, line: bytes) -> list[Message]:
        stripped = line.strip()
        if not stripped:
            return []
        if stripped.startswith(b"{"):
            try:
                return [_DECODE_MESSAGE.decode(stripped)]
            except (msgspec.DecodeError, RecursionError):
                pass
        count_kind(self.unknown, "text")
        return []

    def close(self) -> list[Message]:
        return []
