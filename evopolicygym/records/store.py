"""The store contracts, written once and implemented per backend: the event log
(``EventStore``: ``sqlite.SQLiteEventStore``, ``postgres.PostgresEventStore``) and the blobs
(``BlobStore``: ``blobs.FileBlobStore``, ``pgblobs.PgBlobStore``).

``append`` (with an expected stream version), ``read_stream``, ``read_all``
(from a global position, in pages), ``head`` and ``streams``; for the folds
that read the whole log (replay, projections, verify), ``read_all_rows`` and
``read_event_rows`` give the same pages as plain tuples; ``integrity_problems``
is the backend's own check of its storage. Catch-up readers poll ``read_all``
(or its row forms). The log is append-only: a backend refuses updates and
deletes, positions are gap-free in commit order, and a retried append of the
same event ids is a no-op that returns the original positions. No event's payload
may exceed ``MAX_EVENT_BYTES``: an append holding one is refused whole, before
anything is written (``EventTooLarge``); large data lives in blobs that events name.

Blobs are immutable and content-addressed: a blob's name is the digest of its bytes
(``blobcodec``), every read is checked against it, and a Program is stored as blobs. Callers
type against ``EventStore`` and ``BlobStore``; ``location.open_store`` is the one place
that picks a backend. Every backend keeps its tables as ``records.tables``
declares them, in log format ``FORMAT_VERSION``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from evopolicygym.records.chain import chain_hash
from evopolicygym.records.events import Envelope, NewEvent

if TYPE_CHECKING:
    from evopolicygym.program import Program

__all__ = [
    "ANY_VERSION",
    "FORMAT_VERSION",
    "MAX_EVENT_BYTES",
    "BlobStore",
    "DuplicateEventError",
    "EventStore",
    "EventTooLarge",
    "ExpectedVersionError",
    "Row",
    "StoreError",
    "StreamInfo",
    "chained_rows",
    "check_event_sizes",
    "prefix_upper_bound",
    "retried_positions",
]

ANY_VERSION = -1  # append without a version check (use sparingly: it gives up concurrency control)
# The on-disk layout of the log (records/tables.py). Here, not there: every open checks
# it, and importing the models (SQLModel, pydantic) is not worth it just for that.
FORMAT_VERSION = 1
# The largest encoded payload of one event. Large or growing data (an Episode pool,
# traces, raw streams, artifacts) belongs in blobs the event names: an event this size
# already costs every reader of the log (replay, the read models) to decode.
MAX_EVENT_BYTES = 8 * 1024 * 1024

Row = tuple[Any, ...]
"""One event as a plain tuple; its fields are listed by the method that returns it."""


STREAM_PAGE = 1000  # events per query of a stream read


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


class EventTooLarge(StoreError):
    """An event whose payload is over ``MAX_EVENT_BYTES``: its append was refused whole."""

    def __init__(self, event_type: str, size: int, limit: int) -> None:
        super().__init__(
            f"{event_type} event of {size:,} bytes is over the event size limit of "
            f"{limit:,} bytes ({limit / 2**20:g} MiB); nothing was appended"
        )
        self.event_type = event_type
        self.size = size
        self.limit = limit


def chained_rows(
    stream_id: str,
    events: Sequence[NewEvent],
    hashes: list[str],
    current: int,
    position: int,
    prev: str,
    now: int,
) -> tuple[list[Row], list[int]]:
    """The rows of an append (in the envelope's column order) after the log's last ``position``
    and hash ``prev`` and the stream's version ``current``, each chained to the one before,
    and their positions: the chain written once for every backend."""
    rows = []
    positions = []
    for offset, (new, digest) in enumerate(zip(events, hashes, strict=True)):
        position += 1
        version = current + offset + 1
        link = chain_hash(
            prev,
            position,
            stream_id,
            version,
            new.event_id,
            new.type,
            new.schema_version,
            now,
            digest,
        )
        rows.append(
            (
                position,
                stream_id,
                version,
                new.event_id,
                new.type,
                new.schema_version,
                now,
                new.payload,
                digest,
                prev,
                link,
            )
        )
        positions.append(position)
        prev = link
    return rows, positions


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix``; None if there is none
    (the bound of a stream-id prefix scan, the same on every backend)."""
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates cannot be encoded: skip past them
            code = 0xE000
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


def retried_positions(
    stream_id: str, events: Sequence[NewEvent], hashes: list[str], existing: list[Row]
) -> list[int]:
    """The positions a retried append already holds, from the rows (event_id, position, stream_id,
    type, schema_version, payload_hash) its event ids found; DuplicateEventError unless every
    event is there, with the same content (an append is all new or all retried)."""
    found = {row[0]: row for row in existing}
    if len(found) != len(events):
        raise DuplicateEventError(
            f"{len(found)} of {len(events)} event ids are already in the log: "
            "a batch is all new or all retried"
        )
    positions = []
    for new, digest in zip(events, hashes, strict=True):
        _, position, stored_stream, stored_type, stored_version, stored_hash = found[new.event_id]
        if (stored_stream, stored_type, stored_version, stored_hash) != (
            stream_id,
            new.type,
            new.schema_version,
            digest,
        ):
            raise DuplicateEventError(
                f"event id {new.event_id!r} is already in the log with different content"
            )
        positions.append(position)
    return positions


def check_event_sizes(events: Sequence[NewEvent], limit: int | None = None) -> None:
    """Raise ``EventTooLarge`` for the first of ``events`` whose payload is over ``limit``
    (default ``MAX_EVENT_BYTES``): what a backend calls before it writes any of an append."""
    limit = MAX_EVENT_BYTES if limit is None else limit
    for new in events:
        if len(new.payload) > limit:
            raise EventTooLarge(new.type, len(new.payload), limit)


class StreamInfo(msgspec.Struct, frozen=True):
    stream_id: str
    version: int


class EventStore(Protocol):
    def append(
        self, stream_id: str, events: Sequence[NewEvent], expected_version: int
    ) -> list[int]:
        """Append atomically; return the global positions. Retrying the same ids is a no-op.
        ``EventTooLarge`` (nothing appended) if a payload is over ``MAX_EVENT_BYTES``."""
        ...

    def read_stream(
        self, stream_id: str, from_version: int = 0, limit: int | None = None
    ) -> Iterator[Envelope]:
        """The stream's events with ``stream_version > from_version``, in order; at most
        ``limit`` of them (and no more read from the database) when it is given."""
        ...

    def read_all(self, from_position: int = 0, limit: int = 1000) -> list[Envelope]:
        """Up to ``limit`` events with ``position > from_position``, in order."""
        ...

    def read_all_rows(self, from_position: int = 0, limit: int = 1000) -> list[Row]:
        """``read_all`` as plain tuples in ``Envelope`` field order (``Envelope.as_row``):
        position, stream_id, stream_version, event_id, type, schema_version, recorded_at,
        payload, payload_hash, prev_hash, hash. For bulk readers (projections, verify):
        no Envelope objects, and the payload as stored (a tampered row may hold text)."""
        ...

    def read_event_rows(self, from_position: int = 0, limit: int = 10_000) -> list[Row]:
        """Up to ``limit`` events after ``from_position``, in order, as ``(position,
        stream_id, stream_version, type, schema_version, payload)``: what a fold decodes
        (``fold.iter_events``), without the ids, timestamps and hashes it would not read."""
        ...

    def head(self) -> int:
        """The last global position (0 for an empty log)."""
        ...

    def streams(self, prefix: str = "") -> list[StreamInfo]:
        """Streams whose id starts with ``prefix``, with their current versions."""
        ...

    def integrity_problems(self) -> list[str]:
        """The backend's own structural check of its storage (pages, indexes): one message
        per problem, [] when sound. ``verify.verify_store`` runs it before walking the log,
        because a damaged index can leave every row readable."""
        ...

    def close(self) -> None: ...


class BlobStore(Protocol):
    """Content-addressed, immutable blobs, and Programs stored as blobs. Digests are
    ``sha256:<64 lowercase hex>`` (``blobcodec``): a method given anything else raises
    ValueError. Reads raise ``blobcodec.BlobMissing`` for what is not stored and
    ``blobcodec.BlobCorrupt`` for what does not decode to its digest. Safe for threads and
    for processes (a store pickles, and a forked or unpickled copy opens its own handles)."""

    def put(self, data: bytes) -> str:
        """Store ``data`` (if not already stored) and return its digest; ValueError if it is
        over ``blobcodec.MAX_BLOB_BYTES``."""
        ...

    def put_many(self, items: list[bytes]) -> list[str]:
        """Store each of ``items`` (as ``put``) and return their digests, in order."""
        ...

    def get(self, digest: str) -> bytes:
        """The blob's bytes, checked against its digest."""
        ...

    def verify(self, digest: str) -> None:
        """Raise ``BlobMissing`` or ``BlobCorrupt`` unless the blob reads back intact."""
        ...

    def has(self, digest: str) -> bool: ...

    def size(self, digest: str) -> int:
        """The blob's uncompressed size, without reading its content (content unchecked)."""
        ...

    def stored_size(self, digest: str) -> int:
        """Bytes the blob takes as stored (its encoded form)."""
        ...

    def digests(self) -> Iterator[str]:
        """Digests of all stored blobs, in sorted order."""
        ...

    def put_program(self, program: Program) -> str:
        """Store each file and the program's tree as blobs, then map the program's digest to
        the tree; return ``program.digest``. ValueError if the digest is not its files'."""
        ...

    def get_program(self, digest: str) -> Program:
        """Rebuild the program from its tree; ``BlobCorrupt`` unless it has digest ``digest``."""
        ...

    def has_program(self, digest: str) -> bool: ...

    def program_tree(self, digest: str) -> str:
        """Digest of the tree blob recorded for program ``digest``."""
        ...

    def program_digests(self) -> Iterator[str]:
        """Digests of all stored programs, in sorted order."""
        ...

    def integrity_problems(self) -> list[str]:
        """The backend's own check of its storage, beyond each blob's digest (a database's
        append-only triggers, say): one message per problem, [] when sound."""
        ...

    def close(self) -> None: ...
