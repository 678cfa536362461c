"""The PostgreSQL event store's own guarantees, against a real server (see support/pg.py).

Positions stay gap-free and in commit order while slow writers hold their append
transactions open, some roll back, and a reader tails the log; a connection
dropped mid-append (the backend terminated) is retried without a duplicate or a
gap, or fails cleanly; the database refuses UPDATE, DELETE and TRUNCATE; a
read-only database or role refuses appends as a read-only SQLite store does;
racing creators all succeed; ``verify`` finds tampering as on SQLite.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from evopolicygym.records.events import EpisodeCompleted, NewEvent, new_event
from evopolicygym.records.sqlite import SQLiteEventStore
from evopolicygym.records.store import ANY_VERSION, EventStore, StoreError
from evopolicygym.records.verify import verify_store
from tests.support import pg

# The store's module imports psycopg (the postgres extra): the module skips without it,
# saying how to install it, or without a server, saying how to start one.
pg.require_postgres()

from evopolicygym.records.postgres import PostgresEventStore  # noqa: E402

if TYPE_CHECKING:
    import psycopg

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def url() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL store, dropped at the end."""
    pg.require_postgres()
    database = pg.new_database()
    PostgresEventStore(database, create=True).close()
    try:
        yield database
    finally:
        pg.drop_made()


def episode(event_id: str, n: int = 0) -> NewEvent:
    return new_event(
        EpisodeCompleted(submission_id=1, index=n, status="ok", total_reward=n / 2, steps=n),
        event_id,
    )


def everything(store: EventStore) -> list[Any]:
    rows: list[Any] = []
    while page := store.read_all(rows[-1].position if rows else 0, 1000):
        rows.extend(page)
    return rows


def assert_sound(store: EventStore) -> list[Any]:
    envelopes = everything(store)
    assert [e.position for e in envelopes] == list(range(1, store.head() + 1))
    assert len({e.event_id for e in envelopes}) == len(envelopes)
    report = verify_store(store)
    assert report.ok, report.problems
    return envelopes


