"""Verify a store end to end: the log's positions, versions, hashes and chain, and its blobs.

``verify_store`` is the one integrity walk over the log (``evopolicy record
verify`` runs it). It reads the whole log once, in pages (memory stays flat in
the number of events), never stops early, and checks for every event:

* global positions are contiguous from 1 (a gap, or a position at or below one
  already seen: out of order), and stream versions contiguous from 1;
* the payload is stored as bytes (a tampered row can hold TEXT: that is
  reported, and its text is checked on);
* the stored payload hash is the sha256 of the payload;
* ``prev_hash`` is the previous event's hash (``GENESIS`` for the first) and
  ``hash`` is ``chain.chain_hash`` over the envelope;
* the payload decodes as its declared type and version (upcasting included; an
  unknown type, a version newer than the code or a failing upcaster is a
  ``decode`` problem);
* every blob the payload references is stored and intact: a key ``blob`` or
  ending in ``_blob`` holding a ``sha256:`` string names a blob, a key ending in
  ``program_digest`` names a Program, and the plurals ``_blobs`` / ``program_digests``
  hold lists of them (see ``events``). Only with a blob store: given a bare
  ``EventStore`` (no ``.blobs``), references are not checked and the report's
  ``blobs`` count stays 0;
* a RunCreated's Episode pool kept as a blob (``pool_blob``) reads back whole: its
  manifest, every chunk it names, and as many entries as the Run's pool size
  (``pools.pool_problems``).

Blobs are checked through the ``store.BlobStore`` contract, so the same walk verifies a
directory of blob files and PostgreSQL's blob tables (``pgblobs``): each blob read back
whole and hashed. Before the walk, the blob backend reports its own storage problems
beside the log's (``integrity_problems``: PostgreSQL's append-only triggers and indexes).

Each check trusts the stored values the others are about, so a problem is
reported where it is: a flipped payload byte is a payload hash problem at that
position alone; a rewritten ``hash`` is a chain problem there and a broken link
at the next position.

With a stream filter the chain is still walked globally (it is one chain), but
only that stream's problems are reported, plus any break of the global chain
(a position gap, a broken link or a wrong hash, in whichever stream).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

import msgspec

from evopolicygym.records.blobcodec import BlobError, BlobMissing
from evopolicygym.records.chain import GENESIS, chain_hash
from evopolicygym.records.events import EventCodecError, RunCreated, decode_event, payload_hash
from evopolicygym.records.fold import iter_rows
from evopolicygym.records.location import Store, event_log
from evopolicygym.records.pools import pool_problems
from evopolicygym.records.store import BlobStore, EventStore, Row, StoreError

__all__ = [
    "PAGE",
    "Anchor",
    "BlobChecker",
    "Problem",
    "ProblemKind",
    "VerifyReport",
    "log_head",
    "referenced_blobs",
    "verify_store",
]

PAGE = 1000

ProblemKind = Literal[
    "position",  # a gap or disorder in global positions
    "payload_type",  # the payload is not stored as bytes
    "chain",  # prev_hash does not link to the previous event, or hash is wrong
    "version",  # a gap or disorder in a stream's versions
    "payload_hash",  # the payload does not hash to its stored payload hash
    "decode",  # the payload does not decode as its type and version (or its type is unknown)
    "blob_missing",
    "blob_corrupt",
    "storage",  # the database file itself is damaged (its pages, indexes)
    "anchor",  # the log no longer extends a head kept elsewhere (truncated or rechained)
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


_ANCHOR = re.compile(r"(\d{1,18}):([0-9a-f]{64})")


class Anchor(msgspec.Struct, frozen=True, kw_only=True):
    """The log's head as a user keeps it elsewhere: its last position and that event's
    chain hash, ``POSITION:HASH``. A log that still extends it has the same hash there;
    a truncated tail or a chain recomputed from an edit does not."""

    position: int
    hash: str

    def __str__(self) -> str:
        return f"{self.position}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> Anchor:
        found = _ANCHOR.fullmatch(text.strip())
        if found is None:
            raise ValueError(
                f"an anchor is POSITION:HASH (as `evopolicy record head` prints it), not {text!r}"
            )
        return cls(position=int(found.group(1)), hash=found.group(2))


def log_head(store: Store | EventStore) -> Anchor:
    """The anchor of the log as it is now (position 0 and the genesis hash when empty)."""
    events = event_log(store)
    head = events.head()
    if head == 0:
        return Anchor(position=0, hash=GENESIS)
    last = events.read_all(head - 1, 1)
    if not last or last[0].position != head:
        raise StoreError(f"the log's head {head} cannot be read")
    return Anchor(position=head, hash=last[0].hash)


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
                    yield "blob", item  # a malformed reference is reported, not skipped
                    continue
                if key.endswith("program_digest") and item is not None:
                    yield "program", item if isinstance(item, str) else repr(item)
                    continue
                if key.endswith("_blobs") and isinstance(item, list):
                    yield from (("blob", d if isinstance(d, str) else repr(d)) for d in item)
                    continue
                if key.endswith("program_digests") and isinstance(item, list):
                    yield from (("program", d if isinstance(d, str) else repr(d)) for d in item)
                    continue
            yield from referenced_blobs(item)
    elif isinstance(value, list):
        for item in value:
            yield from referenced_blobs(item)


def _rows(store: Store | EventStore, head: int) -> Iterator[Row]:
    """The log's rows up to ``head``, in position order, a page at a time."""
    for row in iter_rows(store, batch=PAGE):
        if row[0] > head:
            return
        yield row


