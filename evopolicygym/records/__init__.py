"""The record: an append-only, hash-chained event log plus content-addressed blobs.

Every fact of a Run is an event here; replay, resume, queries and exports read
only from it. ``open_store`` opens a store directory; ``Store.events`` is the
log (the ``EventStore`` contract), ``Store.blobs`` the blob store.
"""

from evopolicygym.records.events import (
    EVENT_TYPES,
    Envelope,
    Event,
    NewEvent,
    decode_event,
    new_event,
)
from evopolicygym.records.location import Store, open_store, resolve_store_path
from evopolicygym.records.store import (
    ANY_VERSION,
    DuplicateEventError,
    EventStore,
    ExpectedVersionError,
    StoreError,
    StreamInfo,
)

__all__ = [
    "ANY_VERSION",
    "EVENT_TYPES",
    "DuplicateEventError",
    "Envelope",
    "Event",
    "EventStore",
    "ExpectedVersionError",
    "NewEvent",
    "Store",
    "StoreError",
    "StreamInfo",
    "decode_event",
    "new_event",
    "open_store",
    "resolve_store_path",
]