def run(database_url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as connection:
        cursor = connection.execute(sql, args or None)
        return cursor.fetchall() if cursor.description else []


# --------------------------------------------------------------------------- commit order


class Slow(PostgresEventStore):
    """Holds each append's transaction open a while after writing its rows; every third
    append then fails there, so its transaction rolls back with positions already taken."""

    calls = 0

    def _inside_append(self, cursor: psycopg.Cursor[Any]) -> None:
        self.calls += 1
        time.sleep(random.uniform(0.002, 0.02))
        if self.calls % 3 == 0:
            raise RuntimeError("the writer died inside its transaction")


def test_a_tailing_reader_sees_every_position_once_in_order(url: str) -> None:
    """Slow writers (holding their transactions open, some rolling back) and fast writers
    append at once while a reader polls ``read_all`` from its last position: the reader
    sees 1..head exactly once each, in order, and never a hole it later finds filled."""
    writers: list[tuple[str, PostgresEventStore]] = [
        *((f"slow-{i}", Slow(url)) for i in range(2)),
        *((f"fast-{i}", PostgresEventStore(url)) for i in range(3)),
    ]
    committed: dict[str, list[str]] = {name: [] for name, _ in writers}
    errors: list[str] = []
    done = threading.Event()

    def write(name: str, store: PostgresEventStore) -> None:
        for n in range(40):
            events = [episode(f"{name}-{n}-{k}", n) for k in range(1 + n % 3)]
            try:
                store.append(name if n % 2 else "shared", events, ANY_VERSION)
            except RuntimeError:
                continue  # rolled back: none of its events may appear
            except Exception as exc:
                errors.append(f"{name} {n}: {exc!r}")
                continue
            committed[name].extend(e.event_id for e in events)

    seen: list[int] = []
    seen_ids: list[str] = []

    def tail() -> None:
        reader = PostgresEventStore(url)
        last = 0
        try:
            while True:
                finished = done.is_set()  # read once more after the writers are done
                page = reader.read_all(last, 50)
                if page:
                    if [e.position for e in page] != list(range(last + 1, last + 1 + len(page))):
                        errors.append(f"after {last} the reader got {[e.position for e in page]}")
                    seen.extend(e.position for e in page)
                    seen_ids.extend(e.event_id for e in page)
                    last = page[-1].position
                elif finished:
                    return
        finally:
            reader.close()

    reader = threading.Thread(target=tail)
    threads = [threading.Thread(target=write, args=writer) for writer in writers]
    reader.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join()
    for _, store in writers:
        store.close()

    assert errors == []
    with PostgresEventStore(url) as store:
        head = store.head()
        envelopes = assert_sound(store)
    assert seen == list(range(1, head + 1))
    assert seen_ids == [e.event_id for e in envelopes]
    assert sorted(seen_ids) == sorted(i for ids in committed.values() for i in ids)
    # Each slow writer's every third append rolled back, after taking its positions: 13 of
    # its 40 left no event (the reader's check above shows they left no hole either).
    for name, _ in writers[:2]:
        appends = {event_id.rsplit("-", 1)[0] for event_id in committed[name]}
        assert len(appends) == 40 - 13


# --------------------------------------------------------------------------- dropped connections


class Dropped(PostgresEventStore):
    """Its connection is terminated by the server (``pg_terminate_backend`` from another
    connection) while an append's transaction is open, ``drops`` times in a row."""

    def __init__(self, url: str, drops: int) -> None:
        super().__init__(url)
        self.admin_url = url
        self.drops = drops
        self.terminated: list[int] = []

    def _inside_append(self, cursor: psycopg.Cursor[Any]) -> None:
        if self.drops > 0:
            self.drops -= 1
            pid = cursor.connection.info.backend_pid
            assert run(self.admin_url, "SELECT pg_terminate_backend(%s, 10000)", pid) == [(True,)]
            self.terminated.append(pid)


def test_a_connection_dropped_mid_append_is_retried_once_without_a_duplicate(url: str) -> None:
    with Dropped(url, drops=1) as store:
        assert store.append("s", [episode("a"), episode("b")], 0) == [1, 2]
        assert len(store.terminated) == 1
        assert store.append("s", [episode(f"c{i}") for i in range(20)], 2) == list(range(3, 23))
        assert store.append("s", [episode("a"), episode("b")], 0) == [1, 2]  # still a no-op retry
    with PostgresEventStore(url) as store:
        envelopes = assert_sound(store)
    assert [e.event_id for e in envelopes] == ["a", "b", *(f"c{i}" for i in range(20))]


def test_a_connection_dropped_twice_is_a_clean_store_error(url: str) -> None:
    with PostgresEventStore(url) as plain:
        plain.append("s", [episode("first")], 0)
    with Dropped(url, drops=2) as store:
        with pytest.raises(StoreError) as failed:
            store.append("s", [episode("lost-1"), episode("lost-2")], 1)
        assert "\n" not in str(failed.value)
        assert len(store.terminated) == 2
        assert store.head() == 1  # nothing of the failed append
        assert store.append("s", [episode("second")], ANY_VERSION) == [2]  # reconnects, no gap
        assert store.append("s", [episode("lost-1"), episode("lost-2")], 2) == [
            3,
            4,
        ]  # the caller's retry
    with PostgresEventStore(url) as store:
        envelopes = assert_sound(store)
    assert [e.event_id for e in envelopes] == ["first", "second", "lost-1", "lost-2"]


def test_random_backend_terminations_never_duplicate_or_skip(url: str) -> None:
    """A writer appends batches while another connection keeps terminating its backend at
    random moments: every batch the writer saw succeed is in the log exactly once, in order."""
    stop = threading.Event()
    kills: list[int] = []

    def killer() -> None:
        import psycopg

        database = url.rsplit("/", 1)[1]
        with psycopg.connect(url, autocommit=True) as connection:
            own = connection.info.backend_pid
            while not stop.is_set():
                time.sleep(random.uniform(0.005, 0.05))
                rows = connection.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> %s AND backend_type = 'client backend'",
                    (database, own),
                ).fetchall()
                kills.extend(1 for (ok,) in rows if ok)

    thread = threading.Thread(target=killer)
    store = PostgresEventStore(url)
    thread.start()
    appended: list[str] = []
    failures: list[str] = []
    try:
        version = 0
        for n in range(150):
            events = [episode(f"k{n}-{i}", i) for i in range(5)]
            for _ in range(20):  # a Host retries a failed append with the same ids
                try:
                    positions = store.append("loop", events, version)
                    break
                except StoreError as exc:
                    failures.append(str(exc))
            else:
                pytest.fail(f"an append failed 20 times in a row: {failures[-3:]}")
            assert positions == list(range(version + 1, version + 6))
            version += 5
            appended.extend(e.event_id for e in events)
    finally:
        stop.set()
        thread.join()
        store.close()
    assert sum(kills) > 0
    with PostgresEventStore(url) as reopened:
        envelopes = assert_sound(reopened)
    assert [e.event_id for e in envelopes] == appended


