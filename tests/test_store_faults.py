"""The event store under real faults: concurrent processes, SIGKILL mid-append, a corrupted file.

The concurrency and SIGKILL tests run on both backends (SQLite, and PostgreSQL in a database
of its own, see pg.py); the corruption tests edit the SQLite file itself.

Also the fold helpers (``iter_events``) replay builds on, and ``verify_store`` on the bare
log: it must name the first bad position, and what is wrong there, whatever was tampered with.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from evopolicygym.records import events as events_module
from evopolicygym.records import verify as verify_module
from evopolicygym.records.chain import chain_hash
from evopolicygym.records.events import (
    Envelope,
    EpisodeCompleted,
    EventCodecError,
    NewEvent,
    RunResumed,
    new_event,
)
from evopolicygym.records.fold import iter_events, iter_rows
from evopolicygym.records.sqlite import SQLiteEventStore
from evopolicygym.records.store import ANY_VERSION, EventStore
from evopolicygym.records.verify import ProblemKind, VerifyReport, verify_store
from tests.support import pg

ROOT = Path(__file__).resolve().parent.parent


def episode(event_id: str, n: int = 0, tail: str = "") -> NewEvent:
    event = EpisodeCompleted(
        submission_id=1, index=n, status="ok", total_reward=n / 4, steps=n, output_tail=tail
    )
    return new_event(event, event_id)


def make_store(path: Path, events: int = 30) -> SQLiteEventStore:
    store = SQLiteEventStore(path, create=True)
    for i in range(events):
        store.append(f"s{i % 3}", [episode(f"e{i}", i, tail=f"marker-{i + 1:04d}")], ANY_VERSION)
    return store


def everything(store: EventStore) -> list[Envelope]:
    envelopes: list[Envelope] = []
    while page := store.read_all(envelopes[-1].position if envelopes else 0, 1000):
        envelopes.extend(page)
    return envelopes


def assert_sound(store: EventStore) -> list[Envelope]:
    """Gap-free positions, a valid chain and contiguous stream versions."""
    envelopes = everything(store)
    assert [e.position for e in envelopes] == list(range(1, store.head() + 1))
    report = verify_store(store)
    assert report.ok, report.problems
    versions: dict[str, list[int]] = {}
    for e in envelopes:
        versions.setdefault(e.stream_id, []).append(e.stream_version)
    for stream, found in versions.items():
        assert found == list(range(1, len(found) + 1)), stream
    assert {(s.stream_id, s.version) for s in store.streams()} == {
        (stream, len(found)) for stream, found in versions.items()
    }
    return envelopes


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


# --------------------------------------------------------------------------- backends


def open_log(where: str, create: bool = False) -> EventStore:
    """The log at ``where``: a PostgreSQL URL or an SQLite file (the subprocesses' opener too)."""
    if where.startswith("postgresql://"):
        from evopolicygym.records.postgres import PostgresEventStore

        return PostgresEventStore(where, create=create)
    from evopolicygym.records.sqlite import SQLiteEventStore

    return SQLiteEventStore(where, create=create)


OPEN_LOG = "from evopolicygym.records.store import EventStore\n" + inspect.getsource(open_log)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty log of each backend: an SQLite file's path or a PostgreSQL URL."""
    if request.param == "sqlite":
        path = str(tmp_path / "events.db")
    else:
        pg.require_postgres()
        request.addfinalizer(pg.drop_made)
        path = pg.url_of(pg.database_for(tmp_path))
    open_log(path, create=True).close()
    return path


# --------------------------------------------------------------------------- concurrency

WORKER = OPEN_LOG + textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from evopolicygym.records.events import EpisodeCompleted, new_event
    from evopolicygym.records.store import ANY_VERSION

    path, worker, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    workers = int(sys.argv[5])
    store = open_log(path)
    own_stream = f"worker-{worker}"
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    errors, own, shared, retries, last = [], 0, 0, 0, None
    for n in range(count):
        if n == count // 2:
            # A barrier halfway: every writer has appended before any goes on, so
            # the log interleaves whatever the scheduler does.
            (go.parent / f"half-{worker}").touch()
            while len(list(go.parent.glob("half-*"))) < workers:
                time.sleep(0.001)
        event = EpisodeCompleted(
            submission_id=worker, index=n, status="ok", total_reward=n / 2, steps=n
        )
        batch = [new_event(event, f"w{worker}-{n}")]
        try:
            if n % 4 == 3:
                positions = store.append("shared", batch, ANY_VERSION)
                shared += 1
                last = ("shared", batch, ANY_VERSION, positions)
            else:
                positions = store.append(own_stream, batch, own)
                last = (own_stream, batch, own, positions)
                own += 1
            if n % 10 == 9:  # retry the last batch; for the own stream, with a stale version
                stream, again, expected, first = last
                retries += 1
                if store.append(stream, again, expected) != first:
                    errors.append(f"retry of {n} returned other positions")
        except Exception as exc:
            errors.append(f"append {n}: {type(exc).__name__}: {exc}")
    store.close()
    print(json.dumps({"errors": errors, "own": own, "shared": shared, "retries": retries}))
    """
)


@pytest.mark.slow
def test_four_processes_append_concurrently(tmp_path: Path, where: str) -> None:
    path = where
    go = tmp_path / "go"
    workers, count = 4, 2_000
    procs = [
        spawn(WORKER, str(path), str(w), str(count), str(go), str(workers)) for w in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready", proc.stderr
        go.touch()
        outputs = [proc.communicate(timeout=240) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    reports = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["errors"] for r in reports] == [[]] * workers
    assert all(r["retries"] == count // 10 for r in reports)

    store = open_log(path)
    try:
        assert store.head() == workers * count
        envelopes = assert_sound(store)
        versions = {s.stream_id: s.version for s in store.streams()}
    finally:
        store.close()
    assert versions == {
        "shared": sum(r["shared"] for r in reports),
        **{f"worker-{w}": r["own"] for w, r in enumerate(reports)},
    }
    # Every worker's events are in its own order, and all writers really interleaved:
    # each half (split by the workers' barrier) holds every writer, so at least
    # workers - 1 switches per half, however the scheduler ran them.
    for w in range(workers):
        indices = [
            int(e.event_id.split("-")[1]) for e in envelopes if e.event_id.startswith(f"w{w}-")
        ]
        assert indices == list(range(count))
    switches = sum(
        a.event_id.split("-")[0] != b.event_id.split("-")[0]
        for a, b in itertools.pairwise(envelopes)
    )
    assert switches >= 2 * (workers - 1)


CREATOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from evopolicygym.records.sqlite import SQLiteEventStore

    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    with SQLiteEventStore(sys.argv[1], create=True) as store:
        print(store.head(), flush=True)
    """
)


