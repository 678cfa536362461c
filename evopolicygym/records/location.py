"""Where a store lives and how it is opened: ``events.db`` beside a ``blobs/`` directory,
or a PostgreSQL database (``postgresql://…``) holding both the log and the blobs.

The location comes from ``--store DIR|URL``, else ``EVOPOLICY_STORE``, else
``./evopolicy-store``. Creating a store is explicit (``create=True``) and safe
when two processes do it at once; opening a missing store is an error that
says how to create one. ``open_store`` is the one place that picks the log's
backend; everything else types against the ``EventStore`` contract.

A PostgreSQL store still has a local directory (``Store.path``): a cache under
``$XDG_CACHE_HOME/evopolicygym/stores/`` named for the URL (its password left out),
holding what is rebuilt from the log (the read models) and what belongs to this
machine (Run locks, Agent workspaces). Messages name the URL with its password masked.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from evopolicygym.records.blobs import FileBlobStore
from evopolicygym.records.store import BlobStore, EventStore, StoreError

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "Store",
    "StoreUrl",
    "event_log",
    "is_store_url",
    "open_store",
    "resolve_store",
    "resolve_store_path",
    "store_exists",
]

DEFAULT_STORE = "evopolicy-store"
STORE_ENV = "EVOPOLICY_STORE"
_URL_SCHEMES = ("postgresql://", "postgres://")


def is_store_url(value: object) -> bool:
    """Whether ``value`` names a PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return isinstance(value, str | StoreUrl) and str(_raw(value)).startswith(_URL_SCHEMES)


def _raw(value: object) -> object:
    return value.url if isinstance(value, StoreUrl) else value


class StoreUrl:
    """A PostgreSQL store's URL. ``str()`` masks its password (every message prints it so);
    ``url`` is the whole URL, for connecting."""

    __slots__ = ("url",)

    def __init__(self, url: str) -> None:
        if not url.startswith(_URL_SCHEMES):
            raise ValueError(f"a store URL starts with postgresql://, not {_mask(url)!r}")
        self.url = url

    def __str__(self) -> str:
        return _mask(self.url)

    def __repr__(self) -> str:
        return f"StoreUrl({_mask(self.url)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoreUrl) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __truediv__(self, name: str) -> Path:
        """A path in this machine's directory for the store (``cache_dir``): where a
        directory store's files would be, none of which holds the log or the blobs here."""
        return self.cache_dir / name

    @property
    def cache_dir(self) -> Path:
        """This machine's directory for the store: named for the URL without its password,
        so the same database reached with another password shares it."""
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        name = hashlib.sha256(_without_password(self.url).encode()).hexdigest()[:24]
        return Path(base) / "evopolicygym" / "stores" / name


def _netloc(url: str, password: str | None) -> tuple[str, str] | None:
    """``url`` with its password replaced by ``password`` (None: dropped), and the original
    URL, or None when it has no password."""
    parts = urlsplit(url)
    if parts.password is None:
        return None
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    netloc = f"{name}:{password}@{host}" if password is not None else f"{name}@{host}"
    return urlunsplit(parts._replace(netloc=netloc)), url


def _mask(url: str) -> str:
    try:
        swapped = _netloc(url, "***")
    except ValueError:  # not parseable as a URL: show its scheme alone
        return url.partition("://")[0] + "://…"
    masked = swapped[0] if swapped is not None else url
    # A password may also come as a query parameter (?password=…).
    head, sep, query = masked.partition("?")
    if sep:
        params = [
            f"{key}=***" if key.lower() == "password" else f"{key}{eq}{value}"
            for key, eq, value in (item.partition("=") for item in query.split("&"))
        ]
        masked = head + "?" + "&".join(params)
    return masked


def _without_password(url: str) -> str:
    try:
        swapped = _netloc(url, None)
    except ValueError:
        return url
    stripped = swapped[0] if swapped is not None else url
    head, sep, query = stripped.partition("?")
    if sep:
        kept = [item for item in query.split("&") if item.partition("=")[0].lower() != "password"]
        stripped = head + ("?" + "&".join(kept) if kept else "")
    return stripped


def resolve_store(option: str | os.PathLike[str] | StoreUrl | None = None) -> Path | StoreUrl:
    """The store ``option`` names, else ``$EVOPOLICY_STORE``, else ``./evopolicy-store``:
    a ``StoreUrl`` for a PostgreSQL URL, else a directory."""
    if isinstance(option, StoreUrl):
        return option
    value: str | os.PathLike[str] = option or os.environ.get(STORE_ENV) or DEFAULT_STORE
    if isinstance(value, str) and value.startswith(_URL_SCHEMES):
        return StoreUrl(value)
    return Path(value)


