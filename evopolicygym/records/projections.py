"""Projections: state derived from the log, caught up into DuckDB, atomic per batch.

A ``Projection`` is a name, a version, the tables it owns and two functions:
``create`` makes its (empty) tables, ``apply`` writes one ``Batch`` of the log
into them. ``catch_up`` polls the store from each projection's checkpoint and
applies page after page; every page is one DuckDB transaction that holds both
the rows it wrote and the advanced checkpoints in ``projection_checkpoints``,
so a crash or an error keeps either all of a page or none of it.

A projection whose version differs from its checkpoint (or whose tables are
missing, or whose checkpoint no longer matches the log) is dropped and rebuilt
from position 0. Events of an unknown type or with an undecodable payload never
stop the runner: a projection simply does not see them, and they are counted in
the checkpoint's ``skipped`` column. So are events a projection declines
(``Batch.skip``) and events on which its ``apply`` fails with a data error
(``DATA_ERRORS``: a value out of range, a conversion DuckDB refuses): the page
is rolled back and split until the failing event is alone, and that event is
then committed without the projection that failed on it. Any other error (a
bug, a full disk) rolls the page back and propagates.

A page holds at most ``batch`` events and, past its first event, at most
``max_bytes`` of payload; how many events are read per query adapts to the
payload sizes seen, so large events (long Agent transcripts) do not make a
catch-up hold hundreds of megabytes.

A ``Batch`` is columnar on purpose: projections build Python lists and hand
them to DuckDB as one Arrow table per page (``insert_arrow``), which is what
makes a million events catch up in seconds.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import functools
import gc
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import duckdb
import msgspec
import pyarrow as pa

from evopolicygym.records.events import EVENT_TYPES, Envelope, Event, EventCodecError, decode_event
from evopolicygym.records.fold import page_reader
from evopolicygym.records.location import Store
from evopolicygym.records.runs import run_id_of
from evopolicygym.records.store import EventStore, Row

__all__ = [
    "CHECKPOINTS",
    "DATA_ERRORS",
    "DEFAULT_BATCH",
    "PAGE_BYTES",
    "Batch",
    "Projection",
    "catch_up",
    "checkpoints",
    "insert_arrow",
    "registered",
]

log = logging.getLogger(__name__)

CHECKPOINTS = "projection_checkpoints"
DEFAULT_BATCH = 10_000
PAGE_BYTES = 32 * 1024 * 1024  # payload bytes per page (a page always holds one event)
_FIRST_READ = 100  # events in the first read of a catch-up, before any size is known

# What a projection raises on a value it cannot store (an integer out of range, a string
# DuckDB refuses): a bad event, not a broken runner. ValueError covers pyarrow's
# ArrowInvalid and UnicodeError; ArithmeticError covers OverflowError.
DATA_ERRORS: tuple[type[BaseException], ...] = (
    ArithmeticError,
    ValueError,
    TypeError,
    pa.ArrowException,
    duckdb.ConversionException,
    duckdb.OutOfRangeException,
    duckdb.InvalidInputException,
    duckdb.TypeMismatchException,
    duckdb.ConstraintException,
)

Connection = duckdb.DuckDBPyConnection


# --------------------------------------------------------------------------- a page of the log


class _Page:
    """The columns of one page read from the store, and its events decoded once, by type."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = rows
        columns = list(zip(*rows, strict=True))
        self.positions: Sequence[int] = columns[0]
        self.stream_ids: Sequence[str] = columns[1]
        self.stream_versions: Sequence[int] = columns[2]
        self.event_ids: Sequence[str] = columns[3]
        self.types: Sequence[str] = columns[4]
        self.schema_versions: Sequence[int] = columns[5]
        self.recorded_at: Sequence[int] = columns[6]
        self.payloads: Sequence[bytes] = columns[7]
        self.payload_hashes: Sequence[str] = columns[8]
        self.prev_hashes: Sequence[str] = columns[9]
        self.hashes: Sequence[str] = columns[10]
        self.last_hash: str = rows[-1][10]
        self.by_type: dict[str, list[int]] = {}
        for i, kind in enumerate(self.types):
            found = self.by_type.get(kind)
            if found is None:
                self.by_type[kind] = [i]
            else:
                found.append(i)
        runs = {stream: run_id_of(stream) for stream in set(self.stream_ids)}
        self.run_ids: Sequence[str | None] = [runs[stream] for stream in self.stream_ids]
        self.decoded: dict[str, list[tuple[int, Event]]] = {}
        self.failed: dict[str, list[tuple[int, str]]] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def decode(self, kind: str) -> list[tuple[int, Event]]:
        """The decodable events of one type as ``(index, event)``, in order; failures noted."""
        done = self.decoded.get(kind)
        if done is not None:
            return done
        rows = self.by_type.get(kind, [])
        failed: list[tuple[int, str]] = []
        cls = EVENT_TYPES.get(kind)
        if cls is None:
            decoded: list[tuple[int, Event]] = []
            failed = [(i, f"unknown event type {kind!r}") for i in rows]
        else:
            current = [i for i in rows if self.schema_versions[i] == cls.SCHEMA_VERSION]
            bulk = _decode_many(cls, current, self.payloads)
            if bulk is None:  # some payload is bad: find it one event at a time
                current, bulk = [], []
            decoded = bulk
            if len(current) < len(rows):
                done_rows = set(current)
                for i in rows:
                    if i in done_rows:
                        continue
                    try:
                        decoded.append(
                            (i, decode_event(kind, self.schema_versions[i], self.payloads[i]))
                        )
                    except EventCodecError as exc:
                        failed.append((i, str(exc)))
                decoded.sort(key=_first)
        self.decoded[kind] = decoded
        self.failed[kind] = failed
        return decoded


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]


