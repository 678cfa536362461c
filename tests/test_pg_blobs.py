"""PgBlobStore, what only PostgreSQL has: the files' stored bytes, chunked under its value
limit, append-only tables, a dropped connection reopened; and ``open_store`` on a URL. What
every backend does is the contract suite, tests/test_blob_contract.py."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from evopolicygym.program import Program
from evopolicygym.records.blobcodec import BlobCorrupt, BlobMissing
from evopolicygym.records.blobs import FileBlobStore
from evopolicygym.records.location import StoreUrl, open_store, resolve_store, resolve_store_path
from evopolicygym.records.store import StoreError
from tests.support import pg

MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
COMPRESSIBLE = b"".join(b"step %08d reward %d\n" % (i, i % 7) for i in range(60_000))[:MiB]


@pytest.fixture
def databases() -> Iterator[None]:
    """PostgreSQL is required (skipped, or failed under EVOPOLICY_REQUIRE_POSTGRES=1, without
    it); every database the test made is dropped at its end."""
    pg.require_postgres()
    try:
        yield
    finally:
        pg.drop_made()


@pytest.fixture
def url(databases: None) -> str:
    return pg.new_database()


@pytest.fixture
def blobs(url: str) -> Iterator[Any]:
    from evopolicygym.records.pgblobs import PgBlobStore

    store = PgBlobStore(url, create=True)
    try:
        yield store
    finally:
        store.close()


def sql(url: str, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    """One statement on the test database, as the superuser the tests connect as."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def tamper(url: str, statement: str, *args: Any) -> None:
    """Change stored rows behind the append-only triggers (a superuser's replica role skips
    them), as damage or an attacker with the server's files would."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET session_replication_role = replica")
        connection.execute(statement, args or None)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    "data",
    [b"", b"x", COMPRESSIBLE, os.urandom(300_000), b"A" * 255, b"A" * 256],
    ids=["empty", "one", "compressible", "random", "small", "threshold"],
)
def test_same_digests_and_bytes_as_the_files(blobs: Any, tmp_path: Path, data: bytes) -> None:
    files = FileBlobStore(tmp_path / "blobs")
    digest = blobs.put(data)
    assert digest == files.put(data) == sha(data)
    assert blobs.get(digest) == data
    assert blobs.has(digest) and blobs.size(digest) == len(data)
    blobs.verify(digest)
    # The stored encoding is the files' (marker byte + zstd frame or raw), byte for byte.
    rows = sql(blobs._url, "SELECT data FROM blob_chunks WHERE digest = %s ORDER BY seq", digest)
    assert b"".join(bytes(row[0]) for row in rows) == files.path(digest).read_bytes()


def test_large_blob_is_chunked_and_reads_back(blobs: Any) -> None:
    from evopolicygym.records.pgblobs import CHUNK_BYTES

    data = os.urandom(2 * CHUNK_BYTES + 12345)  # random: stored raw, so 3 chunks
    digest = blobs.put(data)
    header = sql(
        blobs._url, "SELECT size, stored_size, chunks FROM blobs WHERE digest = %s", digest
    )
    assert header == [(len(data), len(data) + 1, 3)]
    sizes = sql(
        blobs._url,
        "SELECT seq, length(data) FROM blob_chunks WHERE digest = %s ORDER BY seq",
        digest,
    )
    assert sizes == [(0, CHUNK_BYTES), (1, CHUNK_BYTES), (2, 12345 + 1)]
    assert blobs.get(digest) == data


def test_put_is_idempotent_across_threads_and_processes(blobs: Any, url: str) -> None:
    data = COMPRESSIBLE + b"shared"
    with ThreadPoolExecutor(8) as pool:
        digests = set(pool.map(lambda _: blobs.put(data), range(16)))
    code = textwrap.dedent(
        f"""
        import sys
        from evopolicygym.records.pgblobs import PgBlobStore
        store = PgBlobStore({url!r})
        print(store.put(sys.stdin.buffer.read()))
        """
    )
    children = [
        subprocess.run(
            [sys.executable, "-c", code], input=data, capture_output=True, check=True, cwd=ROOT
        )
        for _ in range(3)
    ]
    digests |= {child.stdout.decode().strip() for child in children}
    assert digests == {sha(data)}
    assert sql(url, "SELECT count(*) FROM blobs") == [(1,)]
    assert sql(url, "SELECT count(*) FROM blob_chunks") == [(1,)]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE blob_chunks SET data = 'x'::bytea",
        "DELETE FROM blob_chunks",
        "UPDATE blobs SET size = 0",
        "DELETE FROM blobs",
        "TRUNCATE blobs CASCADE",
        "DELETE FROM program_trees",
    ],
)
def test_the_tables_are_append_only(blobs: Any, url: str, statement: str) -> None:
    import psycopg

    digest = blobs.put(COMPRESSIBLE)
    blobs.put_program(Program.from_files({"policy.py": b"def make_policy(c):\n    return None\n"}))
    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        sql(url, statement)
    assert blobs.get(digest) == COMPRESSIBLE


def test_a_flipped_chunk_byte_is_corrupt_naming_the_digest(blobs: Any, url: str) -> None:
    data = os.urandom(5000)
    digest = blobs.put(data)
    tamper(
        url,
        "UPDATE blob_chunks SET data = set_byte(data, 100, get_byte(data, 100) # 1) "
        "WHERE digest = %s",
        digest,
    )
    with pytest.raises(BlobCorrupt) as caught:
        blobs.get(digest)
    assert caught.value.digest == digest and "hashes to" in str(caught.value)
    with pytest.raises(BlobCorrupt):
        blobs.verify(digest)


def test_damaged_frames_and_rows_are_corrupt(blobs: Any, url: str) -> None:
    compressed = blobs.put(COMPRESSIBLE)
    tamper(
        url,
        "UPDATE blob_chunks SET data = substring(data from 1 for 40) WHERE digest = %s",
        compressed,
    )
    with pytest.raises(BlobCorrupt, match="chunks hold 40 bytes"):
        blobs.get(compressed)
    raw = blobs.put(b"raw bytes")
    tamper(
        url,
        "UPDATE blob_chunks SET data = 'Q'::bytea || substring(data from 2) WHERE digest = %s",
        raw,
    )
    with pytest.raises(BlobCorrupt, match="unknown marker byte"):
        blobs.get(raw)
    gone = blobs.put(b"its chunk goes")
    tamper(url, "DELETE FROM blob_chunks WHERE digest = %s", gone)
    with pytest.raises(BlobCorrupt, match="holds chunks none of 1") as caught:
        blobs.get(gone)
    assert caught.value.digest == gone


def test_programs_round_trip_and_share_file_blobs(blobs: Any, url: str) -> None:
    shared = b"import math\n" * 40
    one = Program.from_files(
        {"policy.py": b"def make_policy(c):\n    return 1\n", "lib/util.py": shared}
    )
    two = Program.from_files(
        {"policy.py": b"def make_policy(c):\n    return 2\n", "lib/util.py": shared}
    )
    for program in (one, two, one):
        assert blobs.put_program(program) == program.digest
    assert blobs.get_program(one.digest).files == one.files
    assert blobs.get_program(two.digest).digest == two.digest
    assert blobs.has_program(one.digest) and not blobs.has_program(sha(b"no program"))
    assert list(blobs.program_digests()) == sorted([one.digest, two.digest])
    assert sql(url, "SELECT count(*) FROM blobs") == [(5,)]  # 3 distinct files + 2 trees
    with pytest.raises(BlobMissing) as caught:
        blobs.get_program(sha(b"no program"))
    assert caught.value.kind == "program"


def test_a_corrupt_file_or_tree_reference_breaks_get_program(blobs: Any, url: str) -> None:
    program = Program.from_files({"policy.py": b"def make_policy(c):\n    return 3\n"})
    blobs.put_program(program)
    file_blob = sha(program.files[0][1])
    tamper(
        url,
        "UPDATE blob_chunks SET data = 'R'::bytea || 'other'::bytea WHERE digest = %s",
        file_blob,
    )
    with pytest.raises(BlobCorrupt, match=r"policy\.py") as caught:
        blobs.get_program(program.digest)
    assert caught.value.digest == program.digest and caught.value.kind == "program"
    other = Program.from_files({"policy.py": b"def make_policy(c):\n    return 4\n"})
    blobs.put_program(other)
    tamper(url, "UPDATE program_trees SET tree = 'not a digest' WHERE digest = %s", other.digest)
    with pytest.raises(BlobCorrupt, match="not a digest"):
        blobs.get_program(other.digest)


def test_a_dropped_connection_is_reopened(blobs: Any, url: str) -> None:
    digest = blobs.put(b"before")
    backend = blobs._connection().info.backend_pid
    sql(url, "SELECT pg_terminate_backend(%s)", backend)
    assert blobs.get(digest) == b"before"
    assert blobs.put(b"after") == sha(b"after")


def test_opening_without_tables_says_how_to_create_them(url: str) -> None:
    from evopolicygym.records.pgblobs import PgBlobStore

    with pytest.raises(StoreError, match="record create"):
        PgBlobStore(url)


def test_open_store_on_a_url_uses_the_database_and_a_local_cache(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with open_store(url, create=True) as store:
        assert store.url == StoreUrl(url) and store.location == StoreUrl(url)
        assert store.path == StoreUrl(url).cache_dir and store.path.is_dir()
        assert store.path.is_relative_to(tmp_path / "cache")
        assert store.read_models_path.parent == store.path
        digest = store.blobs.put(b"in the database")
    assert not any(p.name == "blobs" for p in (tmp_path / "cache").rglob("*"))
    monkeypatch.setenv("EVOPOLICY_STORE", url)
    with open_store() as store:
        assert store.blobs.get(digest) == b"in the database"
    with pytest.raises(StoreError, match="give a store directory"):
        resolve_store_path()  # what needs a directory is told it has none, never given the cache


def test_store_urls_mask_their_password() -> None:
    secret = StoreUrl(
        "postgresql://alice:s3cret@db.example:5433/runs?password=s3cret&sslmode=require"
    )
    assert "s3cret" not in str(secret) and "s3cret" not in repr(secret)
    assert str(secret) == "postgresql://alice:***@db.example:5433/runs?password=***&sslmode=require"
    other = StoreUrl("postgresql://alice:another@db.example:5433/runs?sslmode=require")
    assert secret.cache_dir == other.cache_dir  # the password does not name the store
    assert StoreUrl("postgresql://alice@db.example:5433/other").cache_dir != other.cache_dir
    assert resolve_store("postgres://h/db") == StoreUrl("postgres://h/db")
    assert resolve_store("some/dir") == Path("some/dir")


def test_a_missing_database_is_an_error_naming_it_without_password(databases: None) -> None:
    missing = pg.url_of(pg.PREFIX + "missing_" + os.urandom(4).hex())
    with_password = missing.replace("postgres@", "postgres:hunter2@", 1)
    with pytest.raises(StoreError) as caught:
        open_store(with_password)
    assert "hunter2" not in str(caught.value)


def test_directory_stores_never_import_psycopg(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from evopolicygym.records.location import open_store
        with open_store({str(tmp_path / "store")!r}, create=True) as store:
            store.blobs.put(b"x")
        print("psycopg" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, cwd=ROOT, text=True
    )
    assert out.stdout.strip() == "False"


def test_verify_reports_a_disabled_blob_trigger(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evopolicygym.records.verify import verify_store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with open_store(url, create=True) as store:
        assert verify_store(store).ok
        sql(url, "ALTER TABLE blob_chunks DISABLE TRIGGER blob_chunks_append_only")
        report = verify_store(store)
    assert [(p.kind, p.message) for p in report.problems] == [
        ("storage", "trigger blob_chunks_append_only is disabled: blob_chunks is not append-only")
    ]


def test_a_run_lock_is_seen_by_every_session_and_ends_with_its_holder(url: str) -> None:
    from evopolicygym.records.pglocks import LockHeld, held, run_lock

    code = textwrap.dedent(
        f"""
        import sys, time
        from evopolicygym.records.pglocks import run_lock
        with run_lock({url!r}, "run-a"):
            print("held", flush=True)
            time.sleep(600)
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=ROOT, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert held(url, "run-a") and not held(url, "run-b")
        with pytest.raises(LockHeld, match="run-a"), run_lock(url, "run-a"):
            pass
        with run_lock(url, "run-b"):
            assert held(url, "run-b")
        assert not held(url, "run-b")
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10  # the server notices the closed socket at once
    while held(url, "run-a") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not held(url, "run-a")
    with run_lock(url, "run-a"):
        pass