def resolve_store_path(option: str | os.PathLike[str] | None = None) -> Path:
    """The store directory, for callers that need one: a PostgreSQL URL is refused
    (``StoreError``) rather than read as a path, where a store would silently be made;
    ``resolve_store`` resolves either kind."""
    location = resolve_store(option)
    if isinstance(location, StoreUrl):
        raise StoreError(
            f"the PostgreSQL store {location} cannot be used here: give a store directory"
        )
    return location


def store_exists(location: str | os.PathLike[str] | StoreUrl | None = None) -> bool:
    """Whether a store is at ``location`` (resolved as above); for a URL, whether its
    database holds a store's tables (a server that cannot be reached counts as one, so
    opening it reports why)."""
    resolved = resolve_store(location)
    if isinstance(resolved, Path):
        return (resolved / "events.db").exists()
    try:
        open_store(resolved).close()
    except StoreError as exc:
        # Only a database without the store's tables is "no store": any other failure
        # (no server, refused) is left for the open that follows to report as it is.
        return not str(exc).startswith(("no event log", "no blob tables"))
    return True


class Store:
    """One store: the event log, the blobs, and a local directory for the read models.

    ``location`` is what names it (the directory, or the ``StoreUrl`` whose ``str`` masks
    its password); ``path`` is the local directory (a URL store's cache directory)."""

    def __init__(
        self,
        path: Path,
        events: EventStore,
        blobs: BlobStore,
        location: Path | StoreUrl | None = None,
    ) -> None:
        self.path = path
        self.events = events
        self.blobs = blobs
        self.location: Path | StoreUrl = location if location is not None else path

    @property
    def url(self) -> StoreUrl | None:
        """The PostgreSQL store's URL, or None for a store directory."""
        return self.location if isinstance(self.location, StoreUrl) else None

    @property
    def read_only(self) -> bool:
        """Opened from read-only media (or without write permission): appends are refused."""
        return bool(getattr(self.events, "read_only", False))

    @property
    def read_models_path(self) -> Path:
        return self.path / "read-models.duckdb"

    def close(self) -> None:
        try:
            self.events.close()
        finally:
            self.blobs.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def event_log(store: Store | EventStore) -> EventStore:
    """The event log of ``store``: a ``Store``'s ``events``, or the ``EventStore`` itself
    (for readers such as the folds that take either)."""
    return store.events if isinstance(store, Store) else store


def open_store(
    path: str | os.PathLike[str] | StoreUrl | None = None,
    *,
    create: bool = False,
    reader: bool = False,
) -> Store:
    """Open the store at ``path`` (resolved as above); with ``create``, make it if missing.
    ``reader``: to read only, while other processes may record (``evopolicy view``): a store
    directory's log and blob pack are opened read-only yet see later commits, so this process
    can neither append nor write a blob, nor checkpoint the log when it closes."""
    location = resolve_store(path)
    if isinstance(location, StoreUrl):
        return _open_url(location, create=create)
    root = location
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
    # On read-only media nothing else records: the immutable open then needs no -shm file.
    live = reader and not read_only
    read_only = read_only or reader
    events = SQLiteEventStore(database, create=create, read_only=read_only, live=live)
    blobs = FileBlobStore(root / "blobs", pack=True, read_only=read_only, live=live)
    return Store(root, events, blobs)


def _open_url(location: StoreUrl, *, create: bool) -> Store:
    """A PostgreSQL store: its log and blobs in the database, its cache on this machine."""
    # Imported here: only a postgresql:// store pays for psycopg.
    from evopolicygym.records.pgblobs import PgBlobStore
    from evopolicygym.records.postgres import PostgresEventStore

    try:
        events = PostgresEventStore(location.url, create=create)
    except StoreError as exc:
        raise StoreError(_masked(str(exc), location)) from None
    except Exception as exc:  # psycopg's own errors (no server, refused, no database)
        raise StoreError(
            f"cannot open the store at {location}: {_masked(str(exc), location)}"
        ) from None
    try:
        blobs = PgBlobStore(location.url, create=create, display=str(location))
    except BaseException:
        events.close()
        raise
    cache = location.cache_dir
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        events.close()
        blobs.close()
        raise StoreError(
            f"cannot make the local cache {cache} of the store at {location}: {exc}"
        ) from exc
    return Store(cache, events, blobs, location)


def _masked(message: str, location: StoreUrl) -> str:
    """``message`` with the URL's password, if it appears, masked (a driver may echo it)."""
    try:
        password = urlsplit(location.url).password
    except ValueError:
        password = None
    message = message.replace(location.url, str(location))
    return message.replace(password, "***") if password else message


def _writable(root: Path, database: Path) -> bool:
    """Whether this process may write the store: not on read-only media, and the log and its
    directory writable to it (os.access asks as the real user, and knows EROFS)."""
    return os.access(root, os.W_OK | os.X_OK) and os.access(database, os.W_OK)