_LIST_DECODERS: dict[type[Event], msgspec.json.Decoder[Any]] = {}


def _decode_many(
    cls: type[Event], rows: list[int], payloads: Sequence[bytes]
) -> list[tuple[int, Event]] | None:
    """Current-version payloads decoded in one call (a JSON array of them); None if any is bad."""
    if not rows:
        return []
    decoder = _LIST_DECODERS.get(cls)
    if decoder is None:
        decoder = _LIST_DECODERS[cls] = msgspec.json.Decoder(list[cls])  # type: ignore[valid-type]
    try:
        events = decoder.decode(b"[" + b",".join([payloads[i] for i in rows]) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(events) != len(rows):  # a payload that was itself a list of objects
        return None
    return list(zip(rows, events, strict=True))


class Batch:
    """Consecutive events of the log as columns (``positions``, ``stream_ids``, …).

    ``events(types)`` gives the decoded events of those types as ``(i, event)``
    pairs, ``i`` indexing the columns; undecodable events are left out.
    ``run_ids`` holds each event's Run id (None off a ``run-`` stream).
    ``skip(i, reason)`` declines an event the projection cannot represent (a key
    out of range): it is counted in the checkpoint's ``skipped``, like an
    undecodable one.

    ``scratch`` is a dict the projection may keep things in from one batch to
    the next within one ``catch_up`` (such as rows it wrote, to skip re-reading
    them); ``fresh`` says its tables were empty when that catch-up began, so
    whatever it wrote since is all there is.
    """

    def __init__(
        self,
        page: _Page,
        start: int = 0,
        scratch: dict[str, Any] | None = None,
        fresh: bool = False,
    ) -> None:
        self._page = page
        self._start = start
        self.scratch: dict[str, Any] = {} if scratch is None else scratch
        self.fresh = fresh
        self.positions = page.positions[start:] if start else page.positions
        self.stream_ids = page.stream_ids[start:] if start else page.stream_ids
        self.stream_versions = page.stream_versions[start:] if start else page.stream_versions
        self.event_ids = page.event_ids[start:] if start else page.event_ids
        self.types = page.types[start:] if start else page.types
        self.schema_versions = page.schema_versions[start:] if start else page.schema_versions
        self.recorded_at = page.recorded_at[start:] if start else page.recorded_at  # ns
        self.payloads = page.payloads[start:] if start else page.payloads
        self.run_ids = page.run_ids[start:] if start else page.run_ids
        self.declined: list[tuple[int, str]] = []  # (position, reason), from skip()

    def __len__(self) -> int:
        return len(self.positions)

    def skip(self, i: int, reason: str) -> None:
        """Note that the event at column index ``i`` could not be projected at all."""
        self.declined.append((self.positions[i], reason))

    def envelopes(self) -> list[Envelope]:
        """The batch as ``Envelope`` objects, for projections that prefer them to columns."""
        page, start = self._page, self._start
        return [
            Envelope(
                position=page.positions[i],
                stream_id=page.stream_ids[i],
                stream_version=page.stream_versions[i],
                event_id=page.event_ids[i],
                type=page.types[i],
                schema_version=page.schema_versions[i],
                recorded_at=page.recorded_at[i],
                payload=page.payloads[i],
                payload_hash=page.payload_hashes[i],
                prev_hash=page.prev_hashes[i],
                hash=page.hashes[i],
            )
            for i in range(start, len(page.positions))
        ]

    @property
    def first(self) -> int:
        return self.positions[0]

    @property
    def last(self) -> int:
        return self.positions[-1]

    def events(self, types: Iterable[str]) -> list[tuple[int, Event]]:
        """The decodable events of ``types``, in log order, with their column index."""
        lists = [self._page.decode(kind) for kind in sorted(set(types))]
        lists = [found for found in lists if found]
        if not lists:
            return []
        merged = lists[0] if len(lists) == 1 else sorted(itertools.chain(*lists), key=_first)
        start = self._start
        if not start:
            return merged
        cut = bisect.bisect_left(merged, start, key=_first)
        return [(i - start, event) for i, event in merged[cut:]]

    def skipped(self, types: Iterable[str] | None) -> int:
        """How many events of ``types`` (None: of any type) this batch could not decode.

        With ``types=None`` only unknown types are counted: nothing is decoded."""
        page, start = self._page, self._start
        if types is None:
            return sum(
                sum(1 for i in rows if i >= start)
                for kind, rows in page.by_type.items()
                if kind not in EVENT_TYPES
            )
        total = 0
        for kind in set(types):
            page.decode(kind)
            total += sum(1 for i, _ in page.failed[kind] if i >= start)
        return total

    def failures(self) -> list[tuple[int, str]]:
        """``(position, error)`` of every event this batch tried and failed to decode."""
        page, start = self._page, self._start
        found = [(i, error) for failed in page.failed.values() for i, error in failed if i >= start]
        return sorted((page.positions[i], error) for i, error in found)


# --------------------------------------------------------------------------- projections


@dataclass(frozen=True)
class Projection:
    """A named, versioned function from batches of the log to DuckDB tables it owns.

    ``types`` are the event types ``apply`` decodes (None: it reads raw columns
    only); they decide what ``skipped`` counts. Bump ``version`` whenever the
    tables or the meaning of their rows change: the next catch-up rebuilds."""

    name: str
    version: int
    tables: tuple[str, ...]
    create: Callable[[Connection], None]
    apply: Callable[[Connection, Batch], None]
    types: frozenset[str] | None = None


@contextlib.contextmanager
def registered(connection: Connection, view: str, data: pa.Table) -> Iterator[None]:
    """``data`` as the view ``view`` of ``connection`` while the block runs.

    When the block fails inside a transaction, DuckDB refuses even the unregistering
    ("Current transaction is aborted") until the transaction is rolled back: that must not
    hide the error that failed the block, which is the one to report (and which decides
    whether the event behind it is skipped). A view left registered is replaced by the
    next ``register`` of its name."""
    connection.register(view, data)
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            connection.unregister(view)
        raise
    connection.unregister(view)


def insert_arrow(connection: Connection, table: str, data: pa.Table, select: str = "*") -> None:
    """``INSERT INTO table SELECT <select> FROM data`` in one vectorised statement."""
    view = f"__epg_{table}_batch"
    with registered(connection, view, data):
        connection.execute(f"INSERT INTO {table} SELECT {select} FROM {view}")


def _create_checkpoints(connection: Connection) -> None:
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {CHECKPOINTS} ("
        "name VARCHAR PRIMARY KEY, version INTEGER NOT NULL, position BIGINT NOT NULL, "
        "last_hash VARCHAR, skipped BIGINT NOT NULL DEFAULT 0, updated_at TIMESTAMP)"
    )


def checkpoints(connection: Connection) -> dict[str, tuple[int, int, int]]:
    """``{name: (version, position, skipped)}`` for every projection caught up here."""
    exists = connection.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main'",
        [CHECKPOINTS],
    ).fetchone()
    if not exists or not exists[0]:
        return {}
    rows = connection.execute(
        f"SELECT name, version, position, skipped FROM {CHECKPOINTS}"
    ).fetchall()
    return {name: (version, position, skipped) for name, version, position, skipped in rows}


