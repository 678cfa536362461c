"""Reading the whole log fast: a raw-rows fold iterator.

Folds (replay, projections, read models) touch every event, so building an
``Envelope`` per row and looking its decoder up by class each time is most of
their cost. ``iter_events`` reads pages of the contract's ``read_event_rows``
(just what a fold decodes) and decodes each payload with a decoder cached per
``(type, schema_version)``. ``iter_rows`` and ``page_reader`` give whole rows
(``read_all_rows``, in envelope field order); ``verify.verify_store``, the
integrity check under ``evopolicy record verify``, walks the log with them.

Each takes a ``Store`` (its log is read) or an ``EventStore``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import msgspec

from evopolicygym.records.events import EVENT_TYPES, Event, decode_event
from evopolicygym.records.location import Store, event_log
from evopolicygym.records.store import EventStore, Row

__all__ = ["iter_events", "iter_rows", "page_reader"]

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


def page_reader(store: Store | EventStore) -> Callable[[int, int], list[Row]]:
    """``read(from_position, limit)``: the log's ``read_all_rows``, rows in envelope field order."""
    return event_log(store).read_all_rows


def _pages(
    read: Callable[[int, int], list[Row]], from_position: int, batch: int
) -> Iterator[list[Row]]:
    """Pages of ``read`` after ``from_position`` until a page comes back empty, so rows
    appended meanwhile are seen (a row's position is its first field)."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    position = from_position
    while rows := read(position, batch):
        yield rows
        position = rows[-1][0]


def iter_rows(
    store: Store | EventStore, from_position: int = 0, batch: int = 10_000
) -> Iterator[Row]:
    """Every row after ``from_position`` as a tuple in envelope field order, ``batch`` rows
    per query, until a page comes back empty (rows appended meanwhile are seen)."""
    for rows in _pages(page_reader(store), from_position, batch):
        yield from rows


def iter_events(
    store: Store | EventStore, from_position: int = 0, batch: int = 10_000
) -> Iterator[tuple[int, str, int, Event]]:
    """``(position, stream_id, stream_version, event)`` for every event after ``from_position``.

    The fast path for folds: only the six columns a fold needs are read
    (``read_event_rows``: fetching whole rows costs more than decoding), and
    payloads are decoded with decoders cached per ``(type, schema_version)``. A
    payload that does not decode raises ``EventCodecError``, as
    ``Envelope.event()`` would (use ``verify.verify_store`` to list every such payload).
    """
    cache: Decoders = {}
    for rows in _pages(event_log(store).read_event_rows, from_position, batch):
        for position, stream, version, type_name, schema, payload in rows:
            key = (type_name, schema)
            decode = cache.get(key) or _decoder(cache, key)
            try:
                event = decode(payload)
            except _DECODE_ERRORS:
                event = decode_event(type_name, schema, payload)  # raises EventCodecError
            yield position, stream, version, event
