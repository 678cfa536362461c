"""The shared event store: the log in a PostgreSQL database, durable and append-only.

The tables are ``records.tables``' models, created from their metadata in one
transaction under an advisory lock (two processes creating at once both succeed);
triggers refuse UPDATE, DELETE and TRUNCATE on the log. Every append runs in one
transaction that first takes an advisory lock of its own store: appends are
serialized, so a position is the last one plus one, read after the previous
append committed. That keeps positions gap-free (a rolled-back append leaves no
hole, unlike a sequence) and in commit order (a reader polling ``read_all`` from
its last position never skips a later-visible smaller one). Reads take no lock.

Connections go through SQLAlchemy's psycopg dialect; the hot paths run on the
psycopg cursor (binary results, COPY for batches). A dropped connection is
reopened and the operation tried once more: an append is safe to retry because
a retried append of the same event ids is a no-op that returns their positions.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Self

import psycopg
import sqlalchemy.exc
from psycopg import errors as pg_errors
from psycopg import pq
from sqlalchemy import create_engine, event
from sqlalchemy.dialects.postgresql import dialect as postgresql_dialect
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.schema import CreateIndex, CreateTable

from evopolicygym.records.chain import GENESIS
from evopolicygym.records.events import Envelope, NewEvent, payload_hash
from evopolicygym.records.store import (
    ANY_VERSION,
    FORMAT_VERSION,
    STREAM_PAGE,
    DuplicateEventError,
    ExpectedVersionError,
    Row,
    StoreError,
    StreamInfo,
    chained_rows,
    check_event_sizes,
    prefix_upper_bound,
    retried_positions,
)

__all__ = ["PostgresEventStore", "is_postgres_url"]

# Advisory lock keys (64-bit): one for creating a schema in a database, and a namespace
# whose low 32 bits are the events table's oid, so each store serializes only its own appends.
_CREATE_LOCK = 0x45504731_00000000
_APPEND_LOCK_SPACE = 0x45504732
_COLUMNS = ", ".join(Envelope.__struct_fields__)
_TRIGGER_FUNCTION = (
    "CREATE OR REPLACE FUNCTION evopolicy_events_append_only() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the event log is append-only' "
    "USING ERRCODE = 'restrict_violation'; END $$"
)
_TRIGGERS = {
    "events_no_update": "BEFORE UPDATE ON events FOR EACH ROW",
    "events_no_delete": "BEFORE DELETE ON events FOR EACH ROW",
    "events_no_truncate": "BEFORE TRUNCATE ON events FOR EACH STATEMENT",
}
# Above this many events an append writes them with COPY; a few rows go faster as INSERTs.
_COPY_FROM = 8
# Session settings: an append waits at most this long for the append lock (SQLite's busy
# timeout), and a writer idle inside its transaction (a stopped process, a lost client) is
# cut off by the server, so it cannot hold every other writer's appends forever.
_SESSION = ("SET lock_timeout = '30s'", "SET idle_in_transaction_session_timeout = '60s'")


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` (a --store value) names a PostgreSQL store."""
    return isinstance(location, str) and location.startswith(
        ("postgresql://", "postgres://", "postgresql+psycopg://")
    )


def _driver_url(url: str) -> URL:
    parsed = make_url(
        url.replace("postgres://", "postgresql://", 1) if url.startswith("postgres://") else url
    )
    if parsed.get_backend_name() != "postgresql":
        raise StoreError(
            f"{parsed.render_as_string(hide_password=True)} is not a postgresql:// URL"
        )
    return parsed.set(drivername="postgresql+psycopg")


def _configure(dbapi_connection: psycopg.Connection[Any], _record: Any) -> None:
    dbapi_connection.autocommit = True  # so the settings are not rolled back with a transaction
    for statement in _SESSION:
        dbapi_connection.execute(statement)


def _broken(exc: BaseException, raw: psycopg.Connection[Any] | None) -> bool:
    """The connection is gone (the server ended it, the network dropped), or left where no
    statement can run on it: worth one reconnect. A backend ended in the middle of an
    append's pipeline can leave the client in pipeline mode ("cannot exit pipeline mode while
    busy") without marking the connection broken: kept, it failed every later append."""
    if raw is not None and (
        raw.closed or raw.broken or raw.pgconn.pipeline_status != pq.PipelineStatus.OFF
    ):
        return True
    return isinstance(
        exc, pg_errors.AdminShutdown | pg_errors.ConnectionFailure | pg_errors.CannotConnectNow
    )