def test_a_log_appears_whole_while_others_create_and_read_it(tmp_path: Path) -> None:
    """Creation builds the log aside and links it into place: a reader that finds the file
    finds its tables (no 'no such table'), and racing creators all end with one log."""
    path = tmp_path / "events.db"
    go = tmp_path / "go"
    creators = [spawn(CREATOR, str(path), str(go)) for _ in range(3)]
    seen: list[str] = []
    try:
        go.touch()
        deadline = time.monotonic() + 60
        while any(p.poll() is None for p in creators) and time.monotonic() < deadline:
            if path.exists():
                try:
                    with SQLiteEventStore(path) as store:
                        seen.append(f"head {store.head()}")
                except Exception as exc:
                    seen.append(f"{type(exc).__name__}: {exc}")
        outputs = [p.communicate(timeout=60) for p in creators]
    finally:
        for proc in creators:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in creators] == [0, 0, 0], [err for _, err in outputs]
    assert [out.strip() for out, _ in outputs] == ["0", "0", "0"]
    assert all(line == "head 0" for line in seen), sorted(set(seen))
    assert (
        sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    )  # nothing left aside
    with SQLiteEventStore(path) as store:
        assert_sound(store)


# --------------------------------------------------------------------------- SIGKILL

LOOPER = OPEN_LOG + textwrap.dedent(
    """
    import sys
    from evopolicygym.records.events import EpisodeCompleted, new_event

    store = open_log(sys.argv[1])
    size = 50
    version = store.streams("loop")[0].version if store.streams("loop") else 0
    n = version // size
    while True:
        batch = [
            new_event(
                EpisodeCompleted(
                    submission_id=n, index=i, status="ok", total_reward=i / 3, steps=i,
                    output_tail="x" * 200,
                ),
                f"loop-{n}-{i}",
            )
            for i in range(size)
        ]
        store.append("loop", batch, version)
        version += size
        n += 1
        if n % 5 == 1:
            print(version, flush=True)
    """
)


