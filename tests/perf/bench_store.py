"""Event store throughput against raw SQLite, fold speed and analytic queries, measured in one run.

Prints: raw sqlite3 ``executemany`` events/s on the store's own schema (WAL,
synchronous=FULL, batches of 100, one commit each, no chain and no checks); our
durable ``append`` events/s in batches of 100 and one event at a time; their
ratio; folding the whole log with ``iter_events`` (events/s, beside the two row
fetches alone and Envelope decoding for scale); ``verify_store`` on the bare log
(no blob store, so no blob checks) events/s; and a ``GROUP BY type`` over the
log in DuckDB (from a pyarrow table) beside the same query in SQLite. Targets:
batch append >= 0.5 x raw; iter_events >= 500k events/s; the DuckDB GROUP BY
<= 100 ms at 1M events.

Then the same for PostgreSQL (``--postgres URL``, default the local server; each
figure in a database of its own, dropped at the end): raw ``executemany`` and raw
``COPY`` of the same rows into the same table (batches of 100, one commit each, no
triggers, no lock, no chain, no checks) against our durable ``append`` in batches of
100, the three taking turns (target >= 0.5 x the faster raw), single-event appends, the
fold, and 8 writer processes appending at once: total events/s, and the log checked for
gaps, duplicates and its chain afterwards.

Run: uv run python tests/perf/bench_store.py [--events 1000000] [--postgres URL | --no-postgres]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.schema import CreateTable

from evopolicygym.records.events import EpisodeCompleted, NewEvent, new_event
from evopolicygym.records.fold import iter_events, iter_rows
from evopolicygym.records.sqlite import SQLiteEventStore
from evopolicygym.records.store import ANY_VERSION, EventStore
from evopolicygym.records.tables import EventRecord
from evopolicygym.records.verify import verify_store

BATCH = 100
COLUMNS = (
    "position, stream_id, stream_version, event_id, type, schema_version, recorded_at, "
    "payload, payload_hash, prev_hash, hash"
)


def episodes(count: int, prefix: str, start: int = 0) -> list[NewEvent]:
    """Small realistic events: what an evaluation writes once per Episode."""
    return [
        new_event(
            EpisodeCompleted(
                submission_id=(start + i) // 20,
                index=(start + i) % 20,
                status="ok" if i % 17 else "error",
                total_reward=round(((start + i) * 7919 % 5000) / 10, 1),
                steps=(start + i) * 31 % 500,
                failure=None if i % 17 else "policy raised ValueError",
                duration_s=0.0123,
                output_tail="",
            ),
            f"{prefix}-{start + i}",
        )
        for i in range(count)
    ]


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>12,.0f} events/s  ({count:,} in {seconds:.2f} s)"


def median_ms(fn: Callable[[], Any], repeats: int = 5) -> float:
    fn()  # warm caches once; the figure is the median of the timed runs
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def bench_raw(path: Path, events: list[NewEvent]) -> float:
    """The floor: the same table, constraints and durability, prepared rows, no chain, no checks."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(str(CreateTable(EventRecord.__table__).compile(dialect=sqlite_dialect.dialect())))
    zero = "0" * 64
    now = time.time_ns()
    rows = [
        (
            i + 1,
            "raw",
            i + 1,
            e.event_id,
            e.type,
            e.schema_version,
            now,
            e.payload,
            zero,
            zero,
            zero,
        )
        for i, e in enumerate(events)
    ]
    insert = f"INSERT INTO events ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
    start = time.perf_counter()
    for offset in range(0, len(rows), BATCH):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(insert, rows[offset : offset + BATCH])
        conn.execute("COMMIT")
    seconds = time.perf_counter() - start
    conn.close()
    return seconds


def bench_append(store: EventStore, events: list[NewEvent], size: int, stream: str) -> float:
    start = time.perf_counter()
    version = 0
    for offset in range(0, len(events), size):
        chunk = events[offset : offset + size]
        store.append(stream, chunk, version)
        version += len(chunk)
    return time.perf_counter() - start


def build(store: EventStore, count: int, per_call: int = 1_000, streams: int = 100) -> float:
    start = time.perf_counter()
    for offset in range(0, count, per_call):
        n = min(per_call, count - offset)
        store.append(
            f"run-{(offset // per_call) % streams:03d}", episodes(n, "e", offset), ANY_VERSION
        )
    return time.perf_counter() - start


