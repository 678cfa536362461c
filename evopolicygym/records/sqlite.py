"""The embedded event store: one SQLite file in WAL mode, durable and append-only.

The tables are ``records.tables``' models; their DDL as SQLAlchemy compiles it for
SQLite is kept here (``_SCHEMA``; a test holds the two equal), so neither creating nor
opening a log imports SQLAlchemy, SQLModel or pydantic. What the models cannot say is
added here: triggers refusing UPDATE and DELETE on the log, WAL and ``synchronous=FULL``.
One ``sqlite3`` connection per store object. Every write runs in ``BEGIN IMMEDIATE``
(one writer at a time, across processes, waiting up to the busy timeout).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

from evopolicygym.records.chain import GENESIS
from evopolicygym.records.events import Envelope, NewEvent, payload_hash
from evopolicygym.records.store import (
    ANY_VERSION,
    FORMAT_VERSION,
    STREAM_PAGE,
    ExpectedVersionError,
    Row,
    StoreError,
    StreamInfo,
    chained_rows,
    check_event_sizes,
    prefix_upper_bound,
    retried_positions,
)

__all__ = ["SQLiteEventStore", "read_only_connection"]

BUSY_TIMEOUT_MS = 30_000

_APPEND_ONLY = (
    "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END",
)
# records.tables' models compiled for SQLite (CreateTable/CreateIndex, if_not_exists).
_SCHEMA = (
    "\nCREATE TABLE IF NOT EXISTS events (\n\tposition INTEGER NOT NULL, \n\tstream_id VARCHAR NOT "
    "NULL, "
    "\n\tstream_version INTEGER NOT NULL, \n\tevent_id VARCHAR NOT NULL, \n\ttype VARCHAR NOT "
    "NULL, "
    "\n\tschema_version INTEGER NOT NULL, \n\trecorded_at BIGINT NOT NULL, \n\tpayload BLOB NOT "
    "NULL, "
    "\n\tpayload_hash VARCHAR(64) NOT NULL, \n\tprev_hash VARCHAR(64) NOT NULL, \n\thash "
    "VARCHAR(64) NOT NULL, "
    "\n\tPRIMARY KEY (position), \n\tCONSTRAINT stream_version_unique UNIQUE (stream_id, "
    "stream_version), "
    "\n\tUNIQUE (event_id)\n)\n\n",
    '\nCREATE TABLE IF NOT EXISTS store_meta (\n\t"key" VARCHAR NOT NULL, \n\tvalue VARCHAR NOT '
    "NULL, "
    '\n\tPRIMARY KEY ("key")\n)\n\n',
)
# The events table's columns are the envelope's fields, in order (tables.EventRecord).
_COLUMNS = ", ".join(Envelope.__struct_fields__)


def _not_a_database(exc: sqlite3.Error) -> bool:
    """SQLite's own word that a file is no SQLite database (its header is not one's).

    The header is read through SQLite, never with a file of this process's own: SQLite's
    locks are POSIX (fcntl) locks, which closing any descriptor of the file drops, every
    connection's of this process included; another process would then take this one's
    log for closed, checkpoint it and delete the write-ahead log it still appends to."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB


