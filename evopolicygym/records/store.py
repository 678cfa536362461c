"""The event store contract, written once and implemented per backend (SQLite now).

Five methods: ``append`` (with an expected stream version), ``read_stream``,
``read_all`` (from a global position, in pages), ``head`` and ``streams``.
Catch-up readers poll ``read_all``. The log is append-only: a backend refuses
updates and deletes, positions are gap-free in commit order, and a retried
append of the same event ids is a no-op that returns the original positions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import msgspec

from evopolicygym.records.events import Envelope, NewEvent

__all__ = [
    "ANY_VERSION",
    "DuplicateEventError",
    "EventStore",
    "ExpectedVersionError",
    "StoreError",
    "StreamInfo",
]

ANY_VERSION = -1  # append without a version check (use sparingly: it gives up concurrency control)


class StoreError(Exception):
    """The store cannot be opened or used as asked; the message says what to do."""


class ExpectedVersionError(StoreError):
    """Another writer got there first: the stream is not at the version the caller expected."""

    def __init__(self, stream_id: str, expected: int, actual: int) -> None:
        super().__init__(f"stream {stream_id!r} is at version {actual}, expected {expected}")
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual


class DuplicateEventError(StoreError):
    """An event id already in the log with different content (or a partly repeated batch)."""


class StreamInfo(msgspec.Struct, frozen=True):
    stream_id: str
    version: int


class EventStore(Protocol):
    def append(self, stream_id: str, events: Sequence[NewEvent], expected_version: int) -> list[int]:
        """Append atomically; return the global positions. Retrying the same ids is a no-op."""
        ...

    def read_stream(self, stream_id: str, from_version: int = 0) -> Iterator[Envelope]:
        """The stream's events with ``stream_version > from_version``, in order."""
        ...

    def read_all(self, from_position: int = 0, limit: int = 1000) -> list[Envelope]:
        """Up to ``limit`` events with ``position > from_position``, in order."""
        ...

    def head(self) -> int:
        """The last global position (0 for an empty log)."""
        ...

    def streams(self, prefix: str = "") -> list[StreamInfo]:
        """Streams whose id starts with ``prefix``, with their current versions."""
        ...

    def close(self) -> None: ...