def fetch_only(read: Callable[[int, int], list[tuple[Any, ...]]], batch: int = 10_000) -> int:
    """Rows of every page of ``read`` (a row reader of the store), nothing done with them."""
    count = position = 0
    while rows := read(position, batch):
        count += len(rows)
        position = rows[-1][0]
    return count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to fold and query")
    parser.add_argument(
        "--append-events", type=int, default=100_000, help="events for append vs raw"
    )
    parser.add_argument("--single", type=int, default=2_000, help="single-event appends")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build (default: a temp dir)"
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "EVOPOLICY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
        help="a PostgreSQL server's URL whose user may create databases",
    )
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument(
        "--writers", type=int, default=8, help="concurrent PostgreSQL writer processes"
    )
    parser.add_argument(
        "--writer-events", type=int, default=5_000, help="events each concurrent writer appends"
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=args.dir) as tmp:
        root = Path(tmp)
        print(f"SQLite {sqlite3.sqlite_version}, in {root}")

        # ----------------------------------------------------------- append vs raw
        events = episodes(args.append_events, "a")
        raw_s = bench_raw(root / "raw.db", events)
        print(f"raw executemany, batches of {BATCH}: {rate(len(events), raw_s)}")
        with SQLiteEventStore(root / "append.db", create=True) as store:
            batch_s = bench_append(store, events, BATCH, "batched")
            print(f"append, batches of {BATCH}:          {rate(len(events), batch_s)}")
            singles = episodes(args.single, "s")
            single_s = bench_append(store, singles, 1, "single")
            print(f"append, single events:           {rate(len(singles), single_s)}")
        ratio = raw_s / batch_s
        target = "met" if ratio >= 0.5 else "MISSED"
        print(f"batch append / raw: {ratio:.2f}  (target >= 0.5: {target})")

        # ----------------------------------------------------------- folding
        path = root / "events.db"
        with SQLiteEventStore(path, create=True) as store:
            build_s = build(store, args.events)
            print(f"built {args.events:,} events, 1,000 per append: {build_s:.1f} s")

            start = time.perf_counter()
            rows = sum(1 for _ in iter_rows(store))
            rows_s = time.perf_counter() - start
            print(f"read_all_rows alone (no decoding):  {rate(rows, rows_s)}")

            start = time.perf_counter()
            rows = fetch_only(store.read_event_rows)
            rows_s = time.perf_counter() - start
            print(f"read_event_rows alone (no decoding):{rate(rows, rows_s)}")

            start = time.perf_counter()
            folded = 0
            reward = 0.0
            for _position, _stream, _version, event in iter_events(store):
                folded += 1
                reward += event.total_reward  # type: ignore[attr-defined]
            fold_s = time.perf_counter() - start
            target = "met" if folded / fold_s >= 500_000 else "MISSED"
            print(f"iter_events fold:                   {rate(folded, fold_s)}", end="")
            print(f"  (target >= 500k: {target})")

            start = time.perf_counter()
            enveloped = 0
            position = 0
            while page := store.read_all(position, 10_000):
                for envelope in page:
                    envelope.event()
                    enveloped += 1
                position = page[-1].position
            env_s = time.perf_counter() - start
            print(f"read_all + Envelope.event():        {rate(enveloped, env_s)}")

            start = time.perf_counter()
            report = verify_store(store)
            verify_s = time.perf_counter() - start
            print(f"verify_store (no blobs):            {rate(args.events, verify_s)}", end="")
            print(f"  problems={len(report.problems)}")

        # ----------------------------------------------------------- analytics
        import duckdb
        import pyarrow as pa

        duckdb.connect().close()  # the first connect loads the library: not part of the figure
        start = time.perf_counter()
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        columns: list[list[Any]] = [[], [], [], []]
        cursor = conn.execute(
            "SELECT position, stream_id, type, recorded_at FROM events ORDER BY position"
        )
        while chunk := cursor.fetchmany(100_000):
            for column, values in zip(columns, zip(*chunk, strict=True), strict=True):
                column.extend(values)
        table = pa.table(
            {
                "position": pa.array(columns[0], pa.int64()),
                "stream_id": pa.array(columns[1], pa.string()),
                "type": pa.array(columns[2], pa.string()),
                "recorded_at": pa.array(columns[3], pa.int64()),
            }
        )
        duck = duckdb.connect()
        duck.register("arrow_events", table)
        duck.execute("CREATE TABLE events AS SELECT * FROM arrow_events")
        load_s = time.perf_counter() - start
        print(f"DuckDB table from {table.num_rows:,} rows via pyarrow: {load_s:.2f} s")

        query = "SELECT type, count(*) FROM events GROUP BY type ORDER BY type"
        duck_ms = median_ms(lambda: duck.execute(query).fetchall())
        sqlite_ms = median_ms(lambda: conn.execute(query).fetchall())
        assert duck.execute(query).fetchall() == conn.execute(query).fetchall()
        target = "met" if duck_ms <= 100 else "MISSED"
        print(f"GROUP BY type, DuckDB: {duck_ms:8.1f} ms median of 5  (target <= 100 ms: {target})")
        print(f"GROUP BY type, SQLite: {sqlite_ms:8.1f} ms median of 5")
        duck.close()
        conn.close()

    if not args.no_postgres:
        bench_postgres(args)