def _tables_present(connection: Connection, tables: Sequence[str]) -> bool:
    if not tables:
        return True
    row = connection.execute(
        "SELECT count(DISTINCT table_name) FROM duckdb_tables() "
        "WHERE schema_name = 'main' AND list_contains(?, table_name)",
        [list(tables)],
    ).fetchone()
    return row is not None and row[0] == len(set(tables))


def _transaction(connection: Connection, work: Callable[[], None]) -> None:
    connection.execute("BEGIN TRANSACTION")
    try:
        work()
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # the original error is the one to report
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _start(
    connection: Connection,
    projection: Projection,
    found: tuple[int, int, str | None] | None,
    read: Callable[[int, int], list[Row]],
) -> int:
    """Where ``projection`` resumes; drops and recreates its tables when it must rebuild."""
    if found is not None:
        version, position, last_hash = found
        reason = None
        if version != projection.version:
            reason = f"version {version} -> {projection.version}"
        elif not _tables_present(connection, projection.tables):
            reason = "tables missing"
        elif position > 0:
            at = read(position - 1, 1)
            if not at or at[0][0] != position or at[0][10] != last_hash:
                reason = f"the log no longer holds the event at position {position}"
        if reason is None:
            return position
        log.info("rebuilding projection %s (%s)", projection.name, reason)

    def rebuild() -> None:
        for table in projection.tables:
            connection.execute(f"DROP TABLE IF EXISTS {table}")
        projection.create(connection)
        connection.execute(f"DELETE FROM {CHECKPOINTS} WHERE name = ?", [projection.name])
        connection.execute(
            f"INSERT INTO {CHECKPOINTS} (name, version, position, last_hash, skipped, updated_at) "
            "VALUES (?, ?, 0, NULL, 0, ?)",
            [projection.name, projection.version, _utc_now()],
        )

    _transaction(connection, rebuild)
    return 0