# ------------------------------------------------------------------------- the database's own rules


def test_the_database_refuses_update_delete_and_truncate(url: str) -> None:
    from psycopg.errors import RestrictViolation

    with PostgresEventStore(url) as store:
        store.append("s", [episode(f"u{i}") for i in range(3)], 0)
        before = everything(store)
        for statement in (
            "UPDATE events SET payload = '\\x00'::bytea WHERE position = 2",
            "UPDATE events SET type = 'Forged'",
            "DELETE FROM events WHERE position = 3",
            "DELETE FROM events",
            "TRUNCATE events",
        ):
            with pytest.raises(RestrictViolation, match="append-only"):
                run(url, statement)
        assert everything(store) == before
        assert store.append("s", [episode("after")], 3) == [4]
        assert store.integrity_problems() == []


def test_the_indexes_are_checked(url: str) -> None:
    """Every index of the log B-tree-checked (amcheck installed here), and an index the
    database marks invalid (a failed concurrent rebuild leaves one) is named."""
    run(url, "CREATE EXTENSION IF NOT EXISTS amcheck")
    with PostgresEventStore(url) as store:
        store.append("s", [episode(f"i{i}", i) for i in range(500)], 0)
        assert store.integrity_problems() == []
        indexes = run(
            url,
            "SELECT indexrelid::regclass::text FROM pg_index "
            "WHERE indrelid = 'events'::regclass ORDER BY 1",
        )
        assert len(indexes) == 3  # position, (stream_id, stream_version), event_id
        (name,) = indexes[0]
        run(url, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", name)
        assert store.integrity_problems() == [f"index {name} is invalid"]


def test_a_disabled_trigger_and_a_tampered_row_are_reported(url: str) -> None:
    with PostgresEventStore(url) as store:
        store.append("s", [episode(f"t{i}", i) for i in range(10)], 0)
        run(url, "ALTER TABLE events DISABLE TRIGGER events_no_update")
        run(
            url,
            "UPDATE events SET payload = convert_to(replace(convert_from(payload, 'UTF8'), "
            "'\"steps\":6', '\"steps\":7'), 'UTF8') WHERE position = 7",
        )
        assert store.integrity_problems() == [
            "the append-only trigger events_no_update is disabled: the log can be changed"
        ]
        report = verify_store(store)
    assert [(p.position, p.kind) for p in report.problems if p.position] == [(7, "payload_hash")]


def test_hashes_match_sqlite_for_the_same_events(url: str, tmp_path: Path) -> None:
    events = [episode(f"h{i}", i) for i in range(25)]
    with (
        PostgresEventStore(url) as postgres,
        SQLiteEventStore(tmp_path / "events.db", create=True) as sqlite,
    ):
        postgres.append("s", events, 0)
        sqlite.append("s", events, 0)
        ours, theirs = everything(postgres), everything(sqlite)
    strip = [
        (e.position, e.stream_id, e.stream_version, e.event_id, e.type, e.payload, e.payload_hash)
        for e in ours
    ]
    assert strip == [
        (e.position, e.stream_id, e.stream_version, e.event_id, e.type, e.payload, e.payload_hash)
        for e in theirs
    ]


# --------------------------------------------------------------------------- read-only


def test_a_read_only_database_refuses_appends_and_reads(url: str) -> None:
    with PostgresEventStore(url) as store:
        store.append("s", [episode("before")], 0)
    database = url.rsplit("/", 1)[1]
    pg.admin(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    with PostgresEventStore(url) as store:
        assert store.read_only
        assert [e.event_id for e in everything(store)] == ["before"]
        assert verify_store(store).ok
        with pytest.raises(StoreError, match="is read-only: nothing can be recorded in it"):
            store.append("s", [episode("after")], 1)
    with pytest.raises(StoreError, match="read-only"):
        PostgresEventStore(url, create=True)


def test_a_role_that_may_only_read_refuses_appends(url: str) -> None:
    role = f"{pg.PREFIX}ro_{random.randrange(16**8):08x}"
    database = url.rsplit("/", 1)[1]
    pg.admin(f'CREATE ROLE "{role}" LOGIN')
    try:
        run(url, f'GRANT SELECT ON events, store_meta TO "{role}"')
        with PostgresEventStore(url) as store:
            store.append("s", [episode("one")], 0)
            assert not store.read_only
        from sqlalchemy.engine import make_url

        reader_url = (
            make_url(url).set(username=role, password=None).render_as_string(hide_password=False)
        )
        with PostgresEventStore(reader_url) as reader:
            assert reader.read_only
            assert reader.head() == 1
            with pytest.raises(StoreError, match="is read-only: nothing can be recorded in it"):
                reader.append("s", [episode("two")], 1)
            # Asked anyway (as a stale read_only flag would), the database itself refuses.
            reader.read_only = False
            with pytest.raises(StoreError, match="is read-only"):
                reader.append("s", [episode("two")], 1)
    finally:
        pg.drop(database)
        pg.admin(f'DROP ROLE IF EXISTS "{role}"')


# --------------------------------------------------------------------------- creating


def test_a_missing_store_and_a_foreign_database(url: str) -> None:
    missing = pg.url_of(pg.PREFIX + "missing_" + f"{random.randrange(16**8):08x}")
    with pytest.raises(StoreError, match="no event log"):
        PostgresEventStore(missing)
    other = pg.new_database()
    with pytest.raises(StoreError, match="no event log"):
        PostgresEventStore(other)
    run(other, "CREATE TABLE store_meta (key text primary key, value text)")
    with pytest.raises(StoreError, match="not an EvoPolicyGym event log"):
        PostgresEventStore(other)


def test_another_log_format_is_refused(url: str) -> None:
    for found, message in ((2, "reads up to"), (0, "upgrade")):
        run(url, "UPDATE store_meta SET value = %s WHERE key = 'format_version'", str(found))
        with pytest.raises(StoreError, match=message):
            PostgresEventStore(url)


CREATOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from evopolicygym.records.events import RunResumed, new_event
    from evopolicygym.records.postgres import PostgresEventStore
    url, name, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    with PostgresEventStore(url, create=True) as store:
        store.append(name, [new_event(RunResumed(attempt=1), name)], 0)
    print("ok", flush=True)
    """
)


def test_processes_creating_one_store_at_once_all_succeed(tmp_path: Path) -> None:
    """Four processes create the same store (its database too) at once: all succeed."""
    pg.require_postgres()
    name = pg.PREFIX + f"race_{random.randrange(16**8):08x}"
    pg._made.add(name)
    url = pg.url_of(name)
    go = tmp_path / "go"
    names = [f"creator-{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CREATOR, url, n, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in names
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        go.touch()
        results = [proc.communicate(timeout=60) for proc in procs]
        for proc, (out, err) in zip(procs, results, strict=True):
            assert proc.returncode == 0, err
            assert out.strip() == "ok"
        with PostgresEventStore(url) as store:
            assert sorted(s.stream_id for s in store.streams()) == names
            assert_sound(store)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        pg.drop_made()