# --------------------------------------------------------------------------- PostgreSQL


class Databases:
    """Databases of the benchmark's own on the server, each dropped at the end."""

    def __init__(self, server: str) -> None:
        import psycopg

        self.server = server
        self.admin = psycopg.connect(server, autocommit=True)
        self.names: list[str] = []

    def new(self) -> str:
        from sqlalchemy.engine import make_url

        name = f"evopolicy_bench_{uuid.uuid4().hex[:16]}"
        self.admin.execute(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        return make_url(self.server).set(database=name).render_as_string(hide_password=False)

    def close(self) -> None:
        for name in self.names:
            self.admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.admin.close()


class PgRaw:
    """The floor: the same table and constraints, prepared rows, one commit per batch of
    100, by ``executemany`` or by ``COPY``; no triggers, no lock, no chain, no checks."""

    TYPES = (
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
    )

    def __init__(self, url: str, copy: bool) -> None:
        import psycopg
        from sqlalchemy.dialects import postgresql

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(
            str(
                CreateTable(EventRecord.metadata.tables["events"]).compile(
                    dialect=postgresql.dialect()
                )
            )
        )
        self.copy = copy
        self.position = 0

    def write(self, events: list[NewEvent]) -> float:
        zero = "0" * 64
        now = time.time_ns()
        rows = [
            (
                self.position + i + 1,
                "raw",
                self.position + i + 1,
                e.event_id,
                e.type,
                e.schema_version,
                now,
                e.payload,
                zero,
                zero,
                zero,
            )
            for i, e in enumerate(events)
        ]
        self.position += len(rows)
        insert = f"INSERT INTO events ({COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
        start = time.perf_counter()
        for offset in range(0, len(rows), BATCH):
            with self.conn.transaction(), self.conn.cursor() as cursor:
                if self.copy:
                    with cursor.copy(
                        f"COPY events ({COLUMNS}) FROM STDIN (FORMAT BINARY)"
                    ) as stream:
                        stream.set_types(list(self.TYPES))
                        for row in rows[offset : offset + BATCH]:
                            stream.write_row(row)
                else:
                    cursor.executemany(insert, rows[offset : offset + BATCH])
        return time.perf_counter() - start


def _writer(url: str, worker: int, count: int, size: int, go: Any, ready: Any, out: Any) -> None:
    """One concurrent writer process: ``count`` events in appends of ``size``, half to its
    own stream (with its expected version), half to a stream all writers share."""
    from evopolicygym.records.postgres import PostgresEventStore

    with PostgresEventStore(url) as store:
        events = episodes(count, f"w{worker}")
        ready.put(worker)
        go.wait()
        start = time.perf_counter()
        own = 0
        for n, offset in enumerate(range(0, count, size)):
            chunk = events[offset : offset + size]
            if n % 2:
                store.append("shared", chunk, ANY_VERSION)
            else:
                store.append(f"writer-{worker}", chunk, own)
                own += len(chunk)
        out.put((worker, time.perf_counter() - start))


def bench_postgres(args: argparse.Namespace) -> None:
    import multiprocessing

    try:
        databases = Databases(args.postgres)
    except Exception as exc:  # no server: say so, the SQLite figures stand
        print(f"PostgreSQL: not measured ({str(exc).strip().splitlines()[0]})")
        return
    from evopolicygym.records.postgres import PostgresEventStore

    try:
        version = databases.admin.execute("SHOW server_version").fetchone()
        durability = databases.admin.execute(
            "SELECT current_setting('fsync'), current_setting('synchronous_commit')"
        ).fetchone()
        assert version is not None and durability is not None
        print(
            f"PostgreSQL {version[0]} (fsync={durability[0]}, synchronous_commit={durability[1]})"
        )

        # The three writers take turns, a tenth of the events each turn, so a change in the
        # machine's load (it is shared) falls on all three alike.
        events = episodes(args.append_events, "a")
        many, copy = PgRaw(databases.new(), copy=False), PgRaw(databases.new(), copy=True)
        url = databases.new()
        many_s = copy_s = batch_s = 0.0
        with PostgresEventStore(url, create=True) as store:
            turn = max(BATCH, len(events) // 10 // BATCH * BATCH)
            for offset in range(0, len(events), turn):
                chunk = events[offset : offset + turn]
                many_s += many.write(chunk)
                copy_s += copy.write(chunk)
                start = time.perf_counter()
                for at in range(0, len(chunk), BATCH):
                    store.append("batched", chunk[at : at + BATCH], offset + at)
                batch_s += time.perf_counter() - start
            many.conn.close()
            copy.conn.close()
            print(f"raw executemany, batches of {BATCH}: {rate(len(events), many_s)}")
            print(f"raw COPY, batches of {BATCH}:        {rate(len(events), copy_s)}")
            print(f"append, batches of {BATCH}:          {rate(len(events), batch_s)}")
            singles = episodes(args.single, "s")
            single_s = bench_append(store, singles, 1, "single")
            print(f"append, single events:           {rate(len(singles), single_s)}")
            ratio = min(many_s, copy_s) / batch_s
            target = "met" if ratio >= 0.5 else "MISSED"
            print(f"batch append / faster raw: {ratio:.2f}  (target >= 0.5: {target})")

            start = time.perf_counter()
            rows = fetch_only(store.read_event_rows)
            rows_s = time.perf_counter() - start
            print(f"read_event_rows alone (no decoding):{rate(rows, rows_s)}")
            start = time.perf_counter()
            folded = sum(1 for _ in iter_events(store))
            fold_s = time.perf_counter() - start
            print(f"iter_events fold:                   {rate(folded, fold_s)}")

        # ----------------------------------------------------------- concurrent writers
        url = databases.new()
        PostgresEventStore(url, create=True).close()
        context = multiprocessing.get_context("spawn")
        go = context.Event()
        ready = context.Queue()
        out = context.Queue()
        size = 10
        procs = [
            context.Process(target=_writer, args=(url, w, args.writer_events, size, go, ready, out))
            for w in range(args.writers)
        ]
        for proc in procs:
            proc.start()
        for _ in procs:  # every writer connected and its events built before the clock starts
            ready.get(timeout=600)
        start = time.perf_counter()
        go.set()
        finished = [out.get(timeout=600) for _ in procs]
        wall_s = time.perf_counter() - start
        for proc in procs:
            proc.join()
        total = args.writers * args.writer_events
        print(
            f"{args.writers} concurrent writers, appends of {size}: {rate(total, wall_s)}"
            f"  (slowest writer {max(s for _, s in finished):.2f} s)"
        )
        with PostgresEventStore(url) as store:
            positions: list[int] = []
            ids: set[str] = set()
            while page := store.read_event_rows(positions[-1] if positions else 0, 10_000):
                positions.extend(row[0] for row in page)
            for row in store.read_all_rows(0, total + 1):
                ids.add(row[3])
            head = store.head()
            report = verify_store(store)
        gap_free = positions == list(range(1, total + 1)) and head == total and len(ids) == total
        print(
            f"no gap, no duplicate, chain valid: {'yes' if gap_free and report.ok else 'NO'}"
            f"  (head {head:,}, {len(ids):,} distinct ids, {len(report.problems)} problems)"
        )
    finally:
        databases.close()


if __name__ == "__main__":
    main()