@pytest.mark.slow
def test_sigkill_mid_append_leaves_whole_batches(where: str) -> None:
    path = where
    heads: list[int] = []
    for _ in range(3):  # three kills, each resuming where the last one left off
        proc = spawn(LOOPER, str(path))
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip(), proc.stderr  # at least one batch is in
            time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        with closing(open_log(path)) as store:
            head = store.head()
            assert head % 50 == 0 and head > (heads[-1] if heads else 0)
            assert_sound(store)
            heads.append(head)
    with closing(open_log(path)) as store:
        head = store.head()
        assert store.streams("loop")[0].version == head
        more = [episode(f"after-{i}", i) for i in range(50)]
        assert store.append("loop", more, head) == list(range(head + 1, head + 51))
        assert store.append("loop", more, head) == list(range(head + 1, head + 51))
        assert_sound(store)


# --------------------------------------------------------------------------- corruption


def tamper(path: Path | str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """Run statements in a raw connection with the append-only triggers dropped (SQLite) or
    disabled (PostgreSQL, where ``path`` is the store's URL)."""
    if isinstance(path, str) and path.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(path) as connection, connection.transaction():
            connection.execute("ALTER TABLE events DISABLE TRIGGER USER")
            for sql, args in statements:
                connection.execute(sql.replace("?", "%s"), args)
            connection.execute("ALTER TABLE events ENABLE TRIGGER USER")
        return
    raw = sqlite3.connect(path, timeout=30)
    try:
        raw.execute("DROP TRIGGER events_no_update")
        raw.execute("DROP TRIGGER events_no_delete")
        for sql, args in statements:
            raw.execute(sql, args)
        raw.commit()
    finally:
        raw.rollback()
        raw.close()


def row(path: Path | str, position: int) -> tuple[Any, ...]:
    query = (
        "SELECT position, stream_id, stream_version, event_id, type, schema_version, "
        "recorded_at, payload, payload_hash, prev_hash, hash FROM events WHERE position = ?"
    )
    if isinstance(path, str) and path.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(path) as connection:
            found = connection.execute(query.replace("?", "%s"), (position,)).fetchone()
    else:
        raw = sqlite3.connect(path)
        try:
            found = raw.execute(query, (position,)).fetchone()
        finally:
            raw.close()
    assert found is not None
    return tuple(found)


def flip_a_digit(payload: bytes, marker: bytes) -> bytes:
    """Flip the low bit of one digit byte: still valid JSON, a different payload."""
    at = payload.index(marker) + len(marker) - 1
    flipped = bytearray(payload)
    flipped[at] ^= 0x01
    return bytes(flipped)


def problems_of(report: VerifyReport) -> list[tuple[int, ProblemKind]]:
    return [(p.position, p.kind) for p in report.problems]


def test_verify_store_is_clean_for_an_intact_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with make_store(tmp_path / "events.db") as store:
        store.append("big", [episode(f"b{i}", i) for i in range(2_000)], 0)
        report = verify_store(store)
        assert report.ok, report.problems
        # A bare EventStore has no blob store: no references are checked.
        assert (report.head, report.events, report.blobs) == (2_030, 2_030, 0)
        monkeypatch.setattr(verify_module, "PAGE", 7)
        paged = verify_store(store)
        assert paged.ok, paged.problems
        assert (paged.head, paged.events, paged.blobs) == (2_030, 2_030, 0)


def test_verify_store_names_a_flipped_payload_byte(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    store = make_store(path)
    try:
        flipped = flip_a_digit(row(path, 17)[7], b"marker-0017")
        tamper(path, ("UPDATE events SET payload = ? WHERE position = 17", (flipped,)))
        report = verify_store(store)
        assert problems_of(report) == [(17, "payload_hash")]
        assert "payload hash mismatch" in report.problems[0].message
    finally:
        store.close()
    with SQLiteEventStore(path) as reopened:
        report = verify_store(reopened)
        assert problems_of(report) == [(17, "payload_hash")]
        assert "payload hash mismatch" in report.problems[0].message


def test_verify_store_names_bit_rot_in_the_file_itself(tmp_path: Path) -> None:
    """No SQL at all: one byte of the database file changes on disk, triggers intact."""
    path = tmp_path / "events.db"
    make_store(path).close()  # the last connection checkpoints the WAL into the file
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    data = bytearray(path.read_bytes())
    marker = b"marker-0017"
    assert data.count(marker) == 1
    data[data.index(marker) + len(marker) - 1] ^= 0x01
    path.write_bytes(bytes(data))
    with SQLiteEventStore(path) as store:
        report = verify_store(store)
        assert problems_of(report) == [(17, "payload_hash")]
        assert "payload hash mismatch" in report.problems[0].message
        assert store.head() == 30
    raw = sqlite3.connect(path)
    try:
        triggers = raw.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
        assert sorted(triggers) == [("events_no_delete",), ("events_no_update",)]
    finally:
        raw.close()


def rehash(path: Path | str, at: int, **changes: Any) -> tuple[str, tuple[Any, ...]]:
    """An UPDATE that sets fields of one event and recomputes its payload and chain hashes,
    as a careful forger would (the next event's prev_hash is left alone)."""
    old = dict(zip(Envelope.__struct_fields__, row(path, at), strict=True))
    new = {**old, **changes}
    new["payload_hash"] = hashlib.sha256(new["payload"]).hexdigest()
    new["hash"] = chain_hash(
        new["prev_hash"],
        new["position"],
        new["stream_id"],
        new["stream_version"],
        new["event_id"],
        new["type"],
        new["schema_version"],
        new["recorded_at"],
        new["payload_hash"],
    )
    sets = ", ".join(f"{column} = ?" for column in new)
    return f"UPDATE events SET {sets} WHERE position = ?", (*new.values(), at)


Tampering = Callable[[Path | str], list[tuple[str, tuple[Any, ...]]]]

Expected = list[tuple[int, ProblemKind, str]]  # position, kind, and a part of the message

CASES: dict[str, tuple[Tampering, Expected]] = {
    "deleted event": (
        # Position 4 is s0's second event (s0 holds 1, 4, 7...), so s0's versions break at 7.
        lambda p: [("DELETE FROM events WHERE position = 4", ())],
        [
            (5, "position", "gap after 3"),
            (5, "chain", "does not link to position 3"),
            (7, "version", "stream 's0' version 3 after 1"),
        ],
    ),
    "deleted tail": (
        lambda p: [("DELETE FROM events WHERE position > 25", ())],
        [],  # a truncated tail is a consistent shorter log: only an anchored head can tell
    ),
    "changed timestamp": (
        lambda p: [("UPDATE events SET recorded_at = recorded_at + 1 WHERE position = 6", ())],
        [(6, "chain", "chain hash mismatch")],
    ),
    "rewritten hash": (
        lambda p: [("UPDATE events SET hash = ? WHERE position = 6", ("f" * 64,))],
        [
            (6, "chain", "chain hash mismatch"),
            (7, "chain", "does not link to position 6"),
        ],
    ),
    "forged payload with recomputed hashes": (
        lambda p: [rehash(p, 12, payload=episode("e11", 999).payload)],
        [(13, "chain", "does not link to position 12")],
    ),
    "forged first event": (
        lambda p: [rehash(p, 1, prev_hash="1" * 64)],
        [
            (1, "chain", "is not the genesis hash"),
            (2, "chain", "does not link to position 1"),
        ],
    ),
    "changed payload hash only": (
        # The chain (global) is checked before the event itself, within one position.
        lambda p: [("UPDATE events SET payload_hash = ? WHERE position = 9", ("0" * 64,))],
        [(9, "chain", "chain hash mismatch"), (9, "payload_hash", "payload hash mismatch")],
    ),
    "skipped stream version": (
        lambda p: [rehash(p, 30, stream_version=50)],
        [(30, "version", "stream 's2' version 50 after 9")],
    ),
    "undecodable last payload": (
        lambda p: [rehash(p, 30, payload=b'{"submission_id": "not a number"}')],
        [(30, "decode", "payload does not decode: ")],
    ),
    "unknown type": (
        lambda p: [rehash(p, 30, type="NoSuchEvent")],
        [(30, "decode", "payload does not decode: unknown event type 'NoSuchEvent'")],
    ),
    "payload stored as text": (
        lambda p: [("UPDATE events SET payload = CAST(payload AS TEXT) WHERE position = 3", ())],
        [(3, "payload_type", "payload is str, not bytes")],
    ),
    "renumbered last event": (
        lambda p: [rehash(p, 30, position=31)],
        [(31, "position", "gap after 29")],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_verify_store_names_each_problem_in_order(where: str, case: str) -> None:
    """The same tampering found the same way in either backend (the PostgreSQL log's payload
    column is bytea: it cannot hold text, so that case is SQLite's alone)."""
    if case == "payload stored as text" and where.startswith("postgresql://"):
        pytest.skip("a bytea column cannot hold text")
    store = open_log(where)
    for i in range(30):
        store.append(f"s{i % 3}", [episode(f"e{i}", i, tail=f"marker-{i + 1:04d}")], ANY_VERSION)
    store.close()
    change, expected = CASES[case]
    tamper(where, *change(where))
    with closing(open_log(where)) as reopened:
        report = verify_store(reopened)
    assert problems_of(report) == [(position, kind) for position, kind, _ in expected], (
        report.problems
    )
    for problem, (_, _, wanted) in zip(report.problems, expected, strict=True):
        assert wanted in problem.message, report.problems
    assert report.ok == (not expected)


class Reordered(SQLiteEventStore):
    """A log whose backend hands back positions 5 and 6 swapped (reads must be in order)."""

    def read_all_rows(self, from_position: int = 0, limit: int = 1000) -> list[tuple[Any, ...]]:
        rows = super().read_all_rows(from_position, limit)
        at = [r[0] for r in rows]
        if 5 in at and 6 in at:
            i, j = at.index(5), at.index(6)
            rows[i], rows[j] = rows[j], rows[i]
        return rows


def test_verify_store_names_positions_out_of_order(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    make_store(path).close()
    with Reordered(path) as store:
        report = verify_store(store)
    # 5 and 6 are in different streams (s1, s2), so no stream version is out of order.
    expected: Expected = [
        (6, "position", "gap after 4"),
        (6, "chain", "does not link to position 4"),
        (5, "position", "out of order after 6"),
        (5, "chain", "does not link to position 6"),
        (7, "chain", "does not link to position 5"),
    ]
    assert problems_of(report) == [(position, kind) for position, kind, _ in expected]
    for problem, (_, _, wanted) in zip(report.problems, expected, strict=True):
        assert wanted in problem.message, report.problems


def test_verify_store_reports_an_upcaster_that_fails_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.db"
    make_store(path).close()
    tamper(path, rehash(path, 30, schema_version=0))

    def broken(data: dict[str, Any]) -> dict[str, Any]:
        return {"index": data["no such field"]}

    with SQLiteEventStore(path) as store:
        report = verify_store(store)  # no upcaster from v0 at all: a codec error
        assert problems_of(report) == [(30, "decode")]
        assert "no upcaster for EpisodeCompleted v0 -> v1" in report.problems[0].message
        monkeypatch.setitem(events_module._UPCASTERS, ("EpisodeCompleted", 0), broken)
        report = verify_store(store)  # an upcaster raising anything is reported, not raised
    assert problems_of(report) == [(30, "decode")]
    assert report.problems[0].message.startswith("payload does not decode: KeyError")


# --------------------------------------------------------------------------- fold helpers


def test_iter_events_matches_read_all(tmp_path: Path) -> None:
    with make_store(tmp_path / "events.db", events=25) as store:
        store.append("r", [new_event(RunResumed(attempt=i), f"r{i}") for i in range(5)], 0)
        expected = [
            (e.position, e.stream_id, e.stream_version, e.event()) for e in everything(store)
        ]
        assert len(expected) == 30
        assert list(iter_events(store)) == expected
        assert list(iter_events(store, batch=4)) == expected
        assert list(iter_events(store, from_position=17, batch=3)) == expected[17:]
        assert list(iter_events(store, from_position=30)) == []
        rows = list(iter_rows(store, batch=6))
        assert rows == list(iter_rows(store, batch=11))
        assert [Envelope.from_row(r) for r in rows] == everything(store)
        assert list(iter_rows(store, from_position=28, batch=1)) == rows[28:]
        with pytest.raises(ValueError):
            list(iter_events(store, batch=0))


def test_iter_events_raises_on_a_bad_payload_and_verify_store_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    make_store(path).close()
    tamper(path, rehash(path, 10, payload=b'{"steps": []}'))
    with SQLiteEventStore(path) as store:
        events = iter_events(store)
        assert [position for position, *_ in (next(events) for _ in range(9))] == list(range(1, 10))
        with pytest.raises(EventCodecError, match="EpisodeCompleted v1"):
            next(events)
        problems = verify_store(store).problems
    assert [(p.position, p.kind) for p in problems] == [(10, "decode"), (11, "chain")]
    assert problems[0].message.startswith("payload does not decode: EpisodeCompleted v1")