def catch_up(
    store: Store | EventStore,
    connection: Connection,
    projections: Sequence[Projection],
    batch: int = DEFAULT_BATCH,
    *,
    max_bytes: int = PAGE_BYTES,
) -> int:
    """Apply the log to ``projections`` from their checkpoints; return the position reached.

    ``store`` is a ``Store`` or an ``EventStore`` (read with ``read_all_rows``).
    Each page (at most ``batch`` events and, past its first event, ``max_bytes``
    of payload) is one DuckDB transaction covering every projection's rows and
    checkpoint."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    if max_bytes < 1:
        raise ValueError("max_bytes must be at least 1")
    names = [p.name for p in projections]
    if len(set(names)) != len(names):
        raise ValueError("two projections share a name")
    read = page_reader(store)
    _create_checkpoints(connection)
    stored = {
        name: (version, position, last_hash)
        for name, version, position, last_hash in connection.execute(
            f"SELECT name, version, position, last_hash FROM {CHECKPOINTS}"
        ).fetchall()
    }
    at = {p.name: _start(connection, p, stored.get(p.name), read) for p in projections}
    if not projections:
        return 0
    return _CatchUp(read, connection, projections, at, batch, max_bytes).run()


class _CatchUp:
    """One ``catch_up`` from the projections' starting positions ``at`` (updated as pages
    commit): reading and decoding the next pages in a thread while this one is written."""

    def __init__(
        self,
        read: Callable[[int, int], list[Row]],
        connection: Connection,
        projections: Sequence[Projection],
        at: dict[str, int],
        batch: int,
        max_bytes: int,
    ) -> None:
        self.read = read
        self.connection = connection
        self.projections = projections
        self.at = at
        self.batch = batch
        self.max_bytes = max_bytes
        # Every type any projection decodes is decoded once per page, while the page before
        # it is being written: reading and decoding overlap DuckDB's inserts and commits.
        self.wanted = sorted(set().union(*(p.types or () for p in projections)))
        self.fresh = {name: position == 0 for name, position in at.items()}
        self.scratch: dict[str, dict[str, Any]] = {name: {} for name in at}
        self.failing: str | None = None  # the projection whose apply is running

    def run(self) -> int:
        limit = min(self.batch, _FIRST_READ)
        with _gc_paused(), ThreadPoolExecutor(1, thread_name_prefix="catch-up") as reader:
            ahead = reader.submit(self.fetch, min(self.at.values()), limit)
            while True:
                pages, count, size = ahead.result()
                if not pages:
                    break
                more = count == limit
                if more:
                    limit = self.next_limit(count, size)
                    ahead = reader.submit(self.fetch, pages[-1].positions[-1], limit)
                while pages:
                    self.settle(pages.pop(0))  # popped: a committed page is freed at once
                if not more:
                    break
        return min(self.at.values())

    def fetch(self, position: int, limit: int) -> tuple[list[_Page], int, int]:
        """The next ``limit`` events as pages of at most ``max_bytes`` of payload each;
        also how many events and payload bytes were read."""
        rows = self.read(position, limit)
        if not rows:
            return [], 0, 0
        pages: list[_Page] = []
        first = total = 0
        for i, row in enumerate(rows):
            size = len(row[_PAYLOAD])
            if i > first and total + size > self.max_bytes:
                pages.append(_Page(rows[first:i]))
                first, total = i, 0
            total += size
        pages.append(_Page(rows[first:] if first else rows))
        for page in pages:
            for kind in self.wanted:
                page.decode(kind)
        return pages, len(rows), sum(len(row[_PAYLOAD]) for row in rows)

    def next_limit(self, count: int, size: int) -> int:
        """Events to read next: about ``max_bytes`` at the payload size just seen."""
        if size <= 0:
            return self.batch
        return max(1, min(self.batch, int(self.max_bytes * count / size)))

    def forget(self) -> None:
        """After a rollback, rows remembered from the rolled-back page may be wrong."""
        for name in self.scratch:
            self.scratch[name] = {}
            self.fresh[name] = False

    def apply_page(self, page: _Page, excluded: dict[str, str], declined: list[Any]) -> None:
        first, last = page.positions[0], page.positions[-1]
        done: list[tuple[str, int]] = []
        for projection in self.projections:
            name = projection.name
            start = self.at[name]
            if start >= last:
                continue
            cut = 0 if start < first else bisect.bisect_right(page.positions, start)
            if name in excluded:  # a page of one event, which this projection failed on
                done.append((name, len(page) - cut))
                continue
            view = Batch(page, cut, self.scratch[name], self.fresh[name])
            self.failing = name
            projection.apply(self.connection, view)
            self.failing = None
            declined.extend((name, *found) for found in view.declined)
            done.append((name, view.skipped(projection.types) + len(view.declined)))
        if done:
            marks = ", ".join("(?, ?)" for _ in done)
            self.connection.execute(
                f"UPDATE {CHECKPOINTS} SET position = ?, last_hash = ?, "
                f"skipped = {CHECKPOINTS}.skipped + done.skipped, updated_at = ? "
                f"FROM (VALUES {marks}) AS done(name, skipped) "
                f"WHERE {CHECKPOINTS}.name = done.name",
                [last, page.last_hash, _utc_now(), *itertools.chain(*done)],
            )

    def settle(self, page: _Page) -> None:
        """Commit ``page``; on a data error, split it until the bad event is alone."""
        excluded: dict[str, str] = {}
        while True:
            declined: list[tuple[str, int, str]] = []
            try:
                _transaction(
                    self.connection,
                    functools.partial(self.apply_page, page, excluded, declined),
                )
                break
            except DATA_ERRORS as exc:
                name, self.failing = self.failing, None
                if name is None:  # not in a projection: nothing to blame on an event
                    raise
                self.forget()
                if len(page) > 1:
                    half = len(page) // 2
                    self.settle(_Page(page.rows[:half]))
                    self.settle(_Page(page.rows[half:]))
                    return
                excluded[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        _report_skipped(Batch(page), declined, excluded)
        for name in self.at:
            self.at[name] = max(self.at[name], page.positions[-1])


_PAYLOAD = 7  # the payload's index in a row (envelope field order)


def _utc_now() -> dt.datetime:
    """Now, as a UTC TIMESTAMP (naive, like every TIMESTAMP in the read models)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Bulk loading makes millions of acyclic objects; the cyclic GC would scan them all."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _report_skipped(
    batch: Batch,
    declined: Sequence[tuple[str, int, str]] = (),
    excluded: dict[str, str] | None = None,
) -> None:
    failures = batch.failures()
    unknown = batch.skipped(None)
    if failures or unknown:
        log.warning(
            "positions %d..%d: %d events of unknown types, %d undecodable%s",
            batch.first,
            batch.last,
            unknown,
            len(failures),
            f" (first at {failures[0][0]}: {failures[0][1]})" if failures else "",
        )
    for name, position, reason in declined:
        log.warning("projection %s skipped the event at position %d: %s", name, position, reason)
    for name, error in (excluded or {}).items():
        log.warning(
            "projection %s skipped the event at position %d: it failed on it (%s)",
            name,
            batch.first,
            error,
        )