class BlobChecker:
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


Found = list[tuple[ProblemKind, str, str | None]]


class _Walker:
    """The state of one pass over the log: where the chain and each stream should be."""

    def __init__(self, blobs: BlobStore | None, stream_id: str | None) -> None:
        self.stream_id = stream_id
        self.checker = BlobChecker(blobs) if blobs is not None else None
        self.versions: dict[str, int] = {}
        self.last_position = 0  # the highest global position seen so far
        self.prev_position: int | None = None  # the previous row's position (None: first row)
        self.prev = GENESIS
        self.events = 0

    def check(self, row: Row) -> list[Problem]:
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
        found: Found = []
        # The chain is global: walked (and reported) whatever the stream filter.
        last = self.last_position
        if position != last + 1:
            order = "gap" if position > last else "out of order"
            found.append(
                (
                    "position",
                    f"{order} after {last}: expected global position {last + 1}, found {position}",
                    None,
                )
            )
        if prev_hash != self.prev:
            if self.prev_position is None:
                message = f"prev_hash {prev_hash} is not the genesis hash {GENESIS}"
            else:
                message = (
                    f"prev_hash {prev_hash} does not link to position {self.prev_position} "
                    f"(its hash is {self.prev})"
                )
            found.append(("chain", message, None))
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
                    f"chain hash mismatch: hash {stored_hash} does not match the envelope "
                    f"(computed {computed})",
                    None,
                )
            )
        self.last_position = max(position, last)
        self.prev_position = position
        self.prev = stored_hash
        if self.stream_id is None or sid == self.stream_id:
            self.events += 1
            found.extend(
                self._check_event(
                    sid, version, type_name, schema_version, payload, stored_payload_hash
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
        payload: Any,
        stored_payload_hash: str,
    ) -> Found:
        found: Found = []
        last = self.versions.get(sid, 0)
        if version != last + 1:
            found.append(
                (
                    "version",
                    f"stream {sid!r} version {version} after {last} (expected {last + 1})",
                    None,
                )
            )
        self.versions[sid] = version
        if not isinstance(payload, bytes):  # a tampered row can hold TEXT: report, go on
            found.append(("payload_type", f"payload is {type(payload).__name__}, not bytes", None))
            if isinstance(payload, bytearray | memoryview):
                payload = bytes(payload)
            else:
                payload = str(payload).encode()
        actual = payload_hash(payload)
        if actual != stored_payload_hash:
            found.append(
                (
                    "payload_hash",
                    f"payload hash mismatch: payload hashes to {actual}, stored "
                    f"{stored_payload_hash}",
                    None,
                )
            )
        event: Any = None
        try:
            event = decode_event(type_name, schema_version, payload)
        except EventCodecError as exc:
            found.append(("decode", f"payload does not decode: {exc}", None))
        except Exception as exc:  # an upcaster may fail in any way: report it, go on
            found.append(("decode", f"payload does not decode: {type(exc).__name__}: {exc}", None))
        if self.checker is None:  # no blob store: references are not checked
            return found
        walked: Any = None
        if event is not None:
            walked = msgspec.to_builtins(event)
        else:
            try:  # still check the references the raw payload holds
                walked = _RAW_JSON.decode(payload)
            except msgspec.DecodeError:
                walked = None
        for kind, digest in referenced_blobs(walked):
            outcome = self.checker.check(kind, digest)
            if outcome is not None:
                found.append((outcome[0], outcome[1], digest))
        if (
            isinstance(event, RunCreated)
            and event.pool_blob is not None
            and self.checker.check("blob", event.pool_blob) is None
        ):  # the pool's manifest is intact (a problem with it is reported above): its chunks
            for bad in pool_problems(self.checker.blobs, event):
                found.append(
                    ("blob_missing" if bad.missing else "blob_corrupt", str(bad), event.pool_blob)
                )
        return found


def verify_store(
    store: Store | EventStore, stream_id: str | None = None, anchor: Anchor | None = None
) -> VerifyReport:
    """Check the log (and the blobs it references) up to its head when called.

    ``store`` is a ``Store`` (its ``.events`` log and its ``.blobs``) or a bare
    ``EventStore``: with no blob store, blob and Program references are not
    checked and ``VerifyReport.blobs`` stays 0. See the module docstring for what
    is checked. Problems come in log order; an intact log gives ``report.ok``. With
    ``anchor`` (a head kept elsewhere), the log must still hold that position with that
    hash: a chain that checks out but no longer extends it was truncated or rewritten.
    """
    events = event_log(store)
    blobs = store.blobs if isinstance(store, Store) else None
    # The backend's own structural check first: a damaged index (say on event ids, the
    # idempotency key) leaves every row readable, so the walk below would not see it.
    storage = events.integrity_problems()
    if blobs is not None:  # the blob backend's own (a database's triggers, indexes)
        storage += blobs.integrity_problems()
    problems = [
        Problem(position=0, stream_id="", stream_version=0, kind="storage", message=message)
        for message in storage
    ]
    try:
        head = events.head()
        walker = _Walker(blobs, stream_id)
        for row in _rows(store, head):
            problems.extend(walker.check(row))
            if anchor is not None and row[0] == anchor.position and row[10] != anchor.hash:
                problems.append(
                    Problem(
                        position=row[0],
                        stream_id=row[1],
                        stream_version=row[2],
                        kind="anchor",
                        message=f"the event here has hash {row[10]}, not the anchor's "
                        f"{anchor.hash}: "
                        "the log was rewritten since the anchor was taken",
                    )
                )
        if anchor is not None and anchor.position > head:
            problems.append(
                Problem(
                    position=head,
                    stream_id="",
                    stream_version=0,
                    kind="anchor",
                    message=f"the log ends at position {head}, before the anchor's "
                    f"{anchor.position}: "
                    "events were removed since the anchor was taken",
                )
            )
    except StoreError as exc:
        if not problems:
            raise
        problems.append(
            Problem(position=0, stream_id="", stream_version=0, kind="storage", message=str(exc))
        )
        return VerifyReport(head=0, stream_id=stream_id, problems=problems)
    checked = walker.checker.seen.values() if walker.checker is not None else ()
    return VerifyReport(
        head=head,
        stream_id=stream_id,
        events=walker.events,
        blobs=sum(1 for outcome in checked if outcome is None),
        problems=problems,
    )
