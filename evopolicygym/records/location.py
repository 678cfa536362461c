"""Where a store lives and how it is opened: ``events.db`` beside a ``blobs/`` directory.

The directory comes from ``--store DIR``, else ``EVOPOLICY_STORE``, else
``./evopolicy-store``. Creating a store is explicit (``create=True``) and safe
when two processes do it at once; opening a missing store is an error that
says how to create one. ``open_store`` is the one place that picks the log's
backend; everything else types against the ``EventStore`` contract.
"""

from __future__ import annotations

import os
from pathlib import Path

from evopolicygym.records.blobs import BlobStore
from evopolicygym.records.store import EventStore, StoreError

__all__ = ["DEFAULT_STORE", "STORE_ENV", "Store", "event_log", "open_store", "resolve_store_path"]

DEFAULT_STORE = "evopolicy-store"
STORE_ENV = "EVOPOLICY_STORE"


def resolve_store_path(option: str | os.PathLike[str] | None = None) -> Path:
    if option:
        return Path(option)
    from_env = os.environ.get(STORE_ENV)
    return Path(from_env) if from_env else Path(DEFAULT_STORE)


class Store:
    """One store directory: the event log, the blobs, and the read-model database path."""

    def __init__(self, path: Path, events: EventStore, blobs: BlobStore) -> None:
        self.path = path
        self.events = events
        self.blobs = blobs

    @property
    def read_only(self) -> bool:
        """Opened from read-only media (or without write permission): appends are refused."""
        return bool(getattr(self.events, "read_only", False))

    @property
    def read_models_path(self) -> Path:
        return self.path / "read-models.duckdb"

    def close(self) -> None:
        self.events.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def event_log(store: Store | EventStore) -> EventStore:
    """The event log of ``store``: a ``Store``'s ``events``, or the ``EventStore`` itself
    (for readers such as the folds that take either)."""
    return store.events if isinstance(store, Store) else store


def open_store(path: str | os.PathLike[str] | None = None, *, create: bool = False) -> Store:
    """Open the store at ``path`` (resolved as above); with ``create``, make it if missing."""
    root = resolve_store_path(path)
    database = root / "events.db"
    if not database.exists():
        if not create:
            raise StoreError(
                f"no store at {root} (create one with `evopolicy record --store {root} create`, "
                f"or point --store or {STORE_ENV} at an existing one)"
            )
        root.mkdir(parents=True, exist_ok=True)
    elif not root.is_dir():
        raise StoreError(f"{root} is not a directory")
    # Imported here: naming a Store (a type) does not import a backend and SQLAlchemy.
    from evopolicygym.records.sqlite import SQLiteEventStore

    read_only = database.exists() and not _writable(root, database)
    if read_only and create:
        raise StoreError(f"the store at {root} is read-only: nothing can be recorded in it")
    events = SQLiteEventStore(database, create=create, read_only=read_only)
    return Store(root, events, BlobStore(root / "blobs"))


def _writable(root: Path, database: Path) -> bool:
    """Whether this process may write the store: not on read-only media, and the log and its
    directory writable to it (os.access asks as the real user, and knows EROFS)."""
    return os.access(root, os.W_OK | os.X_OK) and os.access(database, os.W_OK)
