"""Verify a store end to end: the log's positions, versions, hashes and chain, and its blobs.

``verify_store`` walks the whole log once, in pages (memory stays flat in the
number of events), and checks for every event:

* global positions are contiguous from 1, and stream versions contiguous from 1;
* the stored payload hash is the sha256 of the payload;
* ``prev_hash`` is the previous event's hash (``GENESIS`` for the first) and
  ``hash`` is ``chain.chain_hash`` over the envelope;
* the payload decodes as its declared type and version (upcasting included);
* every blob the payload references is stored and intact: a key ``blob`` or
  ending in ``_blob`` holding a ``sha256:`` string names a blob, a key ending in
  ``program_digest`` names a Program, and the plurals ``_blobs`` / ``program_digests``
  hold lists of them (see ``events``).

With a stream filter the chain is still walked globally (it is one chain), but
only that stream's problems are reported, plus any break of the global chain
(a position gap, a broken link or a wrong hash, in whichever stream).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import msgspec

from evopolicygym.records.blobs import BlobError, BlobMissing, BlobStore
from evopolicygym.records.chain import GENESIS, chain_hash
from evopolicygym.records.events import EventCodecError, decode_event, payload_hash
from evopolicygym.records.fold import page_reader
from evopolicygym.records.location import Store

__all__ = ["PAGE", "Problem", "ProblemKind", "VerifyReport", "referenced_blobs", "verify_store"]

PAGE = 1000

ProblemKind = Literal[
    "position",  # a gap or disorder in global positions
    "chain",  # prev_hash does not link to the previous event, or hash is wrong
    "version",  # a gap or disorder in a stream's versions
    "payload_hash",  # the payload does not hash to its stored payload hash
    "decode",  # the payload does not decode as its type and version
    "blob_missing",
    "blob_corrupt",
]
_RAW_JSON = msgspec.json.Decoder()


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    position: int
    stream_id: str
    stream_version: int
    kind: ProblemKind
    message: str
    blob: str | None = None  # the blob or program digest, for blob problems

    def describe(self) -> str:
        return f"position {self.position} ({self.stream_id} v{self.stream_version}): {self.message}"


class VerifyReport(msgspec.Struct, kw_only=True):
    head: int  # the last global position when verification started
    stream_id: str | None  # the stream filter, if any
    events: int = 0  # events checked (in the stream, with a filter)
    blobs: int = 0  # distinct blobs and programs verified
    problems: list[Problem] = []

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_problem(self) -> Problem | None:
        return self.problems[0] if self.problems else None

    def to_dict(self) -> dict[str, Any]:
        first = self.first_problem
        return {
            "ok": self.ok,
            "head": self.head,
            "stream_id": self.stream_id,
            "events": self.events,
            "blobs": self.blobs,
            "first_problem": msgspec.to_builtins(first) if first is not None else None,
            "problems": msgspec.to_builtins(self.problems),
        }


def referenced_blobs(value: Any) -> Iterator[tuple[Literal["blob", "program"], str]]:
    """Every ``("blob"|"program", digest)`` a decoded payload references, in document order."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                if (key == "blob" or key.endswith("_blob")) and isinstance(item, str):
                    if item.startswith("sha256:"):
                        yield "blob", item
                    continue
                if key.endswith("program_digest") and item is not None:
                    yield "program", item if isinstance(item, str) else repr(item)
                    continue
                if key.endswith("_blobs") and isinstance(item, list):
                    yield from (("blob", d) for d in item if isinstance(d, str) and d.startswith("sha256:"))
                    continue
                if key.endswith("program_digests") and isinstance(item, list):
                    yield from (("program", d if isinstance(d, str) else repr(d)) for d in item)
                    continue
            yield from referenced_blobs(item)
    elif isinstance(value, list):
        for item in value:
            yield from referenced_blobs(item)


def _rows(store: Store, head: int) -> Iterator[tuple[Any, ...]]:
    """The log's rows up to ``head``, in position order, a page at a time."""
    read = page_reader(store)
    after = 0
    while after < head:
        page = read(after, PAGE)
        if not page:
            return
        for row in page:
            if row[0] > head:
                return
            yield row
        after = page[-1][0]