class PostgresEventStore:
    """The EventStore contract on one PostgreSQL database (its current schema). Thread-safe;
    many processes on many machines may share it."""

    def __init__(self, url: str, *, create: bool = False, read_only: bool = False) -> None:
        self._url = _driver_url(url)
        self.url = self._url.set(drivername="postgresql").render_as_string(hide_password=True)
        self.read_only = read_only
        self._lock = threading.RLock()
        # One connection per store object, used under our lock (as the SQLite store does);
        # autocommit, so a read is its own statement and never holds a snapshot open.
        self.engine: Engine = create_engine(
            self._url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0
        )
        event.listen(self.engine, "connect", _configure)
        self._conn: Connection | None = None
        try:
            with self._lock:
                self._connect(create)
                if create:
                    self._create()
                self._check_format()
                self._detect_read_only()
                if create and self.read_only:
                    raise StoreError(f"{self.url} is read-only: nothing can be recorded in it")
        except BaseException as exc:
            self._drop_connection()
            self.engine.dispose()
            if isinstance(exc, sqlalchemy.exc.SQLAlchemyError | psycopg.Error):
                raise StoreError(
                    f"{self.url}: cannot open the event log ({_first_line(exc)})"
                ) from exc
            raise

    # ----------------------------------------------------------------- connections

    def _connect(self, create: bool = False) -> None:
        try:
            self._conn = self.engine.connect()
        except sqlalchemy.exc.OperationalError as exc:
            if not isinstance(
                exc.orig, pg_errors.InvalidCatalogName | psycopg.OperationalError
            ) or "does not exist" not in str(exc.orig):
                raise StoreError(
                    f"{self.url}: cannot connect ({_first_line(exc.orig or exc)})"
                ) from exc
            if not create:
                raise StoreError(
                    f"no event log at {self.url} (the database does not exist)"
                ) from exc
            self._create_database()
            self._conn = self.engine.connect()
        self._raw: psycopg.Connection[Any] = self._conn.connection.driver_connection  # type: ignore[assignment]
        self._raw.autocommit = True

    def _create_database(self) -> None:
        """CREATE DATABASE from the server's maintenance database; another creator's is as good."""
        name = self._url.database
        if not name:
            raise StoreError(f"{self.url} names no database")
        admin = (
            self._url.set(database="postgres")
            .set(drivername="postgresql")
            .render_as_string(hide_password=False)
        )
        try:
            with psycopg.connect(admin, autocommit=True) as connection:
                connection.execute(
                    psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name))
                )
        except (pg_errors.DuplicateDatabase, pg_errors.UniqueViolation):
            pass
        except psycopg.Error as exc:
            raise StoreError(
                f"{self.url}: cannot create the database ({_first_line(exc)})"
            ) from exc

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.invalidate()
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _reconnect(self) -> None:
        self._drop_connection()
        try:
            self._connect()
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise StoreError(
                f"{self.url}: the connection was lost and cannot be reopened ({_first_line(exc)})"
            ) from exc

    def _run(self, work: Callable[[psycopg.Connection[Any]], Any], what: str) -> Any:
        """``work`` on the connection under the lock; a dropped connection is reopened and
        ``work`` tried once more (it must be safe to repeat: reads, and appends by their ids)."""
        with self._lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._reconnect()
                try:
                    return work(self._raw)
                except StoreError:
                    raise
                except psycopg.Error as exc:
                    if _broken(exc, self._raw) and attempt == 1:
                        self._drop_connection()
                        continue
                    if _broken(exc, self._raw):
                        self._drop_connection()
                    raise self._error(exc, what) from exc
        raise AssertionError("unreachable")

    def _error(self, exc: psycopg.Error, what: str) -> StoreError:
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction | pg_errors.InsufficientPrivilege):
            return StoreError(f"{self.url} is read-only: nothing can be recorded in it")
        if isinstance(exc, pg_errors.UndefinedTable):
            return StoreError(f"no event log at {self.url} (its tables are missing)")
        return StoreError(f"{self.url}: cannot {what} ({_first_line(exc)})")

    # ----------------------------------------------------------------- schema

    def _create(self) -> None:
        """The schema and its triggers, in one transaction under a database-wide advisory lock:
        racing creators wait for each other, and the second finds everything in place."""
        from evopolicygym.records.tables import LogModel  # only creating needs the models

        dialect = postgresql_dialect()
        statements: list[str] = []
        for table in LogModel.metadata.sorted_tables:
            statements.append(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
            statements.extend(
                str(CreateIndex(i, if_not_exists=True).compile(dialect=dialect))
                for i in table.indexes
            )
        raw = self._raw
        try:
            with raw.transaction():
                raw.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                if raw.execute("SELECT to_regclass('store_meta')").fetchone() == (None,):
                    for statement in statements:
                        raw.execute(statement)
                    raw.execute(_TRIGGER_FUNCTION)
                    for name, when in _TRIGGERS.items():
                        raw.execute(
                            f"CREATE TRIGGER {name} {when} EXECUTE FUNCTION "
                            "evopolicy_events_append_only()"
                        )
                    raw.execute(
                        "INSERT INTO store_meta (key, value) VALUES ('format_version', %s) ON "
                        "CONFLICT DO NOTHING",
                        (str(FORMAT_VERSION),),
                    )
        except (pg_errors.ReadOnlySqlTransaction, pg_errors.InsufficientPrivilege) as exc:
            if raw.execute("SELECT to_regclass('store_meta')").fetchone() == (None,):
                raise StoreError(
                    f"{self.url} is read-only: no event log can be created in it"
                ) from exc
            raise StoreError(f"{self.url} is read-only: nothing can be recorded in it") from exc

    def _check_format(self) -> None:
        raw = self._raw
        if raw.execute("SELECT to_regclass('store_meta'), to_regclass('events')").fetchone() == (
            None,
            None,
        ):
            raise StoreError(f"no event log at {self.url}")
        try:
            row = raw.execute(
                "SELECT value FROM store_meta WHERE key = 'format_version'"
            ).fetchone()
        except psycopg.Error as exc:
            raise StoreError(
                f"{self.url} is not an EvoPolicyGym event log ({_first_line(exc)})"
            ) from exc
        if row is None:
            raise StoreError(f"{self.url} is not an EvoPolicyGym event log (no format version)")
        found = int(row[0])
        if found > FORMAT_VERSION:
            raise StoreError(
                f"{self.url} has log format {found}; this version reads up to {FORMAT_VERSION}"
            )
        if found < FORMAT_VERSION:
            raise StoreError(f"{self.url} has log format {found}; upgrade it explicitly first")
        oid = raw.execute("SELECT 'events'::regclass::oid::bigint").fetchone()
        if oid is None:
            raise StoreError(f"{self.url} is not an EvoPolicyGym event log (no events table)")
        self._append_lock = (_APPEND_LOCK_SPACE << 32) | int(oid[0])

    def _detect_read_only(self) -> None:
        """A read-only database (default_transaction_read_only, a standby) or a role that may
        not insert: appends are refused up front, as on a read-only SQLite store."""
        row = self._raw.execute(
            "SELECT current_setting('transaction_read_only') = 'on' OR pg_is_in_recovery() "
            "OR NOT has_table_privilege('events', 'INSERT')"
        ).fetchone()
        if row is not None and row[0]:
            self.read_only = True

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
        if "\x00" in stream_id or any("\x00" in e.event_id or "\x00" in e.type for e in events):
            raise ValueError("stream and event ids and types may not hold NUL characters")
        check_event_sizes(events)  # the whole append refused before anything is written
        if self.read_only:
            raise StoreError(f"{self.url} is read-only: nothing can be recorded in it")
        hashes = [payload_hash(e.payload) for e in events]

        def work(raw: psycopg.Connection[Any]) -> list[int]:
            with raw.transaction(), raw.cursor() as cursor:
                return self._append(cursor, stream_id, events, hashes, expected_version)

        try:
            positions: list[int] = self._run(work, "append")
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, pg_errors.UniqueViolation):
                # Only a writer that does not take the append lock can get here.
                raise DuplicateEventError(
                    f"the append collides with events already in the log ({_first_line(cause)})"
                ) from cause
            raise
        return positions

    def _append(
        self,
        cursor: psycopg.Cursor[Any],
        stream_id: str,
        events: Sequence[NewEvent],
        hashes: list[str],
        expected_version: int,
    ) -> list[int]:
        # Serialize appends to this store: every read below sees every append committed before.
        # The lock and both reads go in one round trip (a pipeline): each statement still
        # runs after the one before, so the reads see what committed before the lock.
        connection = cursor.connection
        with connection.pipeline():
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (self._append_lock,))
            found = connection.execute(
                "SELECT event_id, position, stream_id, type, schema_version, payload_hash FROM "
                "events WHERE event_id = ANY(%s)",
                ([e.event_id for e in events],),
            )
            state = connection.execute(
                "SELECT (SELECT COALESCE(MAX(stream_version), 0) FROM events WHERE stream_id = "
                "%s), "
                "last.position, last.hash FROM (SELECT 1) one "
                "LEFT JOIN (SELECT position, hash FROM events ORDER BY position DESC LIMIT 1) last "
                "ON true",
                (stream_id,),
            )
        existing = found.fetchall()
        if existing:
            return retried_positions(stream_id, events, hashes, existing)
        current, position, prev = state.fetchone() or (0, None, None)
        if expected_version != ANY_VERSION and current != expected_version:
            raise ExpectedVersionError(stream_id, expected_version, current)
        position = position or 0
        prev = prev or GENESIS
        now = time.time_ns()
        rows, positions = chained_rows(stream_id, events, hashes, current, position, prev, now)
        if len(rows) >= _COPY_FROM:
            with cursor.copy(f"COPY events ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(_COPY_TYPES)
                for row in rows:
                    copy.write_row(row)
        else:
            cursor.executemany(
                f"INSERT INTO events ({_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows
            )
        self._inside_append(cursor)
        return positions

    def _inside_append(self, cursor: psycopg.Cursor[Any]) -> None:
        """Called with an append's rows written and its transaction still open (the lock
        held): a seam for tests that hold a transaction open or drop the connection there."""

    def read_stream(
        self, stream_id: str, from_version: int = 0, limit: int | None = None
    ) -> Iterator[Envelope]:
        version, left = from_version, limit
        while left is None or left > 0:
            page = STREAM_PAGE if left is None else min(left, STREAM_PAGE)
            rows = self._select(
                f"SELECT {_COLUMNS} FROM events WHERE stream_id = %s AND stream_version > %s ORDER "
                "BY stream_version LIMIT %s",
                (stream_id, version, page),
            )
            if not rows:
                return
            for row in rows:
                yield Envelope.from_row(row)
            version = rows[-1][2]
            left = None if left is None else left - len(rows)

    def read_all(self, from_position: int = 0, limit: int = 1000) -> list[Envelope]:
        return [Envelope.from_row(row) for row in self.read_all_rows(from_position, limit)]

    def read_all_rows(self, from_position: int = 0, limit: int = 1000) -> list[Row]:
        return self._select(
            f"SELECT {_COLUMNS} FROM events WHERE position > %s ORDER BY position LIMIT %s",
            (from_position, limit),
        )

    def read_event_rows(self, from_position: int = 0, limit: int = 10_000) -> list[Row]:
        return self._select(
            "SELECT position, stream_id, stream_version, type, schema_version, payload FROM events "
            "WHERE position > %s ORDER BY position LIMIT %s",
            (from_position, limit),
        )

    def _select(self, query: str, args: tuple[Any, ...] = ()) -> list[Row]:
        def work(raw: psycopg.Connection[Any]) -> list[Row]:
            # Binary results: a payload arrives as bytes, not as hex text to decode.
            with raw.cursor(binary=True) as cursor:
                return cursor.execute(query, args).fetchall()

        rows: list[Row] = self._run(work, "read the event log")
        return rows

    def head(self) -> int:
        row = self._select("SELECT MAX(position) FROM events")
        return int(row[0][0] or 0)

    def streams(self, prefix: str = "") -> list[StreamInfo]:
        # stream_id is of the "C" collation (tables.EventRecord): code point order, as in
        # SQLite, and a prefix is a range on the (stream_id, stream_version) index.
        if prefix:
            upper = prefix_upper_bound(prefix)
            if upper is not None:
                rows = self._select(
                    "SELECT stream_id, MAX(stream_version) FROM events WHERE stream_id >= %s AND "
                    "stream_id < %s "
                    "GROUP BY stream_id ORDER BY stream_id",
                    (prefix, upper),
                )
            else:
                rows = self._select(
                    "SELECT stream_id, MAX(stream_version) FROM events WHERE stream_id >= %s AND "
                    "starts_with(stream_id, %s) "
                    "GROUP BY stream_id ORDER BY stream_id",
                    (prefix, prefix),
                )
        else:
            rows = self._select(
                "SELECT stream_id, MAX(stream_version) FROM events GROUP BY stream_id ORDER BY "
                "stream_id"
            )
        return [StreamInfo(stream_id, version) for stream_id, version in rows]

    def integrity_problems(self) -> list[str]:
        """The database's own state of the log: its indexes valid, its append-only triggers in
        place and enabled, and (where the amcheck extension is installed) its B-tree indexes."""
        try:
            indexes = self._select(
                "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = "
                "i.indexrelid "
                "WHERE i.indrelid = 'events'::regclass ORDER BY c.relname"
            )
            triggers: dict[str, str] = dict(
                self._select(
                    "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'events'::regclass "
                    "AND NOT tgisinternal"
                )
            )
            amcheck = self._select("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'")
        except StoreError as exc:
            return [f"the database cannot be checked: {exc}"]
        problems = [f"index {name} is invalid" for name, valid in indexes if not valid]
        for name in _TRIGGERS:
            state = triggers.get(name)
            if state is None:
                problems.append(
                    f"the append-only trigger {name} is missing: the log can be changed"
                )
            elif state == "D":
                problems.append(
                    f"the append-only trigger {name} is disabled: the log can be changed"
                )
        if amcheck:
            for name, valid in indexes:
                if valid:
                    try:
                        self._select("SELECT bt_index_check(%s::regclass)", (name,))
                    except StoreError as exc:
                        problems.append(f"index {name} is damaged: {exc}")
        return problems

    def close(self) -> None:
        with self._lock:
            self._drop_connection()
            self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_COPY_TYPES = [
    "bigint",
    "text",
    "integer",
    "text",
    "text",
    "integer",
    "bigint",
    "bytea",
    "text",
    "text",
    "text",
]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
