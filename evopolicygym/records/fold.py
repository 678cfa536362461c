"""Reading the whole log fast: a raw-rows fold iterator.

Folds (replay, projections, read models) touch every event, so building an
``Envelope`` per row and looking its decoder up by class each time is most of
their cost. ``iter_events`` reads pages of plain row tuples (``read_all_rows``,
in envelope field order) and decodes each payload with a decoder cached per
``(type, schema_version)``; stores without ``read_all_rows`` fall back to
``read_all``. ``page_reader`` is that row reader on its own (``verify.verify_store``,
the integrity check under ``evopolicy record verify``, walks the log with it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from evopolicygym.records.events import EVENT_TYPES, Event, decode_event

__all__ = ["iter_events", "iter_rows", "page_reader"]

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
    ``verify.verify_store`` to list every such payload).
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