def _create(path: Path) -> None:
    """A new, complete log at ``path`` (unless another process made one meanwhile): built
    aside and linked into place, so no reader ever opens a log without its tables."""
    statements = _SCHEMA
    aside = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.new")
    try:
        connection = sqlite3.connect(aside, isolation_level=None)
        try:
            connection.execute("PRAGMA journal_mode = WAL")  # a property of the file, set once
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("BEGIN IMMEDIATE")
            for statement in (*statements, *_APPEND_ONLY):
                connection.execute(statement)
            connection.execute(
                "INSERT INTO store_meta (key, value) VALUES ('format_version', ?)",
                (str(FORMAT_VERSION),),
            )
            connection.execute("COMMIT")
        finally:
            connection.close()  # checkpoints the WAL into the file and removes it
        try:
            os.link(aside, path)  # fails if a log appeared meanwhile: that one stands
        except FileExistsError:
            if path.stat().st_size == 0:  # an empty file is no log
                os.replace(aside, path)
        except OSError:  # a filesystem without hard links: a rename, checked first
            if not path.exists() or path.stat().st_size == 0:
                os.replace(aside, path)
        _fsync_dir(path.parent)
    finally:
        for leftover in (
            aside,
            aside.with_name(aside.name + "-wal"),
            aside.with_name(aside.name + "-shm"),
        ):
            leftover.unlink(missing_ok=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_only_connection(path: Path, what: str, *, live: bool = False) -> sqlite3.Connection:
    """A SQLite file in WAL mode opened for reading on media this process may not write.
    Immutable (no lock, no -shm file needed) unless its writer left commits in the
    write-ahead log, which an immutable open would not see (the last events of a Host that
    died, or the blobs they name): then read through the log, or refuse, saying why. A file
    that is no database at all is SQLite's ``DatabaseError``, for the caller to name.
    ``live``: never immutable, so commits other processes make later are read too (a reader
    beside running Hosts, such as ``evopolicy view``); SQLite may make its -shm file."""
    uri = "file:" + quote(str(path.resolve()))
    wal = path.with_name(path.name + "-wal")
    options = {
        "uri": True,
        "timeout": BUSY_TIMEOUT_MS / 1000,
        "isolation_level": None,
        "check_same_thread": False,
    }
    if not live and not (wal.exists() and wal.stat().st_size > 0):
        return sqlite3.connect(uri + "?mode=ro&immutable=1", **options)  # type: ignore[arg-type]
    conn = sqlite3.connect(uri + "?mode=ro", **options)  # type: ignore[arg-type]
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        conn.close()
        if _not_a_database(exc):
            raise  # no database at all: for the caller to say so
        raise StoreError(
            f"{what} {path} holds commits only in its write-ahead log (its writer did not close "
            f"it), which cannot be read here ({exc}): open the store once where it is writable"
        ) from exc
    return conn


class SQLiteEventStore:
    """The EventStore contract on one SQLite file. Thread-safe; many processes may share it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        read_only: bool = False,
        live: bool = False,
    ) -> None:
        """``read_only`` with ``live``: reads see what other processes append meanwhile."""
        self.path = Path(path)
        # On read-only media (or a file this user may not write) the log is opened
        # immutable: SQLite then needs neither its -shm file nor a lock, and reads work;
        # every append is refused with one line.
        self.read_only = read_only
        if not create and not self.path.exists():
            raise StoreError(f"no event log at {self.path}")
        if not self.path.parent.is_dir():
            raise StoreError(f"{self.path.parent} is not a directory")
        if create and (not self.path.exists() or self.path.stat().st_size == 0):
            try:
                _create(self.path)
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(f"{self.path}: cannot create the event log ({exc})") from exc
        self._lock = threading.RLock()
        # One connection per store object, used under our lock: SQLite serialises writers
        # anyway, and a single connection keeps reads of our own writes simple.
        raw: sqlite3.Connection | None = None
        try:
            if read_only:
                raw = read_only_connection(self.path, "the event log", live=live)
            else:
                raw = sqlite3.connect(
                    self.path,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
            raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            raw.execute("PRAGMA synchronous = FULL")
            with self._lock:
                self._raw: sqlite3.Connection = raw
                self._check_format()
        except BaseException as exc:
            if raw is not None:
                raw.close()
            if isinstance(exc, sqlite3.Error) and _not_a_database(exc):
                raise StoreError(
                    f"{self.path} is not an EvoPolicyGym event log (not an SQLite file)"
                ) from exc
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"{self.path}: cannot open the event log ({exc})") from exc
            raise

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Reads under the lock; a damaged file is a StoreError naming it, not a traceback."""
        with self._lock:
            try:
                yield
            except sqlite3.DatabaseError as exc:
                raise StoreError(
                    f"{self.path}: the event log cannot be read ({exc}); run 'evopolicy record "
                    "verify'"
                ) from exc

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction: BEGIN IMMEDIATE takes the write lock up front."""
        if self.read_only:
            raise StoreError(f"{self.path.parent} is read-only: nothing can be recorded in it")
        with self._lock:
            cursor = self._raw.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
            except BaseException:
                self._raw.rollback()
                raise
            else:
                cursor.execute("COMMIT")
            finally:
                cursor.close()

    def _check_format(self) -> None:
        try:
            row = self._raw.execute(
                "SELECT value FROM store_meta WHERE key = 'format_version'"
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            if _not_a_database(exc):
                raise  # said as __init__ says it
            raise StoreError(f"{self.path} is not an EvoPolicyGym event log ({exc})") from exc
        if row is None:
            raise StoreError(f"{self.path} is not an EvoPolicyGym event log (no format version)")
        found = int(row[0])
        if found > FORMAT_VERSION:
            raise StoreError(
                f"{self.path} has log format {found}; this version reads up to {FORMAT_VERSION}"
            )
        if found < FORMAT_VERSION:
            raise StoreError(f"{self.path} has log format {found}; upgrade it explicitly first")

    # ----------------------------------------------------------------- the contract

    def append(
        self, stream_id: str, events: Sequence[NewEvent], expected_version: int
    ) -> list[int]:
        if not stream_id or len(stream_id) > 200:
            raise ValueError("stream_id must be a non-empty string of at most 200 characters")
        if not events:
            return []
        ids = [e.event_id for e in events]
        if len(set(ids)) != len(ids):
            raise ValueError("an append names the same event id twice")
        check_event_sizes(events)  # the whole append refused before anything is written
        hashes = [payload_hash(e.payload) for e in events]
        with self._write() as cursor:
            marks = ",".join("?" * len(ids))
            existing = cursor.execute(
                "SELECT event_id, position, stream_id, type, schema_version, payload_hash FROM "
                f"events WHERE event_id IN ({marks})",
                ids,
            ).fetchall()
            if existing:
                return retried_positions(stream_id, events, hashes, existing)
            current = cursor.execute(
                "SELECT COALESCE(MAX(stream_version), 0) FROM events WHERE stream_id = ?",
                (stream_id,),
            ).fetchone()[0]
            if expected_version != ANY_VERSION and current != expected_version:
                raise ExpectedVersionError(stream_id, expected_version, current)
            last = cursor.execute(
                "SELECT position, hash FROM events ORDER BY position DESC LIMIT 1"
            ).fetchone()
            position, prev = last if last else (0, GENESIS)
            now = time.time_ns()
            rows, positions = chained_rows(stream_id, events, hashes, current, position, prev, now)
            cursor.executemany(
                f"INSERT INTO events ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows
            )
        return positions

    def read_stream(
        self, stream_id: str, from_version: int = 0, limit: int | None = None
    ) -> Iterator[Envelope]:
        version, left = from_version, limit
        while left is None or left > 0:
            page = STREAM_PAGE if left is None else min(left, STREAM_PAGE)
            with self._reading():
                rows = self._raw.execute(
                    f"SELECT {_COLUMNS} FROM events WHERE stream_id = ? AND stream_version > ? "
                    "ORDER BY stream_version LIMIT ?",
                    (stream_id, version, page),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield Envelope.from_row(row)
            version = rows[-1][2]
            left = None if left is None else left - len(rows)

    def read_all(self, from_position: int = 0, limit: int = 1000) -> list[Envelope]:
        return [Envelope.from_row(row) for row in self.read_all_rows(from_position, limit)]

    def read_all_rows(self, from_position: int = 0, limit: int = 1000) -> list[Row]:
        with self._reading():
            return self._raw.execute(
                f"SELECT {_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?",
                (from_position, limit),
            ).fetchall()

    def read_event_rows(self, from_position: int = 0, limit: int = 10_000) -> list[Row]:
        with self._reading():
            return self._raw.execute(
                "SELECT position, stream_id, stream_version, type, schema_version, payload FROM "
                "events "
                "WHERE position > ? ORDER BY position LIMIT ?",
                (from_position, limit),
            ).fetchall()

    def integrity_problems(self) -> list[str]:
        """SQLite's ``PRAGMA quick_check`` of the file (its pages and indexes)."""
        try:
            with self._lock:
                rows = self._raw.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            return [f"the database file is damaged: {exc}"]
        messages = [str(row[0]) for row in rows]
        return (
            [] if messages == ["ok"] else [f"the database file is damaged: {m}" for m in messages]
        )

    def head(self) -> int:
        with self._reading():
            row = self._raw.execute("SELECT MAX(position) FROM events").fetchone()
        return int(row[0] or 0)

    def streams(self, prefix: str = "") -> list[StreamInfo]:
        with self._reading():
            upper = prefix_upper_bound(prefix) if prefix else None
            if upper is not None:
                # A range on the unique (stream_id, stream_version) index, not a LIKE scan.
                rows = self._raw.execute(
                    "SELECT stream_id, MAX(stream_version) FROM events WHERE stream_id >= ? AND "
                    "stream_id < ? GROUP BY stream_id ORDER BY stream_id",
                    (prefix, upper),
                ).fetchall()
            elif prefix:
                rows = self._raw.execute(
                    "SELECT stream_id, MAX(stream_version) FROM events WHERE stream_id >= ? AND "
                    "substr(stream_id, 1, ?) = ? GROUP BY stream_id ORDER BY stream_id",
                    (prefix, len(prefix), prefix),
                ).fetchall()
            else:
                rows = self._raw.execute(
                    "SELECT stream_id, MAX(stream_version) FROM events GROUP BY stream_id ORDER BY "
                    "stream_id"
                ).fetchall()
        return [StreamInfo(stream_id, version) for stream_id, version in rows]

    def close(self) -> None:
        with self._lock:
            self._raw.close()

    def __enter__(self) -> SQLiteEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
