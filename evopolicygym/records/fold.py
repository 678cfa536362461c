"""Reading the whole log fast: a raw-rows fold iterator and the chain verifier.

Folds (replay, projections, read models) touch every event, so building an
``Envelope`` per row and looking its decoder up by class each time is most of
their cost. ``iter_events`` reads pages of plain row tuples (``read_all_rows``,
in envelope field order) and decodes each payload with a decoder cached per
``(type, schema_version)``; stores without ``read_all_rows`` fall back to
``read_all``.

``verify_chain`` is the integrity check under ``evopolicy record verify``: it
streams the same rows once and reports every problem it sees, in log order, as
``"position N: ..."`` strings, so the first entry names the first bad position.
An empty list means the log is intact: positions gap-free from 1, payload
hashes right, each ``prev_hash`` linking to the previous event's ``hash``,
each ``hash`` recomputable from its fields, stream versions gap-free from 1,
and every payload decoding as its declared type and version.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from evopolicygym.records.chain import GENESIS, chain_hash
from evopolicygym.records.events import EVENT_TYPES, Event, decode_event

__all__ = ["iter_events", "iter_rows", "page_reader", "verify_chain"]

Row = tuple[Any, ...]
"""position, stream_id, stream_version, event_id, type, schema_version, recorded_at,
payload, payload_hash, prev_hash, hash: the envelope field order of ``read_all_rows``."""

_POSITION, _STREAM, _VERSION, _TYPE, _SCHEMA, _PAYLOAD = 0, 1, 2, 4, 5, 7
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
Decoders = dict[tuple[str, int], Callable[[bytes], Event]]


def _decoder(cache: Decoders, key: tuple[str, int]) -> Callable[[bytes], Event]:
    """The payload decoder for one ``(type, schema_version)``, made once per fold.

    The current version of a known type gets a typed msgspec decoder's bound
    ``decode`` (no registry lookups and no wrapper call per event; it raises
    msgspec errors, which callers turn into ``decode_event``'s wording). Older
    versions and unknown types go through ``decode_event`` (upcasters apply).
    The cache lives for one fold, not the process, so a type or upcaster
    registered later is never shadowed by a decoder made before it.
    """
    type_name, schema_version = key
    cls = EVENT_TYPES.get(type_name)
    decoder: Callable[[bytes], Event]
    if cls is not None and schema_version == cls.SCHEMA_VERSION:
        decoder = msgspec.json.Decoder(cls).decode
    else:
        decoder = functools.partial(decode_event, type_name, schema_version)
    cache[key] = decoder
    return decoder


def page_reader(store: Any) -> Callable[[int, int], list[Row]]:
    """``read(from_position, limit)`` returning row tuples in envelope field order, for a
    ``Store`` or any ``EventStore``: ``read_all_rows`` where the backend has it (no
    Envelope objects), else ``read_all`` pages turned into rows."""
    events = getattr(store, "events", store)
    rows = getattr(events, "read_all_rows", None)
    if callable(rows):
        return rows

    def read(from_position: int, limit: int) -> list[Row]:
        return [e.as_row() for e in events.read_all(from_position, limit)]

    return read


def _pages(store: Any, from_position: int, batch: int) -> Iterator[list[Row]]:
    """Pages of row tuples after ``from_position`` until a page comes back empty."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    read = page_reader(store)
    position = from_position
    while True:
        rows = read(position, batch)
        if not rows:
            return
        yield rows
        position = rows[-1][_POSITION]


def iter_rows(store: Any, from_position: int = 0, batch: int = 10_000) -> Iterator[Row]:
    """Every row after ``from_position`` as a tuple in envelope field order.

    Uses the store's ``read_all_rows`` when it has one (no Envelope objects),
    else converts ``read_all`` pages. Reads ``batch`` rows per query, and keeps
    going until a page comes back empty, so rows appended meanwhile are seen.
    """
    for rows in _pages(store, from_position, batch):
        yield from rows


def iter_events(
    store: Any, from_position: int = 0, batch: int = 10_000
) -> Iterator[tuple[int, str, int, Event]]:
    """``(position, stream_id, stream_version, event)`` for every event after ``from_position``.

    The fast path for folds: payloads are decoded straight from row tuples with
    decoders cached per ``(type, schema_version)``. A payload that does not
    decode raises ``EventCodecError``, as ``Envelope.event()`` would (use
    ``verify_chain`` to list every such payload).
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    cache: Decoders = {}
    narrow = getattr(store, "read_event_rows", None)
    if narrow is not None:
        # Only the six columns a fold needs: fetching the full rows costs more than decoding.
        position = from_position
        while rows := narrow(position, batch):
            for pos, stream, version, type_name, schema, payload in rows:
                key = (type_name, schema)
                decode = cache.get(key) or _decoder(cache, key)
                try:
                    event = decode(payload)
                except _DECODE_ERRORS:
                    event = decode_event(type_name, schema, payload)  # raises EventCodecError
                yield pos, stream, version, event
            position = rows[-1][0]
        return
    for rows in _pages(store, from_position, batch):
        for row in rows:
            key = (row[_TYPE], row[_SCHEMA])
            decode = cache.get(key) or _decoder(cache, key)
            try:
                event = decode(row[_PAYLOAD])
            except _DECODE_ERRORS:
                event = decode_event(key[0], key[1], row[_PAYLOAD])  # raises EventCodecError
            yield row[_POSITION], row[_STREAM], row[_VERSION], event


def verify_chain(store: Any, batch: int = 10_000) -> list[str]:
    """Every integrity problem in the log, in log order, as ``"position N: what"``; [] if intact.

    Checks each event: its position follows the previous one (``gap after M``);
    ``payload_hash`` is the sha256 of the payload; ``prev_hash`` is the previous
    event's ``hash`` (``GENESIS`` for the first); ``hash`` recomputes from the
    stored fields; its stream version follows that stream's previous one; and
    the payload decodes as its type and version. Each check trusts the stored
    values the others are about, so a problem is reported where it is: a
    flipped payload byte is a payload hash mismatch at that position alone, a
    rewritten ``hash`` is a chain hash mismatch there and a broken link at the
    next position. It never stops early; one pass over the log, constant memory
    but for one integer per stream.
    """
    problems: list[str] = []
    versions: dict[str, int] = {}
    cache: Decoders = {}
    sha256 = hashlib.sha256
    last_position = 0
    last_hash = GENESIS
    for row in iter_rows(store, 0, batch):
        position, stream_id, version, event_id, type_name, schema_version = row[:6]
        recorded_at, payload, stored_payload_hash, prev_hash, stored_hash = row[6:]
        where = f"position {position}"
        if position != last_position + 1:
            order = "gap" if position > last_position else "out of order"
            problems.append(f"{where}: {order} after {last_position}")
        if not isinstance(payload, bytes):  # a tampered row can hold TEXT: report, go on
            problems.append(f"{where}: payload is {type(payload).__name__}, not bytes")
            payload = str(payload).encode()
        if sha256(payload).hexdigest() != stored_payload_hash:
            problems.append(f"{where}: payload hash mismatch")
        if prev_hash != last_hash:
            if last_position == 0:
                problems.append(f"{where}: prev_hash is not the genesis hash")
            else:
                problems.append(f"{where}: prev_hash does not link to position {last_position}")
        recomputed = chain_hash(
            prev_hash,
            position,
            stream_id,
            version,
            event_id,
            type_name,
            schema_version,
            recorded_at,
            stored_payload_hash,
        )
        if recomputed != stored_hash:
            problems.append(f"{where}: chain hash mismatch")
        previous_version = versions.get(stream_id, 0)
        if version != previous_version + 1:
            problems.append(
                f"{where}: stream {stream_id!r} version {version} after {previous_version}"
            )
        versions[stream_id] = max(version, previous_version)
        key = (type_name, schema_version)
        try:
            try:
                (cache.get(key) or _decoder(cache, key))(payload)
            except _DECODE_ERRORS:
                decode_event(type_name, schema_version, payload)  # for its wording
        except Exception as exc:  # an upcaster may fail in any way: report it, go on
            problems.append(f"{where}: payload does not decode: {exc}")
        last_position = max(position, last_position)
        last_hash = stored_hash
    return problems