class _BlobChecker:
    """Checks each distinct digest once and remembers the outcome."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs
        self.seen: dict[tuple[str, str], tuple[ProblemKind, str] | None] = {}

    def check(
        self, kind: Literal["blob", "program"], digest: str
    ) -> tuple[ProblemKind, str] | None:
        key = (kind, digest)
        if key in self.seen:
            return self.seen[key]
        outcome: tuple[ProblemKind, str] | None = None
        try:
            if kind == "blob":
                self.blobs.verify(digest)
            else:
                self.blobs.get_program(digest)
        except BlobError as exc:
            missing = isinstance(exc, BlobMissing)
            outcome = ("blob_missing" if missing else "blob_corrupt", str(exc))
        except ValueError as exc:  # not a digest at all
            outcome = ("blob_corrupt", f"{kind} reference {digest!r} is invalid: {exc}")
        except OSError as exc:
            outcome = ("blob_corrupt", f"{kind} {digest} cannot be read: {exc}")
        self.seen[key] = outcome
        return outcome


class _Walker:
    """The state of one pass over the log: where the chain and each stream should be."""

    def __init__(self, store: Store, stream_id: str | None) -> None:
        self.stream_id = stream_id
        self.checker = _BlobChecker(store.blobs)
        self.versions: dict[str, int] = {}
        self.expected_position = 1
        self.prev = GENESIS
        self.events = 0

    def check(self, row: tuple[Any, ...]) -> list[Problem]:
        (
            position,
            sid,
            version,
            event_id,
            type_name,
            schema_version,
            recorded_at,
            payload,
            stored_payload_hash,
            prev_hash,
            stored_hash,
        ) = row
        found: list[tuple[ProblemKind, str, str | None]] = []
        # The chain is global: walked (and reported) whatever the stream filter.
        if position != self.expected_position:
            found.append(
                (
                    "position",
                    f"expected global position {self.expected_position}, found {position}",
                    None,
                )
            )
        if prev_hash != self.prev:
            found.append(
                (
                    "chain",
                    f"prev_hash {prev_hash} does not link to the previous event's hash {self.prev}",
                    None,
                )
            )
        computed = chain_hash(
            prev_hash,
            position,
            sid,
            version,
            event_id,
            type_name,
            schema_version,
            recorded_at,
            stored_payload_hash,
        )
        if computed != stored_hash:
            found.append(
                (
                    "chain",
                    f"hash {stored_hash} does not match the envelope (computed {computed})",
                    None,
                )
            )
        self.expected_position = position + 1
        self.prev = stored_hash
        if self.stream_id is None or sid == self.stream_id:
            self.events += 1
            found.extend(
                self._check_event(
                    sid, version, type_name, schema_version, bytes(payload), stored_payload_hash
                )
            )
        return [
            Problem(
                position=position,
                stream_id=sid,
                stream_version=version,
                kind=kind,
                message=message,
                blob=blob,
            )
            for kind, message, blob in found
        ]

    def _check_event(
        self,
        sid: str,
        version: int,
        type_name: str,
        schema_version: int,
        payload: bytes,
        stored_payload_hash: str,
    ) -> list[tuple[ProblemKind, str, str | None]]:
        found: list[tuple[ProblemKind, str, str | None]] = []
        last = self.versions.get(sid, 0)
        if version != last + 1:
            found.append(("version", f"expected stream version {last + 1}, found {version}", None))
        self.versions[sid] = version
        actual = payload_hash(payload)
        if actual != stored_payload_hash:
            found.append(
                ("payload_hash", f"payload hashes to {actual}, stored {stored_payload_hash}", None)
            )
        walked: Any = None
        try:
            walked = msgspec.to_builtins(decode_event(type_name, schema_version, payload))
        except EventCodecError as exc:
            found.append(("decode", f"payload does not decode: {exc}", None))
            try:  # still check the references the raw payload holds
                walked = _RAW_JSON.decode(payload)
            except msgspec.DecodeError:
                walked = None
        for kind, digest in referenced_blobs(walked):
            outcome = self.checker.check(kind, digest)
            if outcome is not None:
                found.append((outcome[0], outcome[1], digest))
        return found


def verify_store(store: Store, stream_id: str | None = None) -> VerifyReport:
    """Check the log (and the blobs it references) up to its head when called.

    See the module docstring for what is checked. Problems come in log order.
    """
    head = store.events.head()
    walker = _Walker(store, stream_id)
    problems: list[Problem] = []
    for row in _rows(store, head):
        problems.extend(walker.check(row))
    blobs = sum(1 for outcome in walker.checker.seen.values() if outcome is None)
    return VerifyReport(
        head=head, stream_id=stream_id, events=walker.events, blobs=blobs, problems=problems
    )
